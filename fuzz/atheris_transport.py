"""Differential fuzzing of the whole transport with atheris: any bytes, served by ``rpcwire`` (native)
and ``rpcwire.pure``, must give the same output, every message written (a line, or a ``Content-Length``
frame's body) one JSON object or array.

Coverage comes from ``rpcwire.pure`` and ``json`` (instrumented here), so the inputs that reach new
branches of the reference implementation are kept and mutated; the native module is compared on each.
The first byte picks the limits (small ``max_message_bytes``, shallow ``max_depth``, ``max_batch``)
and the framing (newline, or ``Content-Length`` as LSP's base protocol has it); the rest is the stream.
Run by ``make fuzz-atheris`` (fuzz/fuzz.mk), which installs atheris:

    .venv/bin/python fuzz/atheris_transport.py -max_total_time=60 fuzz/corpus/transport tests/fuzz_corpus/transport
"""

from __future__ import annotations

import io
import json
import sys
from typing import Any

import atheris

with atheris.instrument_imports(include=["rpcwire", "json"]):
    import rpcwire
    import rpcwire.pure


def handler(method: str, params: Any) -> Any:
    if method == "missing":
        raise rpcwire.MethodNotFound(data=params)
    if method == "boom":
        raise ValueError(params)
    return params


def limits(selector: int) -> dict[str, Any]:
    """From an input's first byte: ``max_message_bytes`` (bits 0-1), ``max_depth`` (2-3), ``max_batch`` (4-5),
    ``framing`` (6)."""
    return {
        "max_message_bytes": [rpcwire.DEFAULT_MAX_MESSAGE_BYTES, 1, 16, 64][selector & 3],
        "max_depth": [rpcwire.DEFAULT_MAX_DEPTH, 1, 2, 127][(selector >> 2) & 3],
        "max_batch": [None, None, 1, 2][(selector >> 4) & 3],
        "framing": ["newline", "content-length"][(selector >> 6) & 1],
    }


def written(out: bytes, framing: str) -> list[bytes]:
    """The messages in what was written: its lines, or its frames' bodies (each frame exactly as the cores
    write one: ``Content-Length: N``, a blank line, N bytes)."""
    if framing == "newline":
        return out.splitlines()
    bodies = []
    while out:
        header, blank, rest = out.partition(b"\r\n\r\n")
        if not (blank and header.startswith(b"Content-Length: ") and header[16:].isdigit()):
            raise AssertionError(f"not a frame's header: {out[:80]!r}")
        length = int(header[16:])
        if len(rest) < length:
            raise AssertionError(f"a frame cut short: {out[:80]!r}")
        bodies.append(rest[:length])
        out = rest[length:]
    return bodies


def serve(impl: Any, data: bytes, options: dict[str, Any]) -> tuple[bytes, str | None]:
    out = io.BytesIO()
    try:
        impl.serve(handler, impl.StdioTransport(io.BytesIO(data), out, **options))
    except Exception as exc:
        return out.getvalue(), type(exc).__name__
    return out.getvalue(), None


def test_one_input(data: bytes) -> None:
    if not data:
        return
    options, stream = limits(data[0]), data[1:]
    native = serve(rpcwire, stream, options)
    pure = serve(rpcwire.pure, stream, options)
    if native != pure:
        raise AssertionError(f"native and pure differ on {stream!r} with {options}:\n{native!r}\n{pure!r}")
    for message in written(native[0], options["framing"]):
        if not isinstance(json.loads(message), (dict, list)):
            raise AssertionError(f"not an object or an array: {message!r}")


def main() -> None:
    sys.setrecursionlimit(10_000)
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()

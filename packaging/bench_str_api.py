"""What the public C API's `str` path costs (src/codec.rs: CPython 3.14, PyPy, GraalPy, the limited API).

Two builds of the same source on one CPython, the default (CPython's string internals) and
``--features public-str-api`` (PyUnicode_AsUTF8AndSize only), each unpacked into its own directory:

    maturin build --release -i python3.11 --out /tmp/internal
    maturin build --release -i python3.11 --features public-str-api --out /tmp/public
    python packaging/bench_str_api.py internals=/tmp/internal/*.whl "public API"=/tmp/public/*.whl

(Any builds, e.g. an abi3 one: ``--features pyo3/abi3-py310``; the first is the baseline of the ratios.)

Each build encodes the same payloads (``StdioTransport._answer_result``: one answer line) in a child process of
its own, alternating, and the medians are compared. "fresh" payloads are new `str` objects at each encoding (what
a server answers); non-ASCII ones then pay UTF-8 conversion on the public path, which CPython caches in the `str`
("again": the same objects encoded a second time).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

CHILD = r"""
import json, sys, time
from rpcwire._rpcwire import StdioTransport

def items(n, text):
    return [{"name": f"{text}{i}", "kind": "function", "detail": f"({text}) -> {i}",
             "documentation": text * 4 + str(i)} for i in range(n)]

PAYLOADS = {
    "short ASCII (10k items, 40k str)": lambda: items(10_000, "completion_"),
    "long ASCII (1k str of 4 KiB)": lambda: ["".join(["abcdefgh"] * 512) + str(i) for i in range(1_000)],
    "Latin-1 (10k items)": lambda: items(10_000, "café_déjà_"),
    "CJK (10k items)": lambda: items(10_000, "補完候補_"),
}
# Serving: 5,000 requests (params: a short list and a dict) read, decoded, dispatched, answered, encoded.
REQUESTS = b"".join(
    b'{"jsonrpc":"2.0","method":"echo","params":{"name":"item%d","tags":["a","b","c"],"n":%d},"id":%d}\n' % (i, i, i)
    for i in range(5_000)
)
repeats = int(sys.argv[1])
results = {}
for name, make in PAYLOADS.items():
    fresh = [make() for _ in range(repeats)]
    times = []
    for payload in fresh:
        start = time.perf_counter()
        StdioTransport._answer_result(b"1", payload)
        times.append(time.perf_counter() - start)
    again = []
    for payload in fresh:
        start = time.perf_counter()
        StdioTransport._answer_result(b"1", payload)
        again.append(time.perf_counter() - start)
    results[name] = {"fresh": times, "again": again}
import io
serve = []
for _ in range(repeats):
    out = io.BytesIO()
    transport = StdioTransport(io.BytesIO(REQUESTS), out)
    start = time.perf_counter()
    transport.serve(lambda method, params: params)
    serve.append(time.perf_counter() - start)
results["serve 5k requests"] = {"fresh": serve}
print(json.dumps(results))
"""


def unpack(wheel: Path, into: Path) -> Path:
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(into)
    return into


def main() -> int:
    wheels = dict(argument.split("=", 1) for argument in sys.argv[1:])
    rounds, repeats = 5, 9
    with tempfile.TemporaryDirectory() as tmp:
        builds = {name: unpack(Path(wheel), Path(tmp) / str(i)) for i, (name, wheel) in enumerate(wheels.items())}
        samples: dict[str, dict[str, dict[str, list[float]]]] = {build: {} for build in builds}
        for _ in range(rounds):
            for build, path in builds.items():
                done = subprocess.run(
                    [sys.executable, "-c", CHILD, str(repeats)],
                    env={"PYTHONPATH": str(path)},
                    capture_output=True,
                    text=True,
                    check=True,
                )
                for payload, kinds in json.loads(done.stdout).items():
                    for kind, times in kinds.items():
                        samples[build].setdefault(payload, {}).setdefault(kind, []).extend(times)
    baseline, *others = builds
    print(f"{'payload':<36} {'':6}" + "".join(f" {build:>14}" for build in builds))
    for payload, kinds in samples[baseline].items():
        for kind in kinds:
            base = statistics.median(samples[baseline][payload][kind]) * 1000
            cells = [f"{base:>12.2f}ms"]
            for build in others:
                median = statistics.median(samples[build][payload][kind]) * 1000
                cells.append(f"{median:>7.2f}ms {median / base:>4.2f}x")
            print(f"{payload:<36} {kind:6} " + " ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())

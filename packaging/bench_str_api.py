"""What the public C API's `str` path costs (src/codec.rs: CPython 3.14, PyPy, GraalPy, the limited API), in
instructions counted by callgrind (deterministic: this machine is shared, its wall-clock times are not).

Builds of the same source on one CPython: the default (CPython's string internals), ``--features public-str-api``
(PyUnicode_AsUTF8AndSize only) and, for the abi3 question, ``--features pyo3/abi3-py310``:

    maturin build --release -i python3.11 --out /tmp/internals
    maturin build --release -i python3.11 --features public-str-api --out /tmp/public
    maturin build --release -i python3.11 --features pyo3/abi3-py310 --out /tmp/abi3
    python3.11 packaging/bench_str_api.py internals=/tmp/internals/*.whl public=/tmp/public/*.whl abi3=/tmp/abi3/*.whl

Each workload runs in a child under ``valgrind --tool=callgrind`` (the package compiled beforehand, the hash seed
fixed), once without the measured call (building the payload, starting Python) and once with it; the difference
is the call's count. The encodings take fresh `str`
objects (what a server answers): non-ASCII ones then pay their UTF-8 conversion on the public path, which CPython
keeps in the `str` afterwards. The first build is the baseline of the ratios.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

CHILD = r"""
import io, sys
from rpcwire._rpcwire import StdioTransport

workload, measured = sys.argv[1], sys.argv[2] == "1"

def items(n, text):
    return [{"name": f"{text}{i}", "kind": "function", "detail": f"({text}) -> {i}",
             "documentation": text * 4 + str(i)} for i in range(n)]

PAYLOADS = {
    "short ASCII": lambda: items(2_000, "completion_"),
    "long ASCII": lambda: ["abcdefgh" * 512 + str(i) for i in range(200)],
    "Latin-1": lambda: items(2_000, "café_déjà_"),
    "CJK": lambda: items(2_000, "補完候補_"),
}
if workload == "serve":
    requests = b"".join(
        b'{"jsonrpc":"2.0","method":"echo","params":{"name":"item%d","tags":["a","b","c"],"n":%d},"id":%d}\n'
        % (i, i, i) for i in range(2_000)
    )
    transport = StdioTransport(io.BytesIO(requests), io.BytesIO())
    if measured:
        transport.serve(lambda method, params: params)
else:
    fresh = [PAYLOADS[workload]() for _ in range(3)]
    if measured:
        for payload in fresh:
            StdioTransport._answer_result(b"1", payload)
"""

VALGRIND = ("valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null")
WORKLOADS = {
    "short ASCII": "encode 3 x 2,000 items (8 short ASCII str each)",
    "long ASCII": "encode 3 x 200 ASCII str of 4 KiB",
    "Latin-1": "encode 3 x 2,000 items, Latin-1 text",
    "CJK": "encode 3 x 2,000 items, CJK text",
    "serve": "serve 2,000 requests (read, decode, answer, encode)",
}


def instructions(package: Path, workload: str, measured: bool) -> int:
    done = subprocess.run(
        [*VALGRIND, sys.executable, "-c", CHILD, workload, "1" if measured else "0"],
        env={"PYTHONPATH": str(package), "PYTHONHASHSEED": "0"},
        capture_output=True,
        text=True,
        check=True,
    )
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise SystemExit(done.stderr)
    return int(found[1])


def main() -> int:
    wheels = dict(argument.split("=", 1) for argument in sys.argv[1:])
    with tempfile.TemporaryDirectory() as tmp:
        builds = {}
        for i, (name, wheel) in enumerate(wheels.items()):
            with zipfile.ZipFile(wheel) as archive:
                archive.extractall(Path(tmp) / str(i))
            builds[name] = Path(tmp) / str(i)
            # Compiled once here, so that neither of a workload's two runs compiles the package.
            subprocess.run([sys.executable, "-m", "compileall", "-q", str(builds[name])], check=True)
        print(f"{'workload':<52}" + "".join(f" {name:>20}" for name in builds))
        for workload, label in WORKLOADS.items():
            counts = {
                name: instructions(path, workload, True) - instructions(path, workload, False)
                for name, path in builds.items()
            }
            base = next(iter(counts.values()))
            cells = [f"{count / 1e6:>10.2f}M ({count / base:4.2f}x)" for count in counts.values()]
            print(f"{label:<52} " + " ".join(f"{cell:>20}" for cell in cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())

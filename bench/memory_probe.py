"""Peak memory of one implementation on the "large" workload, in a fresh process.

`python bench/memory_probe.py IMPL FILE` reads the "large" input from FILE (written by bench/run.py)
into an `io.BytesIO` in one allocation, returns free heap memory to the system (`malloc_trim`, so
that reused free pages do not hide allocations), resets the process's RSS high-water mark (Linux:
`/proc/self/clear_refs`), serves the input into a sink that
counts and drops the answers, and prints one JSON object: the RSS high-water mark above the RSS held
before serving (input included there, output never held), the input's size and one message's size.
RSS covers everything: Python objects, the Rust core's buffers and memory an allocator keeps.
`IMPL` may also be `decoded`: only `json.loads` of one message, kept alive (what any handler holds).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import gc
import io
import json
import resource
import sys
import time
from pathlib import Path

from implementations import IMPLS


class Sink(io.RawIOBase):
    """A binary output that counts answer lines and keeps nothing."""

    def __init__(self) -> None:
        super().__init__()
        self.lines = 0
        self.bytes = 0

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:  # type: ignore[override]
        n = len(data)
        self.lines += bytes(data).count(b"\n")
        self.bytes += n
        return n


def _status(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(field)


def _reset_high_water() -> str:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return "VmHWM after clear_refs"
    except OSError:
        return "ru_maxrss (not reset: includes building the input)"


def _trim() -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim(0)


def main(name: str, path: str) -> None:
    data = Path(path).read_bytes()
    n = data.count(b"\n")
    message_bytes = len(data) // n
    inp = io.BytesIO(data)
    sink = Sink()
    if name == "decoded":
        serve = None
        line = inp.readline()
    else:
        serve = IMPLS[name].serve
    gc.collect()
    _trim()
    before = _status("VmRSS")
    how = _reset_high_water()
    start = time.perf_counter()
    if serve is None:
        held = json.loads(line)
    else:
        serve(inp, sink)
    seconds = time.perf_counter() - start
    peak = _status("VmHWM") if how.startswith("VmHWM") else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    if serve is None:
        del held
    result = {
        "impl": name,
        "messages": n,
        "input_bytes": len(data),
        "message_bytes": message_bytes,
        "rss_before": before,
        "peak_extra_bytes": peak - before,
        "answers": sink.lines,
        "seconds": seconds,
        "measured": how,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

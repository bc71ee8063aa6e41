"""Run timed in-memory workloads on request, in a process of its own: `python bench/worker.py`.

bench/run.py starts it with another build of rpcwire first on `PYTHONPATH` (`--baseline DIR`: two builds of
the native module cannot be imported in one process) and sends one JSON command a line on stdin; each is
answered with one JSON line on stdout, so the baseline takes its turn in the same rotation as the others:

    {"workload": "stream", "quick": false}                                   -> {"seconds", "messages", "check"}
    {"workload": "items", "mode": "echo", "quick": false, "head": 1000}      -> the same, a payload workload
"""

from __future__ import annotations

import gc
import json
import sys
import time

import implementations
import workloads

_built: dict[tuple, workloads.Workload] = {}


def _workload(command: dict) -> workloads.Workload:
    key = (command["workload"], command.get("mode"), command["quick"])
    if key not in _built:
        if command.get("mode"):
            _built[key] = workloads.payload_workload(command["workload"], command["mode"], command["quick"])
        else:
            _built[key] = workloads.build(command["workload"], command["quick"])
    work = _built[key]
    return work.head(command["head"]) if command.get("head") else work


def run(command: dict) -> dict:
    work = _workload(command)
    gc.collect()
    if command.get("mode"):
        payload = work.expected_result if command["mode"] != "decode" else None
        handler = implementations.payload_handler(command["mode"], payload)
        start = time.perf_counter()
        out = implementations.serve_payload("rpcwire", work.data, handler)
    else:
        start = time.perf_counter()
        out = implementations.run(implementations.IMPLS["rpcwire"], work.data)
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "messages": work.messages, "check": vars(workloads.check(work, out))}


def main() -> None:
    for line in sys.stdin:
        print(json.dumps(run(json.loads(line))), flush=True)


if __name__ == "__main__":
    main()

"""rpcwire against its peers: `make bench`, or `.venv/bin/python bench/run.py [--quick] [--repeats N] [--only ...]`.

Each workload runs every implementation in this one process run, interleaved (the order rotates
each repeat), several repeats; the report gives medians. The in-memory workloads serve an
`io.BytesIO` into an `io.BytesIO`; the pipe workloads start bench/pipe_server.py per run; peak
memory of "large" is measured in a fresh process per implementation (bench/memory_probe.py). The
concurrent workloads run rpcwire and rpcwire.pure through the engine (threads, asyncio) beside their
sequential `serve` and mcp-stdio; a mode the build cannot run is reported "not available".
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import implementations
import pipe_workloads
import report
import workloads

HERE = Path(__file__).parent
IN_MEMORY = ("stream", "batch", "large")
PAYLOADS = tuple(workloads.PAYLOADS)  # issue 11: each in the modes decode, encode, echo
PIPES = ("ping-pong", "pipelined")
CONCURRENT = ("concurrent-sleep", "pipelined-concurrent")
ALL = IN_MEMORY + PAYLOADS + PIPES + CONCURRENT
# Default repeats: the cheap workloads more, the long ones fewer (--repeats sets them all).
REPEATS = {
    "stream": 5,
    "batch": 5,
    "large": 3,
    **dict.fromkeys(PAYLOADS, 7),
    "ping-pong": 3,
    "pipelined": 3,
    "concurrent-sleep": 5,
    "pipelined-concurrent": 3,
}
PIPE_COUNTS = {"ping-pong": 20_000, "pipelined": 100_000, "pipelined-concurrent": 100_000}
# pipelined-concurrent: the concurrent variants beside the sequential serve of their package and this peer.
CONCURRENT_PEERS = ("mcp-stdio",)


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def rotated(items: list, r: int) -> list:
    k = r % len(items)
    return items[k:] + items[:k]


class BaselineWorker:
    """The baseline build (`--baseline DIR`) in a process of its own (bench/worker.py), run on request."""

    def __init__(self) -> None:
        baseline = os.environ[implementations.BASELINE_PATH_VARIABLE]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([baseline, os.environ.get("PYTHONPATH", "")])}
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "worker.py")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
        )

    def run(self, **command: object) -> dict:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline()
        if not answer:
            raise RuntimeError("the baseline worker (bench/worker.py) stopped")
        return json.loads(answer)

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def run_in_memory(
    name: str, impls: list[implementations.Impl], repeats: int, quick: bool, worker: BaselineWorker | None
) -> dict:
    full = workloads.build(name, quick)
    inputs = {impl.name: full.head(impl.limit(name) or full.messages) for impl in impls}
    warm = 2 if name == "large" else 1_000
    for impl in impls:  # warm-up, not timed: imports, caches, first-call paths
        implementations.run(impl, full.head(warm).data)
    if worker:
        worker.run(workload=name, quick=quick, head=warm)
    names = [impl.name for impl in impls] + ([implementations.BASELINE] if worker else [])
    runs: dict[str, list[dict]] = {impl: [] for impl in names}
    for r in range(repeats):
        for impl in rotated(names, r):
            if impl == implementations.BASELINE:
                entry = worker.run(workload=name, quick=quick)  # type: ignore[union-attr]
            else:
                work = inputs[impl]
                gc.collect()
                start = time.perf_counter()
                out = implementations.run(implementations.IMPLS[impl], work.data)
                seconds = time.perf_counter() - start
                entry = {"seconds": seconds, "messages": work.messages, "check": vars(workloads.check(work, out))}
                del out
            runs[impl].append(entry)
            ok = workloads.Checked(**entry["check"]).ok
            log(f"  {name} #{r + 1} {impl}: {entry['seconds'] / entry['messages'] * 1e6:.2f} µs/msg, ok={ok}")
    return {"messages": full.messages, "malformed": full.malformed, "runs": runs}


def run_payload(name: str, impls: list[str], repeats: int, quick: bool, worker: BaselineWorker | None) -> dict:
    """One payload workload in each mode (decode, encode, echo): every implementation, interleaved, `repeats` times.

    Returns one result per mode, named "NAME/MODE", shaped as the in-memory workloads' results.
    """
    results = {}
    names = impls + ([implementations.BASELINE] if worker else [])
    for mode in workloads.PAYLOAD_MODES:
        work = workloads.payload_workload(name, mode, quick)
        handler = implementations.payload_handler(mode, work.expected_result)
        warm = max(1, work.messages // 10)
        for impl in impls:  # warm-up, not timed
            implementations.serve_payload(impl, work.head(warm).data, handler)
        if worker:
            worker.run(workload=name, mode=mode, quick=quick, head=warm)
        runs: dict[str, list[dict]] = {impl: [] for impl in names}
        for r in range(repeats):
            for impl in rotated(names, r):
                if impl == implementations.BASELINE:
                    entry = worker.run(workload=name, mode=mode, quick=quick)  # type: ignore[union-attr]
                else:
                    gc.collect()
                    start = time.perf_counter()
                    out = implementations.serve_payload(impl, work.data, handler)
                    seconds = time.perf_counter() - start
                    entry = {"seconds": seconds, "messages": work.messages, "check": vars(workloads.check(work, out))}
                    del out
                runs[impl].append(entry)
                ok = workloads.Checked(**entry["check"]).ok
                log(f"  {work.name} #{r + 1} {impl}: {entry['seconds'] / entry['messages'] * 1e6:.2f} µs/msg, ok={ok}")
        results[work.name] = {"messages": work.messages, "malformed": 0, "payload": name, "mode": mode, "runs": runs}
    return results


def run_concurrent_sleep(impls: list[implementations.Impl], repeats: int) -> dict:
    """Every mode of rpcwire and rpcwire.pure on 1,000 sleeping requests: wall time (report.py: the ratio to ideal)."""
    work = workloads.build("concurrent-sleep", quick=False)
    variants = [
        v
        for impl in impls
        if impl.name in implementations.CONCURRENT_BASES
        for v in implementations.sleep_variants(impl.name)
    ]
    unavailable = {}
    for variant in variants:  # warm-up, not timed (threads, event loop, first-call paths), and the probe
        if (why := implementations.unavailable(variant, work.head(100).data)) is not None:
            unavailable[variant.name] = why
            log(f"  concurrent-sleep {variant.name}: {why}")
    variants = [v for v in variants if v.name not in unavailable]
    runs: dict[str, list[dict]] = {v.name: [] for v in variants}
    for r in range(repeats):
        for variant in rotated(variants, r) if variants else []:
            gc.collect()
            start = time.perf_counter()
            out = implementations.run(variant, work.data)
            seconds = time.perf_counter() - start
            checked = workloads.check(work, out)
            runs[variant.name].append({"seconds": seconds, "messages": work.messages, "check": vars(checked)})
            log(f"  concurrent-sleep #{r + 1} {variant.name}: {seconds * 1e3:.1f} ms, ok={checked.ok}")
    ideal = work.messages * implementations.SLEEP_SECONDS / implementations.SLEEP_CONCURRENCY
    return {
        "messages": work.messages,
        "malformed": 0,
        "sleep_seconds": implementations.SLEEP_SECONDS,
        "max_concurrency": implementations.SLEEP_CONCURRENCY,
        "ideal_seconds": ideal,
        "modes": {v.name: v.mode for v in variants} | {name: name.split("/")[1] for name in unavailable},
        "unavailable": unavailable,
        "runs": runs,
    }


def run_pipelined_concurrent(impls: list[implementations.Impl], repeats: int, quick: bool) -> dict:
    """pipelined, with rpcwire and rpcwire.pure also served by the engine (threads, asyncio), beside mcp-stdio."""
    chosen = []
    unavailable = {}
    probe = workloads.concurrent_sleep(16).data  # 16 echo requests (the trivial handler: no sleep)
    for impl in impls:
        if impl.name in CONCURRENT_PEERS:
            chosen.append(impl)
        elif impl.name in implementations.CONCURRENT_BASES:
            chosen.append(impl)
            for variant in implementations.PIPE_VARIANTS.values():
                if variant.base != impl.name:
                    continue
                if (why := implementations.unavailable(variant, probe)) is not None:
                    unavailable[variant.name] = why
                    log(f"  pipelined-concurrent {variant.name}: {why}")
                else:
                    chosen.append(variant)
    result = run_pipe("pipelined-concurrent", chosen, repeats, quick) if chosen else {"messages": 0, "runs": {}}
    result["unavailable"] = unavailable
    result["modes"] = {
        impl.name: impl.mode or ("peer" if impl.name in CONCURRENT_PEERS else "sequential") for impl in chosen
    } | {name: name.split("/")[1] for name in unavailable}
    result["max_concurrency"] = implementations.PIPE_CONCURRENCY
    return result


def run_pipe(name: str, impls: list[implementations.Impl], repeats: int, quick: bool) -> dict:
    full = PIPE_COUNTS[name] // (10 if quick else 1)
    counts = {impl.name: min(full, impl.limit(name) or full) for impl in impls}
    measure = pipe_workloads.ping_pong if name == "ping-pong" else pipe_workloads.pipelined
    runs: dict[str, list[dict]] = {impl.name: [] for impl in impls}
    for r in range(repeats):
        for impl in rotated(impls, r):
            result = measure(impl.name, counts[impl.name])
            entry = {"seconds": result.seconds, "messages": result.messages, "check": vars(result.checked)}
            if result.latencies_ns is not None:
                entry["latency_us"] = report.percentiles(result.latencies_ns)
            if result.stderr:
                entry["stderr"] = result.stderr[-2000:]
            runs[impl.name].append(entry)
            log(f"  {name} #{r + 1} {impl.name}: {result.seconds / result.messages * 1e6:.2f} µs/msg")
    return {"messages": full, "malformed": 0, "runs": runs}


def _probe(name: str, path: Path) -> dict:
    """bench/memory_probe.py NAME PATH in a fresh process (the baseline: "rpcwire" from the baseline build)."""
    env = None
    if name == implementations.BASELINE:
        baseline = os.environ[implementations.BASELINE_PATH_VARIABLE]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([baseline, os.environ.get("PYTHONPATH", "")])}
    impl = "rpcwire" if name == implementations.BASELINE else name
    out = subprocess.run(
        [sys.executable, str(HERE / "memory_probe.py"), impl, str(path)],
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    if out.returncode != 0:
        return {"error": out.stderr[-2000:]}
    return json.loads(out.stdout)


def run_memory(impls: list[implementations.Impl], quick: bool, tmp: Path) -> dict:
    full = workloads.build("large", quick)
    files: dict[int, Path] = {}
    probes = {}
    for name in ["decoded", *(impl.name for impl in impls if impl.name != "orjson-loop")]:
        limit = implementations.IMPLS[name].limit("large") if name in implementations.IMPLS else None
        n = 1 if name == "decoded" else min(full.messages, limit or full.messages)
        if n not in files:
            files[n] = tmp / f"large-{n}.jsonl"
            files[n].write_bytes(full.head(n).data)
        probes[name] = _probe(name, files[n])
        if "error" not in probes[name]:
            log(f"  memory {name}: {probes[name]['peak_extra_bytes'] / 2**20:.1f} MiB")
    return probes


def run_payload_memory(payloads: list[str], impls: list[str], quick: bool, tmp: Path) -> dict:
    """Peak RSS of each implementation serving each payload workload (echo mode) once, in a fresh process."""
    probes: dict[str, dict] = {}
    for payload in payloads:
        work = workloads.payload_workload(payload, "echo", quick)
        path = tmp / f"{payload}.jsonl"
        path.write_bytes(work.data)
        probes[payload] = {"decoded": _probe("decoded", path)}
        for name in impls:
            probes[payload][name] = _probe(name, path)
        peaks = {name: probe.get("peak_extra_bytes", float("nan")) / 2**20 for name, probe in probes[payload].items()}
        log(f"  memory {payload}/echo: " + ", ".join(f"{name} {peak:.1f} MiB" for name, peak in peaks.items()))
    return probes


def run_workloads(
    into: dict,
    chosen: list[str],
    impls: list[implementations.Impl],
    payload_impls: list[str],
    args: argparse.Namespace,
    *,
    worker: BaselineWorker | None,
) -> None:
    """Every chosen workload (in ALL's order), its results added to `into`."""
    # orjson-loop has no envelope check nor error answers: only the payload workloads run it.
    impls = [impl for impl in impls if impl.name != "orjson-loop"]
    in_process = [impl for impl in impls if impl.name != implementations.BASELINE]
    for name in ALL:
        if name not in chosen:
            continue
        repeats = args.repeats or REPEATS[name]
        log(f"{name}: {len(impls)} implementations x {repeats} repeats")
        if name in IN_MEMORY:
            into[name] = run_in_memory(name, in_process, repeats, args.quick, worker)
        elif name in PAYLOADS:
            into.update(run_payload(name, payload_impls, repeats, args.quick, worker))
        elif name == "concurrent-sleep":
            into[name] = run_concurrent_sleep(in_process, repeats)
        elif name == "pipelined-concurrent":
            into[name] = run_pipelined_concurrent(in_process, repeats, args.quick)
        else:
            into[name] = run_pipe(name, impls, repeats, args.quick)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tenth of the messages: a smoke run")
    parser.add_argument("--repeats", type=int, help="repeats of every workload (default: 5 cheap, 3 long)")
    parser.add_argument(
        "--only", help=f"workloads, comma-separated, of: {','.join(ALL)} (and 'memory', 'payload-memory', 'payloads')"
    )
    parser.add_argument(
        "--impls", help=f"implementations, comma-separated (default all): {','.join(implementations.IMPLS)}"
    )
    parser.add_argument("--out", default=str(HERE / "results.json"), help="where to write the JSON")
    parser.add_argument(
        "--baseline",
        help="a directory holding another build's rpcwire package (e.g. a copy of python/rpcwire from an earlier "
        "commit, with its native module): measured beside the others as rpcwire@baseline (pipe workloads: its own "
        "server process; in-memory and payload workloads: bench/worker.py, a process of its own, in the same rotation)",
    )
    args = parser.parse_args(argv)
    if args.baseline:
        os.environ[implementations.BASELINE_PATH_VARIABLE] = str(Path(args.baseline).resolve())
        baseline = implementations.Impl(implementations.BASELINE, implementations.serve_native)
        implementations.IMPLS[baseline.name] = baseline

    chosen = args.only.split(",") if args.only else [*ALL, "memory", "payload-memory"]
    if "payloads" in chosen:
        chosen += [*PAYLOADS, "payload-memory"]
    names = args.impls.split(",") if args.impls else list(implementations.IMPLS)
    if args.baseline and implementations.BASELINE not in names:
        names.append(implementations.BASELINE)
    extra = ("memory", "payload-memory", "payloads")
    unknown = [w for w in chosen if w not in (*ALL, *extra)] + [i for i in names if i not in implementations.IMPLS]
    if unknown:
        parser.error(f"unknown: {', '.join(unknown)}")
    impls = [implementations.IMPLS[name] for name in names]

    results: dict = {
        "machine": report.machine_info(),
        "config": {"quick": args.quick, "repeats": args.repeats, "argv": sys.argv[1:]},
        "workloads": {},
    }
    started = time.perf_counter()
    # The baseline build can only be imported in a process of its own.
    worker = BaselineWorker() if implementations.BASELINE in names else None
    payload_impls = [name for name in names if name in implementations.PAYLOAD_IMPLS]
    run_workloads(results["workloads"], chosen, impls, payload_impls, args, worker=worker)
    if "memory" in chosen:
        log("memory (large, fresh process each)")
        with tempfile.TemporaryDirectory() as tmp:
            results["memory"] = run_memory(impls, args.quick, Path(tmp))
    chosen_payloads = [name for name in PAYLOADS if name in chosen]
    if "payload-memory" in chosen and chosen_payloads:
        log("memory (payload workloads, echo, fresh process each)")
        probed = payload_impls + ([implementations.BASELINE] if worker else [])
        with tempfile.TemporaryDirectory() as tmp:
            results["payload_memory"] = run_payload_memory(chosen_payloads, probed, args.quick, Path(tmp))
    if worker:
        worker.close()
    results["seconds"] = time.perf_counter() - started

    report.summarise(results)
    text = report.render(results)
    print(text)
    Path(args.out).write_text(json.dumps(results, indent=1) + "\n")
    png = report.plot(results, Path(args.out).with_suffix(".png"))
    print(f"\nraw timings: {args.out}" + (f"; chart: {png}" if png else "; no chart (matplotlib not importable)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())

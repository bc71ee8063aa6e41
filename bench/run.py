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
PIPES = ("ping-pong", "pipelined")
CONCURRENT = ("concurrent-sleep", "pipelined-concurrent")
ALL = IN_MEMORY + PIPES + CONCURRENT
# Default repeats: the cheap workloads more, the long ones fewer (--repeats sets them all).
REPEATS = {
    "stream": 5,
    "batch": 5,
    "large": 3,
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


def run_in_memory(name: str, impls: list[implementations.Impl], repeats: int, quick: bool) -> dict:
    full = workloads.build(name, quick)
    inputs = {impl.name: full.head(impl.limit(name) or full.messages) for impl in impls}
    for impl in impls:  # warm-up, not timed: imports, caches, first-call paths
        implementations.run(impl, full.head(2 if name == "large" else 1_000).data)
    runs: dict[str, list[dict]] = {impl.name: [] for impl in impls}
    for r in range(repeats):
        for impl in rotated(impls, r):
            work = inputs[impl.name]
            gc.collect()
            start = time.perf_counter()
            out = implementations.run(impl, work.data)
            seconds = time.perf_counter() - start
            checked = workloads.check(work, out)
            del out
            runs[impl.name].append({"seconds": seconds, "messages": work.messages, "check": vars(checked)})
            log(f"  {name} #{r + 1} {impl.name}: {seconds / work.messages * 1e6:.2f} µs/msg, ok={checked.ok}")
    return {"messages": full.messages, "malformed": full.malformed, "runs": runs}


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


def run_memory(impls: list[implementations.Impl], quick: bool, tmp: Path) -> dict:
    full = workloads.build("large", quick)
    files: dict[int, Path] = {}
    probes = {}
    for name in ["decoded", *(impl.name for impl in impls if impl.name != implementations.BASELINE)]:
        n = 1 if name == "decoded" else min(full.messages, implementations.IMPLS[name].limit("large") or full.messages)
        if n not in files:
            files[n] = tmp / f"large-{n}.jsonl"
            files[n].write_bytes(full.head(n).data)
        out = subprocess.run(
            [sys.executable, str(HERE / "memory_probe.py"), name, str(files[n])],
            capture_output=True,
            text=True,
            check=False,
        )
        if out.returncode != 0:
            probes[name] = {"error": out.stderr[-2000:]}
            continue
        probes[name] = json.loads(out.stdout)
        log(f"  memory {name}: {probes[name]['peak_extra_bytes'] / 2**20:.1f} MiB")
    return probes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tenth of the messages: a smoke run")
    parser.add_argument("--repeats", type=int, help="repeats of every workload (default: 5 cheap, 3 long)")
    parser.add_argument("--only", help=f"workloads, comma-separated, of: {','.join(ALL)} (and 'memory')")
    parser.add_argument(
        "--impls", help=f"implementations, comma-separated (default all): {','.join(implementations.IMPLS)}"
    )
    parser.add_argument("--out", default=str(HERE / "results.json"), help="where to write the JSON")
    parser.add_argument(
        "--baseline",
        help="a directory holding another build's rpcwire package (e.g. a copy of python/rpcwire from an earlier "
        "commit, with its native module): measured beside the others as rpcwire@baseline, on the pipe workloads",
    )
    args = parser.parse_args(argv)
    if args.baseline:
        os.environ[implementations.BASELINE_PATH_VARIABLE] = str(Path(args.baseline).resolve())
        baseline = implementations.Impl(implementations.BASELINE, implementations.serve_native)
        implementations.IMPLS[baseline.name] = baseline

    chosen = args.only.split(",") if args.only else [*ALL, "memory"]
    names = args.impls.split(",") if args.impls else list(implementations.IMPLS)
    if args.baseline and implementations.BASELINE not in names:
        names.append(implementations.BASELINE)
    unknown = [w for w in chosen if w not in (*ALL, "memory")] + [i for i in names if i not in implementations.IMPLS]
    if unknown:
        parser.error(f"unknown: {', '.join(unknown)}")
    impls = [implementations.IMPLS[name] for name in names]

    results: dict = {
        "machine": report.machine_info(),
        "config": {"quick": args.quick, "repeats": args.repeats, "argv": sys.argv[1:]},
        "workloads": {},
    }
    started = time.perf_counter()
    for name in ALL:
        if name not in chosen:
            continue
        repeats = args.repeats or REPEATS[name]
        log(f"{name}: {len(impls)} implementations x {repeats} repeats")
        # The baseline build can only be imported in a process of its own.
        in_process = [impl for impl in impls if impl.name != implementations.BASELINE]
        if name in IN_MEMORY:
            results["workloads"][name] = run_in_memory(name, in_process, repeats, args.quick)
        elif name == "concurrent-sleep":
            results["workloads"][name] = run_concurrent_sleep(in_process, repeats)
        elif name == "pipelined-concurrent":
            results["workloads"][name] = run_pipelined_concurrent(in_process, repeats, args.quick)
        else:
            results["workloads"][name] = run_pipe(name, impls, repeats, args.quick)
    if "memory" in chosen:
        log("memory (large, fresh process each)")
        with tempfile.TemporaryDirectory() as tmp:
            results["memory"] = run_memory(impls, args.quick, Path(tmp))
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

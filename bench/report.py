# ruff: noqa: RUF001 (the multiplication sign in the report is on purpose)
"""Medians, ratios, the targets (issue 3, concurrent serving), the markdown report, machine info and the bar chart."""

from __future__ import annotations

import datetime
import importlib.metadata
import os
import platform
import statistics
import subprocess
from pathlib import Path

import implementations

NATIVE, PURE, ORJSON, MCP_STDIO = "rpcwire", "rpcwire.pure", "orjson", "mcp-stdio"
ORJSON_LOOP, BASELINE = "orjson-loop", implementations.BASELINE
SLEEP, PIPELINED_CONCURRENT = "concurrent-sleep", "pipelined-concurrent"
CONCURRENT = (SLEEP, PIPELINED_CONCURRENT)  # reported in sections of their own
MODE_LABELS = {
    "sequential": "sequential `serve`",
    "threads": "threads",
    "asyncio": "asyncio, async handler",
    "asyncio-sync": "asyncio, sync handler",
    "peer": "its own serving loop",
}
PEERS = ("orjson", "python-lsp-jsonrpc", "ujson", "jsonrpcserver", "json-rpc", "mcp", "pydantic", "anyio", "matplotlib")


def percentiles(latencies_ns: list[int]) -> dict[str, float]:
    ordered = sorted(latencies_ns)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))] / 1e3  # noqa: E731
    return {"p50": pick(0.50), "p90": pick(0.90), "p99": pick(0.99), "p999": pick(0.999), "max": ordered[-1] / 1e3}


def machine_info() -> dict:
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    versions = {}
    for name in ("rpcwire", *PEERS):
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    try:
        commit = subprocess.run(
            ["git", "describe", "--always", "--dirty"],
            capture_output=True,
            text=True,
            check=False,
            cwd=Path(__file__).parent,
        ).stdout.strip()
    except OSError:
        commit = ""
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "rpcwire_commit": commit,
        "versions": versions,
    }


def _all_ok(runs: list[dict]) -> bool:
    return all(
        run["check"]["answered"] == run["check"]["expected"]
        and run["check"]["parse_errors"] == run["check"]["parse_errors_expected"]
        and not run["check"]["wrong"]
        for run in runs
    )


def summarise(results: dict) -> None:
    """Add medians, ratios and targets to `results` in place."""
    for name, workload in results["workloads"].items():
        medians = {}
        for impl, runs in workload["runs"].items():
            per_msg = [run["seconds"] / run["messages"] * 1e6 for run in runs]
            summary = {
                "median_us": statistics.median(per_msg),
                "messages": runs[0]["messages"],
                "ok": _all_ok(runs),
                "check": runs[0]["check"],
            }
            if "latency_us" in runs[0]:
                summary["p50_us"] = statistics.median(run["latency_us"]["p50"] for run in runs)
                summary["p99_us"] = statistics.median(run["latency_us"]["p99"] for run in runs)
            summary["per_second"] = 1e6 / summary["median_us"]
            medians[impl] = summary
        native = medians.get(NATIVE)
        for summary in medians.values():
            summary["x_native"] = summary["median_us"] / native["median_us"] if native else None
        workload["summary"] = medians
        if name == SLEEP:
            for impl, summary in medians.items():
                summary["wall_ms"] = statistics.median(run["seconds"] for run in workload["runs"][impl]) * 1e3
                summary["x_ideal"] = summary["wall_ms"] / (workload["ideal_seconds"] * 1e3)
        if name == PIPELINED_CONCURRENT:
            mcp = medians.get(MCP_STDIO)
            for impl, summary in medians.items():
                summary["x_faster_than_mcp"] = mcp["median_us"] / summary["median_us"] if mcp else None
                sequential = medians.get(impl.split("/")[0]) if "/" in impl else None
                summary["over_sequential_us"] = summary["median_us"] - sequential["median_us"] if sequential else None
    if "memory" in results:
        decoded = results["memory"].get("decoded", {}).get("peak_extra_bytes")
        for probe in results["memory"].values():
            if "peak_extra_bytes" in probe:
                probe["x_message"] = probe["peak_extra_bytes"] / probe["message_bytes"]
                probe["x_input"] = probe["peak_extra_bytes"] / probe["input_bytes"]
                if decoded is not None:
                    probe["x_message_beyond_decoded"] = (probe["peak_extra_bytes"] - decoded) / probe["message_bytes"]
    results["targets"] = targets(results)


def _ratio(results: dict, workload: str, slow: str, fast: str = NATIVE, key: str = "median_us") -> float | None:
    summary = results["workloads"].get(workload, {}).get("summary", {})
    if slow not in summary or fast not in summary:
        return None
    return summary[slow][key] / summary[fast][key]


def _concurrent(results: dict, workload: str, variant: str, key: str) -> tuple[float | None, str | None]:
    """A concurrent variant's figure, or why it is missing ("not available" on this build)."""
    found = results["workloads"].get(workload, {})
    if variant in found.get("unavailable", {}):
        return None, found["unavailable"][variant]
    return found.get("summary", {}).get(variant, {}).get(key), None


def targets(results: dict) -> list[dict]:
    out = []

    def add(
        text: str, value: float | None, goal: float, unit: str = "×", higher: bool = True, *, why: str | None = None
    ) -> None:
        met = None if value is None else (value >= goal if higher else value <= goal)
        out.append({"target": text, "measured": value, "goal": goal, "unit": unit, "met": met, "unavailable": why})

    add("stream: native ≥ 10× rpcwire.pure", _ratio(results, "stream", PURE), 10)
    add("stream: native ≥ 2.5× orjson transport", _ratio(results, "stream", ORJSON), 2.5)
    add("batch: native ≥ 2.5× orjson transport", _ratio(results, "batch", ORJSON), 2.5)
    add("large: native ≥ 3× rpcwire.pure", _ratio(results, "large", PURE), 3)
    native_mem = results.get("memory", {}).get(NATIVE, {})
    add("large: native peak memory ≤ 3× input (the whole input)", native_mem.get("x_input"), 3, "× input", False)
    add("large: same, per message (stricter reading)", native_mem.get("x_message"), 3, "× message", False)
    add(
        "pipe ping-pong: native round trip no slower than orjson (p50)",
        _ratio(results, "ping-pong", ORJSON, key="p50_us"),
        1,
    )
    add("pipe pipelined: native ≥ 5× rpcwire.pure", _ratio(results, "pipelined", PURE), 5)
    for name in results["workloads"]:
        if name not in CONCURRENT:
            add(f"{name}: native not slower than rpcwire.pure", _ratio(results, name, PURE), 1)
    # Issue 11: on every payload workload and mode, rpcwire at least as fast as the plain orjson loop.
    for name, workload in results["workloads"].items():
        if "payload" in workload:
            add(f"{name}: native at least as fast as the plain orjson loop", _ratio(results, name, ORJSON_LOOP), 1)
    # ... and no workload slower than the baseline build (within the noise of this machine, 5%).
    for name, workload in results["workloads"].items():
        if BASELINE in workload.get("summary", {}) and name not in CONCURRENT:
            add(f"{name}: native not slower than {BASELINE} (5% noise allowed)", _ratio(results, name, BASELINE), 0.95)
    # Concurrent serving: the engine is shared, so rpcwire.pure's rows measure it on the pure core.
    for base in (NATIVE, PURE):
        for mode in ("threads", "asyncio", "asyncio-sync"):
            value, why = _concurrent(results, SLEEP, f"{base}/{mode}", "x_ideal")
            add(f"{SLEEP} ({MODE_LABELS[mode]}): {base} ≤ 1.5× ideal", value, 1.5, "× ideal", False, why=why)
    for base in (NATIVE, PURE):
        for mode in ("threads", "asyncio"):
            value, why = _concurrent(results, PIPELINED_CONCURRENT, f"{base}/{mode}", "x_faster_than_mcp")
            add(f"{PIPELINED_CONCURRENT} ({MODE_LABELS[mode]}): {base} ≥ 20× mcp-stdio", value, 20, "×", True, why=why)
    return out


def _note(impl_name: str, workload: str, summary: dict, total: int) -> str:
    impl = implementations.IMPLS[impl_name]
    check = summary["check"]
    notes = []
    explained = True
    if impl_name == "floor":
        notes.append("lines echoed unchanged, no JSON-RPC")
    elif workload == "batch" and not impl.batches:
        notes.append("can't: no batches (a batch line gets no answer)")
    elif check["parse_errors_expected"] and not impl.parse_errors:
        notes.append("no answer for malformed lines")
        explained = check["answered"] == check["expected"] and not check["wrong"]
    else:
        explained = summary["ok"]
    if summary["messages"] < total:
        notes.append(f"measured on the first {summary['messages']:,} of {total:,} messages")
    if not explained:
        notes.append("UNEXPECTED ANSWERS (see results.json)")
    return "; ".join(notes)


def _answers(summary: dict) -> str:
    check = summary["check"]
    text = f"{check['answered']:,}/{check['expected']:,}"
    if check["parse_errors_expected"]:
        text += f" + {check['parse_errors']:,}/{check['parse_errors_expected']:,} -32700"
    return text + ("" if summary["ok"] else " ✗")


def _fmt(value: float | None, digits: int = 2) -> str:
    if value is None:
        return "—"
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.{digits}f}"


def render(results: dict) -> str:
    m = results["machine"]
    lines = [
        f"# rpcwire benchmark ({m['date']}, {m['cpu']}, {m['cores']} cores, Python {m['python']}, "
        f"rpcwire {m['rpcwire_commit']}{', QUICK' if results['config']['quick'] else ''})",
        "",
        "Medians over repeats; × native = time per message / rpcwire's (higher is slower). ",
        "answers: expected request ids answered correctly (+ -32700 answers to malformed lines).",
    ]
    if any(name not in CONCURRENT and "payload" not in w for name, w in results["workloads"].items()):
        lines += [
            "",
            "| workload | implementation | µs/msg | × native | answers | note |",
            "| --- | --- | ---: | ---: | --- | --- |",
        ]
    for name, workload in results["workloads"].items():
        if name in CONCURRENT or "payload" in workload:
            continue
        for impl, s in workload["summary"].items():
            unusable = name == "batch" and not implementations.IMPLS[impl].batches
            lines.append(
                f"| {name} | {impl} | {_fmt(s['median_us'])} | {'—' if unusable else _fmt(s['x_native'])} "
                f"| {_answers(s)} | {_note(impl, name, s, workload['messages'])} |"
            )
    pipe_names = [name for name in ("ping-pong", "pipelined") if name in results["workloads"]]
    if pipe_names:
        lines += ["", "## Pipes (a server process on OS pipes)", ""]
        lines += [
            "| implementation | round trips/s | p50 µs | p99 µs | pipelined msgs/s |",
            "| --- | ---: | ---: | ---: | ---: |",
        ]
        impls = next(iter(results["workloads"][n]["summary"] for n in pipe_names)).keys()
        for impl in impls:
            pp = results["workloads"].get("ping-pong", {}).get("summary", {}).get(impl, {})
            pl = results["workloads"].get("pipelined", {}).get("summary", {}).get(impl, {})
            lines.append(
                f"| {impl} | {_fmt(pp.get('per_second'))} | {_fmt(pp.get('p50_us'), 1)} | {_fmt(pp.get('p99_us'), 1)} "
                f"| {_fmt(pl.get('per_second'))} |"
            )
    if "memory" in results:
        probes = results["memory"]
        first = next((p for p in probes.values() if "message_bytes" in p), None)
        lines += ["", "## Peak memory, large (RSS high-water above the RSS before serving, fresh process each)", ""]
        if first:
            lines.append(
                f"One message is {first['message_bytes'] / 2**20:.2f} MiB. Input held in an io.BytesIO before the "
                "mark is reset (not counted); answers go to a sink that keeps nothing. 'decoded' = `json.loads` of "
                f"one message alone: what any handler receiving it holds. Measured with: {first['measured']}."
            )
            lines.append("")
        lines += [
            "| implementation | messages | peak MiB | × one message | × whole input | × message beyond 'decoded' |",
            "| --- | ---: | ---: | ---: | ---: | ---: |",
        ]
        for impl, p in probes.items():
            if "error" in p:
                lines.append(f"| {impl} | failed: {p['error'].strip().splitlines()[-1][:80]} | | | | |")
                continue
            lines.append(
                f"| {impl} | {p['messages']} | {p['peak_extra_bytes'] / 2**20:.1f} | {_fmt(p['x_message'])} "
                f"| {p['x_input']:.3f} | {_fmt(p.get('x_message_beyond_decoded'))} |"
            )
    lines += _render_payloads(results)
    lines += _render_concurrent(results)
    lines += ["", "## Targets (issue 3; concurrent serving; issue 11)", ""]
    lines += ["| target | measured | met |", "| --- | ---: | --- |"]
    for t in results["targets"]:
        met = (
            "not available" if t.get("unavailable") else {True: "met", False: "NOT MET", None: "not measured"}[t["met"]]
        )
        lines.append(
            f"| {t['target']} | {_fmt(t['measured'])} {t['unit'] if t['measured'] is not None else ''} | {met} |"
        )
    lines.append("")
    lines.append(f"Total benchmark time: {results['seconds']:.0f} s.")
    return "\n".join(lines)


def _render_payloads(results: dict) -> list[str]:
    """Issue 11's table: per payload, each implementation's decode, encode and echo µs/msg, and peak memory."""
    by_payload: dict[str, dict[str, dict]] = {}
    for workload in results["workloads"].values():
        if "payload" in workload:
            by_payload.setdefault(workload["payload"], {})[workload["mode"]] = workload
    if not by_payload:
        return []
    memory = results.get("payload_memory", {})
    lines = [
        "",
        "## Real payloads (issue 11): decode, encode, echo",
        "",
        "µs per message, median over repeats, in one run; (×) = this row's time over the plain orjson loop's "
        "(≤ 1.00: at least as fast). decode: the payload as params, the handler returns None; encode: a small "
        "request, the handler returns the payload (built once); echo: the payload as params, returned. "
        "Peak MiB: RSS high-water above the RSS before serving, the echo input once, fresh process each "
        "('decoded': `json.loads` of one message alone).",
        "",
        "| payload | implementation | decode µs | encode µs | echo µs | peak MiB (echo) |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for payload, modes in by_payload.items():
        impls = list(next(iter(modes.values()))["summary"])
        for impl in impls:
            cells = []
            for mode in ("decode", "encode", "echo"):
                summary = modes.get(mode, {}).get("summary", {})
                mine, loop = summary.get(impl), summary.get(ORJSON_LOOP)
                if mine is None:
                    cells.append("—")
                    continue
                ratio = f" ({mine['median_us'] / loop['median_us']:.2f}×)" if loop else ""
                cells.append(f"{_fmt(mine['median_us'])}{ratio}{'' if mine['ok'] else ' ✗'}")
            peak = memory.get(payload, {}).get(impl, {}).get("peak_extra_bytes")
            lines.append(
                f"| {payload} | {impl} | {' | '.join(cells)} | {'—' if peak is None else f'{peak / 2**20:.1f}'} |"
            )
        decoded = memory.get(payload, {}).get("decoded", {})
        if "peak_extra_bytes" in decoded:
            lines.append(
                f"| {payload} | decoded (one message: {decoded['message_bytes'] / 1024:.1f} KiB) | | | "
                f"| {decoded['peak_extra_bytes'] / 2**20:.1f} |"
            )
    return lines


def _mode(workload: dict, impl: str) -> str:
    mode = workload["modes"].get(impl, "sequential")
    n = workload.get("max_concurrency")
    return MODE_LABELS.get(mode, mode) + (f", N={n}" if n and mode not in ("sequential", "peer") else "")


def _unavailable_rows(workload: dict, columns: int) -> list[str]:
    return [
        f"| {impl.split('/')[0]} | {_mode(workload, impl)} | not available |" + " |" * (columns - 4) + f" {why} |"
        for impl, why in workload.get("unavailable", {}).items()
    ]


def _render_concurrent(results: dict) -> list[str]:
    lines = []
    sleep = results["workloads"].get(SLEEP)
    if sleep:
        ideal_ms = sleep["ideal_seconds"] * 1e3
        lines += [
            "",
            f"## Concurrent serving: {sleep['messages']:,} requests whose handler sleeps "
            f"{sleep['sleep_seconds'] * 1e3:g} ms, max_concurrency={sleep['max_concurrency']} (in memory)",
            "",
            f"Ideal: {sleep['messages']:,} × {sleep['sleep_seconds'] * 1e3:g} ms / {sleep['max_concurrency']} = "
            f"{ideal_ms:g} ms; goal ≤ 1.5× ideal. Wall time from the call to `serve` (or `asyncio.run`) to its "
            "return: starting the workers or the event loop is included. Median over repeats.",
            "",
            "| implementation | mode | wall ms | × ideal | answers | out of order | note |",
            "| --- | --- | ---: | ---: | --- | ---: | --- |",
        ]
        for impl, s in sleep["summary"].items():
            lines.append(
                f"| {impl.split('/')[0]} | {_mode(sleep, impl)} | {_fmt(s['wall_ms'], 1)} | {_fmt(s['x_ideal'])} "
                f"| {_answers(s)} | {s['check'].get('out_of_order', 0):,} | "
                f"{'' if s['ok'] else 'UNEXPECTED ANSWERS (see results.json)'} |"
            )
        lines += _unavailable_rows(sleep, 7)
    pipelined = results["workloads"].get(PIPELINED_CONCURRENT)
    if pipelined:
        lines += [
            "",
            "## Concurrent serving: pipelined on pipes (trivial echo)",
            "",
            "As `pipelined`: a thread writes the requests while the main thread reads the answers. "
            "× mcp-stdio = mcp-stdio's µs/msg over this row's (higher is faster; goal ≥ 20× for the "
            "concurrent modes); over sequential = this row's µs/msg minus its package's sequential `serve`. "
            "The check counts answered ids in any order.",
            "",
            "| implementation | mode | µs/msg | msgs/s | × mcp-stdio | over sequential µs/msg | answers "
            "| out of order | note |",
            "| --- | --- | ---: | ---: | ---: | ---: | --- | ---: | --- |",
        ]
        for impl, s in pipelined["summary"].items():
            note = []
            if s["messages"] < pipelined["messages"]:
                note.append(f"measured on the first {s['messages']:,} of {pipelined['messages']:,} messages")
            if not s["ok"]:
                note.append("UNEXPECTED ANSWERS (see results.json)")
            over = s.get("over_sequential_us")
            lines.append(
                f"| {impl.split('/')[0]} | {_mode(pipelined, impl)} | {_fmt(s['median_us'])} | {_fmt(s['per_second'])} "
                f"| {_fmt(s.get('x_faster_than_mcp'), 1)} | {'—' if over is None else f'{over:+.2f}'} "
                f"| {_answers(s)} | {s['check'].get('out_of_order', 0):,} | {'; '.join(note)} |"
            )
        lines += _unavailable_rows(pipelined, 9)
    return lines


def plot(results: dict, path: Path) -> Path | None:
    try:
        import matplotlib  # noqa: PLC0415 (optional)

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError:
        return None
    names = [name for name in results["workloads"] if name != SLEEP]  # wall time, not µs per message
    if not names:
        return None
    fig, axes = plt.subplots(len(names), 1, figsize=(9, 2.6 * len(names)), squeeze=False)
    for ax, name in zip(axes[:, 0], names, strict=True):
        summary = results["workloads"][name]["summary"]
        impls = [i for i in summary if name != "batch" or implementations.IMPLS[i].batches]
        values = [summary[i]["median_us"] for i in impls]
        colors = ["tab:red" if i == NATIVE else "tab:gray" if i == "floor" else "tab:blue" for i in impls]
        ax.barh(impls, values, color=colors)
        ax.set_xscale("log")
        ax.invert_yaxis()
        ax.set_title(f"{name}: µs per message (median, log scale; lower is better)", fontsize=10)
        for y, v in enumerate(values):
            ax.text(v, y, f" {v:.3g}", va="center", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path

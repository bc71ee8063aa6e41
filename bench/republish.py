"""Every published table measured again on this build, in turn: `make bench-published`.

    .venv/bin/python bench/republish.py                  # the default set (~30 min on an idle 2-core machine)
    .venv/bin/python bench/republish.py --quick          # a smoke run of every table (a few minutes)
    .venv/bin/python bench/republish.py --only http,lsp  # some tables; --list names them all
    .venv/bin/python bench/republish.py --all            # the default set and the callgrind counts (~1 h more)

The figures in README.md, docs/performance.md and bench/README.md each come from one of the benchmarks in this
folder. ``TABLES`` maps each published table to the command that produces it; this script runs them one after the
other on the current build (the ``rpcwire`` this interpreter imports), each in a process of its own, and writes
every table, in markdown as the benchmark prints it, to ``bench/published.md`` (not committed), each under a line
that says when (UTC), on what (``git describe``, the CPython version and build, the machine) and under what load
(the load average before and after that benchmark). The benchmarks' own progress and errors go to
``bench/published.log``. A benchmark that fails or runs past its time limit prints its error in its table's place
and the others still run; the exit status is 1 if any failed.

The default set fits in about 30 minutes on an idle 2-core machine: the benchmarks whose ratios are steady run
with fewer repeats or calls than their own defaults (``TABLES`` says which and why). The callgrind counts
(``instructions``, ``client-instructions``, ``payload-counts``) do not depend on the load and take long under
valgrind: they run with ``--all`` or ``--only``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


@dataclass(frozen=True)
class Table:
    """One published table (or group of tables printed by one run) and the benchmark that measures it."""

    name: str
    """What ``--only`` calls it."""
    where: str
    """Where it is published."""
    script: str
    """The benchmark, a file in bench/."""
    args: tuple[str, ...]
    """Its arguments in the default set."""
    quick: tuple[str, ...]
    """Its arguments in a smoke run (seconds)."""
    minutes: float
    """What the default run takes on an idle 2-core machine, roughly."""
    default: bool = True
    """In the default set (else only with ``--all`` or ``--only``)."""
    needs: tuple[str, ...] = ()
    """Executables it cannot run without: skipped, with the reason, when one is missing."""
    render: Callable[[], str] | None = None
    """Prints the table in its published form from the JSON the benchmark wrote, after the benchmark's own."""

    def argv(self, quick: bool) -> list[str]:
        """The command line, run with this interpreter."""
        return [sys.executable, str(HERE / self.script), *(self.quick if quick else self.args)]

    def command(self, quick: bool) -> str:
        """The command as a reader types it."""
        return " ".join(["python", f"bench/{self.script}", *(self.quick if quick else self.args)])


# docs/performance.md "The transport": its rows, in its order, as the page names them.
TRANSPORT_ROWS = (
    ("rpcwire", "**rpcwire**"),
    ("rpcwire.pure", "rpcwire.pure"),
    ("orjson", "orjson, by hand (bench/orjson_transport.py)"),
    ("pylsp-jsonrpc", "python-lsp-jsonrpc"),
    ("json-rpc", "json-rpc"),
    ("mcp-codec", "MCP SDK, stdio codec"),
    ("mcp-stdio", "MCP SDK, `stdio_server()`"),
    ("jsonrpcserver", "jsonrpcserver"),
    ("floor", "floor: lines copied unchanged"),
)


def _us(figure: float | None, digits: int = 2) -> str:
    if figure is None:
        return "—"
    return f"{figure:,.0f}" if figure >= 100 else f"{figure:.{digits}f}"


def transport_table(path: Path = HERE / "results.json") -> str:
    """docs/performance.md's first table (and the chart's source) from bench/run.py's JSON."""
    results = json.loads(path.read_text())
    workloads = results["workloads"]

    def summary(workload: str, impl: str) -> dict:
        return workloads.get(workload, {}).get("summary", {}).get(impl, {})

    lines = [
        "| implementation | stream | batch | large | pipe ping-pong (p50 round trip) | pipe pipelined |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for impl, label in TRANSPORT_ROWS:
        stream = summary("stream", impl)
        cells = [_us(stream.get("median_us"))]
        if impl != "floor" and stream and stream["check"]["parse_errors"] < stream["check"]["parse_errors_expected"]:
            cells[0] += " ✗"
        batch = summary("batch", impl)
        cells.append(_us(batch.get("median_us")) if batch.get("ok", True) else "can't")
        cells.append(_us(summary("large", impl).get("median_us"), 0))
        cells.append(_us(summary("ping-pong", impl).get("p50_us"), 1))
        cells.append(_us(summary("pipelined", impl).get("median_us")))
        if impl == "rpcwire":
            cells = [f"**{cell}**" for cell in cells]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    ratios = []
    stream = {impl: summary("stream", impl).get("median_us") for impl in ("rpcwire", "rpcwire.pure", "orjson")}
    batch = {impl: summary("batch", impl).get("median_us") for impl in ("rpcwire", "orjson")}
    if all(stream.values()):
        ratios.append(
            f"stream: rpcwire.pure / rpcwire {stream['rpcwire.pure'] / stream['rpcwire']:.1f}x, "
            f"orjson transport / rpcwire {stream['orjson'] / stream['rpcwire']:.2f}x"
        )
    if all(batch.values()):
        ratios.append(f"batch: orjson transport / rpcwire {batch['orjson'] / batch['rpcwire']:.2f}x")
    memory = results.get("memory", {})
    peaks = [
        f"{impl} {memory[impl]['peak_extra_bytes'] / 2**20:.1f} MiB"
        for impl in ("rpcwire", "rpcwire.pure", "orjson")
        if "peak_extra_bytes" in memory.get(impl, {})
    ]
    if peaks:
        ratios.append("peak memory on large above the baseline: " + ", ".join(peaks))
    return "\n".join(["### In the published form (docs/performance.md)", "", *lines, "", "; ".join(ratios) + "."])


TABLES: tuple[Table, ...] = (
    # make bench, without the payload workloads (docs/performance.md "Real payloads" is counted with callgrind by
    # payload-counts; the wall-clock payload table runs with `--only payloads`). 3 repeats instead of 5 for the cheap
    # workloads: the ratios to the orjson transport and the floor moved by less than the repeats' spread.
    Table(
        "transport",
        'docs/performance.md "The transport" and "Since then"; README.md "Fast"',
        "run.py",
        (
            "--only",
            "stream,batch,large,ping-pong,pipelined,concurrent-sleep,pipelined-concurrent,memory",
            "--repeats",
            "3",
        ),
        ("--quick", "--repeats", "1", "--only", "stream,batch,ping-pong,pipelined"),
        9,
        render=transport_table,
    ),
    Table(
        "payloads",
        'docs/performance.md "Real payloads" (wall clock)',
        "run.py",
        ("--only", "payloads", "--impls", "rpcwire,rpcwire.pure,orjson,orjson-loop", "--repeats", "5"),
        ("--quick", "--repeats", "1", "--only", "items,mcp-result", "--impls", "rpcwire,orjson-loop"),
        4,
        default=False,
    ),
    # make bench-client: pipes and MCP (its HTTP clients' table is superseded by http's "HTTP clients"); 3,000 calls
    # instead of 5,000: the p50 and the ratios to the floor and the hand-written clients are medians of thousands.
    Table(
        "clients",
        'docs/performance.md "Clients" (pipes, MCP) and "Round 4 (issue 33): AsyncClient" (CPU ratios)',
        "client_bench.py",
        ("--only", "pipes,mcp", "--calls", "3000", "--repeats", "3"),
        ("--only", "pipes", "--calls", "200", "--repeats", "1"),
        4,
    ),
    # make bench-http without its websocket part (the `websocket` table below runs it); cells of 2 s instead of 3: each
    # is cut into 10 interleaved slices whose median is the figure, and 2 s slices held thousands of requests.
    Table(
        "http",
        'docs/performance.md "HTTP clients", "Servers" and the in-process apps; README.md "Fast"',
        "http_bench.py",
        ("--part", "clients,servers,in-process", "--seconds", "2"),
        ("--part", "clients,in-process", "--calls", "100", "--repeats", "1"),
        6,
    ),
    # 1,000 calls a cell instead of 2,000: the loop's turns are counts and the CPU medians of 5 moved by less than
    # the load's spread between runs.
    Table(
        "websocket",
        'docs/performance.md "WebSocket frames against POSTs"; bench/README.md "WebSocket"',
        "websocket_bench.py",
        ("--calls", "1000", "--repeats", "5"),
        ("--calls", "100", "--repeats", "1", "--part", "in-process"),
        2,
    ),
    Table(
        "websocket-frames",
        'bench/README.md "WebSocket frames in process" (frames per CPU second, this tree alone)',
        "websocket_frames_bench.py",
        ("--calls", "20000", "--repeats", "5"),
        ("--calls", "200", "--repeats", "1"),
        1,
    ),
    # Its own defaults (9 blocks of 2,000): the ratios sit near the target's 1.10; 5 blocks of 1,000 moved by 0.03.
    Table(
        "accept",
        'docs/performance.md "MCP\'s Accept header"; bench/README.md "HTTP: MCP\'s Accept header"',
        "accept_bench.py",
        (),
        ("--repeats", "1", "--calls", "100", "--only", "in-process"),
        3.5,
    ),
    # Half make bench-mcp's calls: the SDK's side costs milliseconds a call, and its ratios are medians of 3 interleaved
    # repeats of a thousand calls.
    Table(
        "mcp",
        'docs/performance.md "MCP"',
        "mcp_bench.py",
        ("--calls", "1000", "--rounds", "20", "--repeats", "3"),
        ("--calls", "50", "--rounds", "2", "--repeats", "1", "--tools", "async"),
        3.5,
    ),
    Table(
        "mcp-tools",
        "docs/guides/mcp.md (rpcwire.mcp_tools against MCPServer)",
        "mcp_tools_bench.py",
        ("--calls", "1000", "--repeats", "3"),
        ("--calls", "50", "--warmup", "10", "--repeats", "1", "--via", "stdio"),
        2.5,
    ),
    Table(
        "lsp",
        'docs/performance.md "LSP" and "The readers alone"',
        "lsp_bench.py",
        (),
        ("--quick",),
        2,
    ),
    # Callgrind: counts, which the load does not move; slow under valgrind.
    Table(
        "instructions",
        'docs/performance.md "Instructions before and after issues 30 and 32", "The line loop", "The concurrent '
        "engines' pipelined echo\" (this build's column; BASELINE=<rev> with make bench-instructions for the other)",
        "instructions.py",
        ("--peers",),
        ("--only", "stream", "--peers"),
        20,
        default=False,
        needs=("valgrind",),
    ),
    Table(
        "client-instructions",
        'docs/performance.md "Round 4 (issue 33): AsyncClient"; bench/README.md "Clients"',
        "client_instructions.py",
        ("count",),
        ("count", "--calls", "50", "--loops", "asyncio"),
        10,
        default=False,
        needs=("valgrind",),
    ),
    Table(
        "payload-counts",
        'docs/performance.md "Round 3" (the payload table)',
        "payload_counts.py",
        ("counts",),
        ("counts", "--cells", "items/decode", "--repeats", "1"),
        25,
        default=False,
        needs=("valgrind",),
    ),
)


def by_name() -> dict[str, Table]:
    """The tables by their ``--only`` name."""
    return {table.name: table for table in TABLES}


def _git_describe() -> str:
    try:
        described = subprocess.run(
            ["git", "describe", "--always", "--dirty", "--tags"], cwd=ROOT, capture_output=True, text=True, check=True
        )
    except (OSError, subprocess.CalledProcessError):
        return "unknown (no git)"
    return described.stdout.strip()


def interpreter() -> str:
    """CPython's version and build: GIL or free-threaded, the compiler, the build's date."""
    gil = "free-threaded" if sysconfig.get_config_var("Py_GIL_DISABLED") else "GIL build"
    if gil == "free-threaded" and getattr(sys, "_is_gil_enabled", lambda: False)():
        gil += ", GIL on"
    build = " ".join(platform.python_build())
    compiler = platform.python_compiler()
    return f"{platform.python_implementation()} {platform.python_version()} ({gil}, {compiler}, {build})"


def machine() -> str:
    """The CPU model and the CPUs this process may run on."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{model}, {cpus} CPUs"


def load() -> str:
    """The load average over 1, 5 and 15 minutes."""
    try:
        return "/".join(f"{figure:.2f}" for figure in os.getloadavg())
    except OSError:
        return "unknown"


def _rpcwire() -> str:
    found = subprocess.run(
        [sys.executable, "-c", "import rpcwire; print(rpcwire.__file__, 'native' if rpcwire.NATIVE else 'pure')"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    return found.stdout.strip() or f"not importable: {found.stderr.strip().splitlines()[-1:]}"


def _run(argv: list[str], limit: float, log: Path) -> tuple[str, str, str, bool]:
    """Run one benchmark in a session of its own, its stderr appended to the log as it comes (progress to follow
    with ``tail -f``); its stdout, its stderr, how it ended, and whether it succeeded. Past the limit the whole
    session is stopped (the servers a benchmark started with it)."""
    with log.open("a") as progress:
        start = progress.tell()
        try:
            child = subprocess.Popen(  # our own benchmark, with this interpreter
                argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=progress, text=True, start_new_session=True
            )
        except OSError as error:
            return "", str(error), "could not start", False
        try:
            output, _ = child.communicate(timeout=limit)
            status, ok = f"exit status {child.returncode}", child.returncode == 0
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            output, _ = child.communicate()
            status, ok = f"stopped after its limit of {limit:.0f} s", False
    with log.open() as progress:
        progress.seek(start)
        return output or "", progress.read(), status, ok


def run_one(table: Table, quick: bool, limit: float, log: Path) -> tuple[str, bool]:
    """Run one benchmark; its section of the report, and whether it succeeded."""
    command = table.command(quick)
    missing = [tool for tool in table.needs if shutil.which(tool) is None]
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    head = f"## {table.name}: {table.where}\n\n"
    if missing:
        return head + f"_{when}: not run: {', '.join(missing)} not found._\n", True
    before = load()
    started = time.monotonic()
    with log.open("a") as progress:
        progress.write(f"===== {table.name}: {command} ({when})\n")
    output, errors, status, ok = _run(table.argv(quick), limit, log)
    took = time.monotonic() - started
    with log.open("a") as progress:
        progress.write(f"===== {table.name}: {status}, {took:.0f} s\n")
    line = (
        f"_{when}, {took / 60:.1f} min; `{command}`; rpcwire {_git_describe()}; {interpreter()}; {machine()}; "
        f"load average (1/5/15 min) {before} before, {load()} after._\n\n"
    )
    body = output.strip()
    if "|" not in body and body:  # a plain-text table: kept as printed
        body = f"```\n{body}\n```"
    if ok and table.render is not None:
        try:
            body = table.render() + "\n\n" + body
        except (OSError, ValueError, KeyError, TypeError, ZeroDivisionError) as error:
            body += f"\n\n**Not rendered in the published form**: {error!r}"
    if not ok:
        tail = "\n".join(errors.strip().splitlines()[-25:])
        body = (body + "\n\n" if body else "") + f"**Failed** ({status}):\n\n```\n{tail}\n```"
    return head + line + body + "\n", ok


def main(argv: list[str] | None = None) -> int:
    """Run the chosen tables in turn and write bench/published.md."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="tables, comma-separated (--list names them)")
    parser.add_argument("--all", action="store_true", help="every table, the callgrind counts too")
    parser.add_argument("--quick", action="store_true", help="a smoke run: every table's benchmark cut to seconds")
    parser.add_argument("--list", action="store_true", help="name the tables, where each is published, its command")
    parser.add_argument("--out", type=Path, default=HERE / "published.md", help="default: bench/published.md")
    parser.add_argument("--limit", type=float, help="seconds a benchmark may take (default: 6x its estimate + 10 min)")
    args = parser.parse_args(argv)
    tables = by_name()
    if args.list:
        for table in TABLES:
            mark = "" if table.default else "  (not in the default set)"
            sys.stdout.write(f"{table.name}: ~{table.minutes:g} min{mark}\n  {table.where}\n  {table.command(False)}\n")
        return 0
    if args.only:
        names = args.only.split(",")
        unknown = [name for name in names if name not in tables]
        if unknown:
            parser.error(f"unknown tables {unknown}: choose among {', '.join(tables)}")
        chosen = [tables[name] for name in names]
    else:
        chosen = [table for table in TABLES if args.all or args.quick or table.default]
    log = args.out.with_suffix(".log")
    log.write_text("")
    sections = [
        "# Published figures, measured again\n\n"
        f"_rpcwire {_git_describe()} ({_rpcwire()}); {interpreter()}; {machine()}; "
        f"started {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, load average {load()}"
        f"{'; --quick: smoke figures only' if args.quick else ''}._\n"
    ]
    failed = []
    for table in chosen:
        sys.stderr.write(
            f"republish: {table.name} ({table.command(args.quick)}), load average {load()}; progress in {log}\n"
        )
        limit = args.limit or (60.0 if args.quick else 0.0) + table.minutes * 6 * 60 + 600
        section, ok = run_one(table, args.quick, limit, log)
        sections.append(section)
        if not ok:
            failed.append(table.name)
        args.out.write_text("\n".join(sections))  # what is measured so far survives a stop
        sys.stdout.write(section + "\n")
        sys.stdout.flush()
    sys.stderr.write(f"republish: wrote {args.out} ({len(chosen) - len(failed)} of {len(chosen)} ran)\n")
    if failed:
        sys.stderr.write(f"republish: failed: {', '.join(failed)} (their errors are in {args.out.name})\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""Instruction counts of every workload, this build against a baseline revision: `make bench-instructions`.

    .venv/bin/python bench/instructions.py --baseline dbd1fc2            # every workload, both builds
    .venv/bin/python bench/instructions.py --baseline HEAD~3 --only stream,batch,items/echo
    .venv/bin/python bench/instructions.py --peers                        # this build and the orjson transport only

Wall clock on a shared machine spreads by 2x; callgrind's instruction counts repeat. Each workload runs in one
fresh process under ``valgrind --tool=callgrind --dump-before=os_getppid``: the child serves N messages, then 2N,
each serve between two calls of ``os.getppid`` (a dump each); the difference of the two serves' parts, over N, is
the cost of one message, with the start-up, the imports, the input's making (written to files beforehand) and
what one serve costs whatever its length left out. The output ``BytesIO`` gets its room beforehand (its growth
counts what glibc's ``realloc`` happens to copy, which depends on the heap's layout, not on rpcwire). Both builds
run the same child (this file, ``--child``) with their own ``rpcwire`` package first on ``PYTHONPATH``, modules
compiled beforehand and ``PYTHONHASHSEED=0``, so that two runs of one build count alike.

The baseline is built from ``git archive REV`` in a directory under ``$TMPDIR/rpcwire-instructions`` (no git
worktree is registered) with ``maturin build --release`` for this interpreter, its own Cargo target directory
seeded from this tree's ``target/release`` (the dependencies are not compiled again). The wheel is unpacked there
and kept, keyed by the revision's build inputs (``BUILD_INPUTS``), so a second run against it, or against a
revision that changed only docs or bench/, builds nothing. "Now" is this tree's ``python/rpcwire`` as ``make
develop`` built it, or ``--now REV`` built the same way as the baseline.

The workloads are bench/README.md's, cut small (``WORKLOADS``, ``PAYLOAD_SIZES``): stream, batch and large
(``io.BytesIO`` to ``io.BytesIO``), every payload cell (decode, encode, echo), pipelined echo (the native
sequential loop on buffered files, as the process's stdin and stdout are: every read full, so the count repeats),
the same pipelined echo through the concurrent engines at ``max_concurrency=8`` (``ENGINES``: threads, asyncio with
a sync handler, asyncio with an ``async def`` one; their threads make these counts move by about 2% between runs)
and the ``Client`` ping-pong (``Client.spawn`` of a server on OS pipes, one call at a time; the client counted as
above, the server, which cannot mark its parts, by two processes of N and 2N calls). Every answer is checked
(bench/workloads.py's check) so that no count measures a broken build.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import io
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import workloads  # bench/: this script's own folder is first on sys.path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CACHE = Path(os.environ.get("RPCWIRE_INSTRUCTIONS_CACHE", Path(tempfile.gettempdir()) / "rpcwire-instructions"))

# name: (messages in the small run, what one message is). The large run serves twice as many.
WORKLOADS: dict[str, int] = {
    "stream": 2_000,
    "batch": 2_000,  # requests: 20 lines of 100
    "pipelined": 2_000,
    "ping-pong": 500,
    "large": 2,
    # Pipelined echo through the concurrent engines (issue 30's session and its drivers), server side:
    # serve(..., max_concurrency=8) on threads, serve_async with a sync handler (worker threads) and an async one.
    "threads-8": 2_000,
    "asyncio-8-sync": 2_000,
    "asyncio-8-async": 2_000,
}
ENGINES = ("threads-8", "asyncio-8-sync", "asyncio-8-async")  # read from files, as "pipelined" is
PAYLOAD_SIZES = {"items": 200, "mcp-result": 200, "lsp-completion": 10, "floats": 10, "ints": 10, "did-open": 10}
PAYLOAD_MODES = ("decode", "encode", "echo")
KEEP = "RPCWIRE_INSTRUCTIONS_KEEP"  # set by --keep: where each serve of 2N messages' callgrind output is copied
BUILD_INPUTS = ("Cargo.toml", "Cargo.lock", "build.rs", "pyproject.toml", "src", "crates", "python")
PEERS = ("stream", "batch")  # the workloads the orjson transport (bench/orjson_transport.py) serves too


def all_workloads() -> list[str]:
    names = list(WORKLOADS)
    names += [f"{p}/{m}" for p in PAYLOAD_SIZES for m in PAYLOAD_MODES]
    return names


def messages(name: str) -> int:
    if "/" in name:
        return PAYLOAD_SIZES[name.split("/", maxsplit=1)[0]]
    return WORKLOADS[name]


# --- the child: serves one workload's input file in a fresh process -------------------------------------------


def _handler(method: str, params: object) -> object:
    return params


async def _async_handler(method: str, params: object) -> object:
    return params


def _serve_engine(rpcwire: Any, name: str, transport: object) -> None:
    """One of ENGINES' serves: a pipelined echo under max_concurrency=8."""
    if name == "threads-8":
        rpcwire.serve(_handler, transport, max_concurrency=8)
    else:
        handler = _async_handler if name == "asyncio-8-async" else _handler
        asyncio.run(rpcwire.serve_async(handler, transport, max_concurrency=8))


def child(impl: str, name: str, inputs: str, outputs: str, n: int) -> None:
    """Serve `name`'s inputs of n and 2n messages in turn with `impl` ("rpcwire" or "orjson").

    Each serve sits between two calls of ``os.getppid`` (the parent runs callgrind with
    ``--dump-before=os_getppid``), so its instructions are a part of the output of their own.
    """
    logging.disable(logging.CRITICAL)
    import rpcwire  # noqa: PLC0415 (the build on PYTHONPATH; the parent never imports it)

    if name == "ping-pong":
        _ping_pong_client(rpcwire, n, Path(outputs))
        return
    handler = _handler
    payload = None
    if "/" in name:
        payload_name, mode = name.split("/")
        payload = workloads.PAYLOADS[payload_name][0]()
        if mode == "decode":
            handler = lambda method, params: None  # noqa: E731
        elif mode == "encode":
            handler = lambda method, params: payload  # noqa: E731
    serve_orjson = None
    if impl == "orjson":
        import orjson_transport  # noqa: PLC0415 (only its own runs pay its import)

        serve_orjson = orjson_transport.serve
    for count in (n, 2 * n):
        data, out_path = input_path(name, count, Path(inputs)), Path(outputs) / f"{count}.out"
        if (
            name == "pipelined" or name in ENGINES
        ):  # the process's stdin and stdout are buffered files on a descriptor: these are too
            inp, out = open(data, "rb"), open(out_path, "wb")  # noqa: SIM115 (closed below)
        else:
            inp = io.BytesIO(data.read_bytes())
            # The output's room made beforehand: a growing BytesIO costs what glibc's realloc happens to copy,
            # which depends on the heap's layout (+60 instructions a line between builds writing alike).
            room = 4 * len(inp.getbuffer()) + (2 * count * len(orjson.dumps(payload)) if payload else 0) + (1 << 20)
            out = io.BytesIO()
            out.write(bytes(room))
            out.seek(0)
        os.getppid()  # the mark: a dump
        if serve_orjson is not None:
            serve_orjson(handler, inp, out)
        elif name in ENGINES:
            _serve_engine(rpcwire, name, rpcwire.StdioTransport(inp, out))
        else:
            rpcwire.serve(handler, rpcwire.StdioTransport(inp, out))
        os.getppid()
        if isinstance(out, io.BytesIO):
            out_path.write_bytes(out.getbuffer()[: out.tell()])
        inp.close()
        out.close()


SERVER_WRAP = "RPCWIRE_INSTRUCTIONS_SERVER_WRAP"  # a JSON argv prefix for the ping-pong server (valgrind)
PING_PONG_SERVER = "import rpcwire, sys; rpcwire.serve(lambda m, p: p, rpcwire.StdioTransport()); sys.exit(0)"


def _ping_pong_client(rpcwire: object, n: int, directory: Path) -> None:
    """n calls, then 2n; with SERVER_WRAP (server side) only the 2n calls, or the n ones (size from n's sign)."""
    server = [*json.loads(os.environ.get(SERVER_WRAP, "[]")), sys.executable, "-c", PING_PONG_SERVER]
    client = rpcwire.Client.spawn(server)  # type: ignore[attr-defined]
    ok = True
    try:
        client.call("echo", {"text": "hello", "n": -1})  # connected and warm before the first mark
        counts = (n, 2 * n) if SERVER_WRAP not in os.environ else (n,)
        for count in counts:
            os.getppid()
            results = [client.call("echo", {"text": "hello", "n": i}) for i in range(count)]
            os.getppid()
            ok = ok and all(r == {"text": "hello", "n": i} for i, r in enumerate(results))
    finally:
        client.close(grace=600)  # a server under valgrind takes seconds to write its counts and exit
    (directory / "ping-pong.ok").write_text("ok\n" if ok else "wrong\n")


# --- the parent ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Build:
    label: str
    path: Path  # the directory holding this build's `rpcwire` package


def run(cmd: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, check=True, text=True, **kwargs)  # type: ignore[call-overload,no-any-return]


def build_baseline(rev: str, quiet: bool) -> Build:
    """`rev`'s package with its native module built for this interpreter, cached under CACHE.

    (Also "now" when ``--now REV`` is given.)
    """
    sha = run(
        ["git", "-C", str(ROOT), "rev-parse", "--verify", f"{rev}^{{commit}}"], capture_output=True
    ).stdout.strip()
    # Cached by what the build is made of (a commit that only touched the docs or bench/ builds nothing).
    listing = run(["git", "-C", str(ROOT), "ls-tree", sha, "--", *BUILD_INPUTS], capture_output=True).stdout
    home = CACHE / hashlib.sha1(listing.encode(), usedforsecurity=False).hexdigest()[:12]
    site = home / "site"
    tag = f"cpython-{sys.version_info.major}{sys.version_info.minor}"
    if any(site.glob(f"rpcwire/_rpcwire.{tag}*.so")):
        return Build(f"{rev} ({sha[:7]})", site)
    src = home / "src"
    shutil.rmtree(home, ignore_errors=True)
    src.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", sha], check=True, capture_output=True)
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(src, filter="data") if sys.version_info >= (3, 12) else tar.extractall(src)
    # git archive dates every file at the commit: older than the seed's artifacts, which Cargo would then
    # take as fresh for the workspace's own crates (their fingerprints name paths relative to the workspace).
    # Dated now, and in a target directory of this revision's own, they are always rebuilt; the
    # dependencies compiled in this tree's target/release are reused.
    now = time.time()
    for path in src.rglob("*"):
        os.utime(path, (now, now), follow_symlinks=False)
    target = home / "target"
    if (ROOT / "target" / "release").is_dir():
        target.mkdir()
        shutil.copytree(ROOT / "target" / "release", target / "release", symlinks=True)
    maturin = shutil.which("maturin", path=str(Path(sys.executable).parent)) or shutil.which("maturin")
    if maturin is None:
        raise SystemExit("maturin not found (make develop installs it into .venv)")
    print(f"building {rev} ({sha[:7]}) in {src} (target {target}) ...", file=sys.stderr)
    env = dict(os.environ, CARGO_TARGET_DIR=str(target), PYO3_PYTHON=sys.executable)
    env.pop("VIRTUAL_ENV", None)
    wheels = home / "wheels"
    cmd = [maturin, "build", "--release", "--interpreter", sys.executable, "--out", str(wheels)]
    if quiet:
        cmd.append("--quiet")
    started = time.monotonic()
    run(cmd, cwd=src, env=env)
    wheel = next(wheels.glob("*.whl"))
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(site)
    print(f"built in {time.monotonic() - started:.0f} s: {wheel.name}", file=sys.stderr)
    return Build(f"{rev} ({sha[:7]})", site)


def current_build() -> Build:
    tag = f"cpython-{sys.version_info.major}{sys.version_info.minor}"
    if not any((ROOT / "python" / "rpcwire").glob(f"_rpcwire.{tag}*.so")):
        raise SystemExit("no native module in python/rpcwire: run `make develop` first")
    describe = subprocess.run(
        ["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True, text=True, check=False
    ).stdout.strip()
    return Build(f"now ({describe})", ROOT / "python")


def write_input(name: str, n: int, directory: Path) -> Path:
    """The input file of `name` with `n` messages (made outside valgrind)."""
    path = input_path(name, n, directory)
    if path.exists():
        return path
    if name == "stream":
        data = workloads.stream(n).data
    elif name == "pipelined" or name in ENGINES:
        data = workloads.concurrent_sleep(n).data  # n requests, one a line
    elif name == "batch":
        data = workloads.batch(n // 100).data
    elif name == "large":
        data = workloads.large(n).data
    elif name == "ping-pong":
        data = b""
    else:
        payload_name, mode = name.split("/")
        make, _ = workloads.PAYLOADS[payload_name]
        text = json_bytes(make())
        line = (
            b'{"jsonrpc":"2.0","id":%d,"method":"get","params":{}}'
            if mode == "encode"
            else b'{"jsonrpc":"2.0","id":%d,"method":"echo","params":' + text.replace(b"%", b"%%") + b"}"
        )
        data = b"".join(line % i + b"\n" for i in range(n))
    path.write_bytes(data)
    return path


def json_bytes(value: object) -> bytes:
    return orjson.dumps(value)


TOTALS = re.compile(rb"^(?:summary|totals): (\d+)", re.MULTILINE)


def input_path(name: str, n: int, directory: Path) -> Path:
    return directory / f"{name.replace('/', '_')}-{n}.jsonl"


def callgrind(build: Build | None, impl: str, name: str, directory: Path, role: str = "") -> float:
    """Instructions a message of one workload, from one process under callgrind.

    The child serves N messages and then 2N, each between two dumps; the difference of the two parts over N
    leaves out what one serve costs whatever its length. The server side of ping-pong is counted in two
    processes instead (its client runs plainly, spawning it under valgrind, with N calls, then 2N).
    """
    n = messages(name)
    stem = f"{(build.label if build else impl).split()[0]}-{impl}-{name.replace('/', '_')}-{role}"
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", stem)
    env = dict(os.environ, PYTHONHASHSEED="0", PYTHONDONTWRITEBYTECODE="1")
    env["PYTHONPATH"] = os.pathsep.join([str(build.path) if build else str(ROOT / "python"), str(HERE)])
    env.pop("PYTHONMALLOC", None)
    outputs = directory / stem
    outputs.mkdir()
    if role == "server":
        totals = []
        for count in (n, 2 * n):
            out = directory / f"{stem}-{count}.cg"
            server_env = dict(
                env, **{SERVER_WRAP: json.dumps(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"])}
            )
            argv = [sys.executable, str(Path(__file__).resolve()), "--child", impl, name, str(directory), str(outputs)]
            child_run([*argv, str(count)], server_env, stem)
            check_ping_pong(outputs)
            totals.append(int(TOTALS.findall(out.read_bytes())[-1]))
            out.unlink()
        return (totals[1] - totals[0]) / n
    out = directory / f"{stem}.cg"
    cmd = [
        "valgrind",
        "--tool=callgrind",
        "--dump-before=os_getppid",
        f"--callgrind-out-file={out}",
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        impl,
        name,
        str(directory),
        str(outputs),
        str(n),
    ]
    child_run(cmd, env, stem)
    parts = sorted(directory.glob(f"{stem}.cg.*"), key=lambda p: int(p.suffix[1:]))
    totals = [int(TOTALS.findall(p.read_bytes())[-1]) for p in parts]
    keep = os.environ.get(KEEP)
    if keep and len(parts) >= 4:  # the serve of 2N messages, for callgrind_annotate
        shutil.copy(parts[3], Path(keep) / f"{stem}.{2 * n}.cg")
    for p in [*parts, out]:
        p.unlink(missing_ok=True)
    # parts: start-up | serve N | between | serve 2N | (the end, in the last file)
    if len(totals) < 4:
        raise RuntimeError(f"{stem}: {len(totals)} parts in callgrind's output, expected 4 or more")
    if name == "ping-pong":
        check_ping_pong(outputs)
    else:
        for count in (n, 2 * n):
            check(name, count, outputs / f"{count}.out")
    return (totals[3] - totals[1]) / n


def child_run(cmd: list[str], env: dict[str, str], stem: str) -> None:
    proc = subprocess.run(
        cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{stem}: exit {proc.returncode}\n{proc.stderr.decode(errors='replace')[-3000:]}")


def check_ping_pong(outputs: Path) -> None:
    if (outputs / "ping-pong.ok").read_text() != "ok\n":
        raise RuntimeError("ping-pong: wrong answers")


def check(name: str, n: int, out: Path) -> None:
    """Every answer right (bench/workloads.py's check), so a count never measures a broken build."""
    if name == "stream":
        w = workloads.stream(n)
    elif name == "pipelined" or name in ENGINES:
        w = workloads.concurrent_sleep(n)
    elif name == "batch":
        w = workloads.batch(n // 100)
    elif name == "large":
        w = workloads.large(n)
    else:
        payload_name, mode = name.split("/")
        w = workloads.payload_workload(payload_name, mode, quick=False).head(n)
    checked = workloads.check(w, out.read_bytes())
    if not checked.ok:
        raise RuntimeError(f"{name}: wrong answers ({checked})")


def per_message(build: Build | None, impl: str, name: str, directory: Path) -> dict[str, float]:
    """Instructions a message: {"": ..}, or for ping-pong {"client": .., "server": ..}."""
    roles = ("client", "server") if name == "ping-pong" else ("",)
    return {role: callgrind(build, impl, name, directory, role) for role in roles}


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", help="a git revision to build and count beside this build")
    parser.add_argument("--now", help="a git revision to build and count as 'now' (default: this tree as built)")
    parser.add_argument("--only", help="comma-separated workloads (default all): " + ", ".join(all_workloads()))
    parser.add_argument("--peers", action="store_true", help="also count the orjson transport on stream and batch")
    parser.add_argument("--jobs", type=int, default=2, help="valgrind runs at once (default 2)")
    parser.add_argument("--json", default=str(HERE / "instructions.json"), help="where the figures go")
    parser.add_argument(
        "--keep", metavar="DIR", help="copy each serve of 2N messages' callgrind output there (callgrind_annotate)"
    )
    parser.add_argument("--verbose-build", action="store_true", help="show maturin's output")
    parser.add_argument("--child", nargs=5, metavar=("IMPL", "NAME", "INPUTS", "OUTPUTS", "N"), help=argparse.SUPPRESS)
    return parser.parse_args()


def main() -> None:
    args = arguments()
    if args.child:
        impl, name, data, out, n = args.child
        child(impl, name, data, out, int(n))
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind not found (apt-get install valgrind)")
    names = all_workloads() if not args.only else [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = [n for n in names if n not in all_workloads()]
    if unknown:
        raise SystemExit(f"unknown workloads: {', '.join(unknown)}; known: {', '.join(all_workloads())}")
    builds = [build_baseline(args.now, quiet=not args.verbose_build) if args.now else current_build()]
    if args.baseline:
        builds.insert(0, build_baseline(args.baseline, quiet=not args.verbose_build))
    for b in builds:
        probe = subprocess.run(
            [sys.executable, "-c", "import rpcwire, rpcwire._rpcwire as m; print(m.__file__)"],
            env=dict(os.environ, PYTHONPATH=str(b.path)),
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        if not probe.startswith(str(b.path)):
            raise SystemExit(f"{b.label}: rpcwire imported from {probe}, not {b.path}")
    # Every module compiled beforehand, and the runs write no bytecode: a run that compiles what another
    # has not yet written counts the compiler (the cause of a 30% spread before).
    for path in [b.path for b in builds] + [HERE]:
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(path)], check=False, capture_output=True)
    if args.keep:
        Path(args.keep).mkdir(parents=True, exist_ok=True)
        os.environ[KEEP] = str(Path(args.keep).resolve())
    jobs: list[tuple[Build | None, str, str]] = [(b, "rpcwire", name) for name in names for b in builds]
    if args.peers:
        jobs += [(None, "orjson", name) for name in PEERS if name in names]
    load = os.getloadavg()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="rpcwire-instr-") as tmp:
        directory = Path(tmp)
        for name in names:  # inputs written once, before the runs start
            write_input(name, messages(name), directory)
            write_input(name, 2 * messages(name), directory)
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            futures = {pool.submit(per_message, *job, directory): job for job in jobs}
            results = {}
            for done, future in enumerate(as_completed(futures), 1):
                build, impl, name = job = futures[future]
                results[job] = future.result()
                figures = ", ".join(f"{role or 'message'} {value:,.0f}" for role, value in results[job].items())
                label = build.label if build else impl
                print(
                    f"[{done}/{len(jobs)} {time.monotonic() - started:.0f} s] {name} {label}: {figures}",
                    file=sys.stderr,
                )
    elapsed = time.monotonic() - started
    load_after = os.getloadavg()
    report(names, builds, results, args.peers)
    print(
        f"\n{len(jobs)} counts in {elapsed:.0f} s; "
        f"load average {load[0]:.2f} before, {load_after[0]:.2f} after (counts do not depend on it)"
    )
    write_figures(Path(args.json), builds, results, [load, load_after])


def write_figures(path: Path, builds: list[Build], results: dict, load: list) -> None:  # type: ignore[type-arg]
    """The counts as JSON: per workload (and role), per build, instructions a message."""
    table: dict[str, dict[str, float]] = {}
    for (b, _impl, name), roles in results.items():
        for role, value in roles.items():
            table.setdefault(f"{name} ({role})" if role else name, {})[b.label if b else "orjson transport"] = value
    figures = {"builds": [b.label for b in builds], "python": sys.version, "load": load, "per_message": table}
    path.write_text(json.dumps(figures, indent=1) + "\n")


def report(names: list[str], builds: list[Build], results: dict, peers: bool) -> None:  # type: ignore[type-arg]
    now = builds[-1]
    base = builds[0] if len(builds) == 2 else None
    head = ["workload", "unit"]
    if base:
        head += [f"baseline {base.label}", f"{now.label}", "change"]
    else:
        head += [now.label]
    if peers:
        head += ["orjson transport", "x orjson"]
    print("Instructions a message (callgrind; a serve of 2N messages less one of N, over N)\n")
    print("| " + " | ".join(head) + " |")
    print("| " + " | ".join(["---"] * 2 + ["---:"] * (len(head) - 2)) + " |")
    for name in names:
        for role, value in results[(now, "rpcwire", name)].items():
            unit = {"batch": "request", "ping-pong": f"call ({role})"}.get(name, "line")
            row = [name, unit]
            if base:
                old = results[(base, "rpcwire", name)][role]
                row += [f"{old:,.0f}", f"{value:,.0f}", f"{(value - old) / old * 100:+.2f}%"]
            else:
                row += [f"{value:,.0f}"]
            if peers:
                peer = results.get((None, "orjson", name))
                row += [f"{peer[role]:,.0f}", f"{peer[role] / value:.2f}x"] if peer else ["", ""]
            print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()

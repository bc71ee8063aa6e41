"""The README's code and the examples, run as written: real subprocesses on the source tree, each bounded.

- README.md: the fenced block after each ``<!-- test: NAME -->`` comment. ``server.py`` and ``client.py`` are
  written to a folder and run there as the README says (``python client.py``, with the venv "activated": the
  running interpreter's folder first on ``PATH``); the ``sh`` block's commands run in bash and print what
  the ``# `` line under each says; ``http`` (port 0 instead of 8000) serves while ``curl`` runs.
- examples/: each run as its docstring says, its stated output checked: ``tool_server.py`` by hand (the
  docstring's lines) and by the MCP SDK's own client; ``flask_server.py`` (Flask's server on port 0) with
  ``http_client.py`` and the docstring's ``curl`` line against it.
- The README's links are absolute (they must work on the package index) and name files that exist; the
  performance chart is what its table gives.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest
from support import EXAMPLES, ROOT
from support.processes import ServerProcess, announced_server, child_env

README = ROOT / "README.md"
TIMEOUT = 60  # seconds, for any one child process
REPOSITORY = "https://github.com/rpcwire/rpcwire"

# The two cores: the README's files and the tool server as written, and with their imports swapped for the
# pure-Python twin (what the tool server's docstring offers).
CORES = ["rpcwire", "rpcwire.pure"]


def readme_blocks() -> dict[str, str]:
    """The fenced block following each ``<!-- test: NAME -->`` comment of the README, by NAME."""
    text = README.read_text(encoding="utf-8")
    pattern = re.compile(r"<!-- test: (?P<name>[^>]+?) -->\n```[a-z]*\n(?P<body>.*?)\n```", re.DOTALL)
    return {match["name"]: match["body"] + "\n" for match in pattern.finditer(text)}


def activated_env() -> dict[str, str]:
    """A child's environment as in a shell with the venv activated: the package importable from the source
    tree (as ``make develop`` installs it), ``python`` the running interpreter."""
    env = child_env()
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


def on_core(source: str, core: str) -> str:
    """``source`` with its rpcwire imports pointed at ``core``."""
    if core == "rpcwire":
        return source
    return source.replace("from rpcwire import", f"from {core} import").replace(
        "import rpcwire\n", f"import {core} as rpcwire\n"
    )


def commands_and_outputs(block: str) -> list[tuple[str, str]]:
    """A shell block's commands (``\\`` continuations joined) each with the ``# `` line printed under it."""
    pairs: list[tuple[str, str]] = []
    command = ""
    for line in block.splitlines():
        if line.startswith("# "):
            pairs.append((command, line[2:]))
            command = ""
        elif line.strip():
            command += line + "\n"
    assert not command.strip(), f"a command without its output line: {command!r}"
    return pairs


def run(command: list[str], cwd: Path, stdin: bytes = b"") -> str:
    """Run ``command`` to its end (``TIMEOUT`` at most); it must exit 0 and print no traceback."""
    child = subprocess.run(
        command, cwd=cwd, env=activated_env(), input=stdin, capture_output=True, timeout=TIMEOUT, check=False
    )
    errors = child.stderr.decode(errors="replace")
    assert child.returncode == 0 and "Traceback" not in errors, errors
    return child.stdout.decode()


# --- README ---------------------------------------------------------------------------------------------


@pytest.fixture
def readme_folder(tmp_path: Path) -> Path:
    """A folder holding the README's ``server.py`` and ``client.py`` (as written: the native core)."""
    blocks = readme_blocks()
    for name in ("server.py", "client.py"):
        (tmp_path / name).write_text(blocks[name], encoding="utf-8")
    return tmp_path


def test_the_readme_marks_the_blocks_it_runs() -> None:
    assert set(readme_blocks()) == {"server.py", "client.py", "client.py output", "sh", "http", "curl"}


@pytest.mark.parametrize("core", CORES)
def test_the_readme_client_calls_the_readme_server(readme_folder: Path, core: str) -> None:
    for name in ("server.py", "client.py"):
        path = readme_folder / name
        path.write_text(on_core(path.read_text(encoding="utf-8"), core), encoding="utf-8")
    assert run(["python", "client.py"], readme_folder) == readme_blocks()["client.py output"]


def test_the_readme_shell_lines_print_what_they_say(readme_folder: Path) -> None:
    pairs = commands_and_outputs(readme_blocks()["sh"])
    assert len(pairs) == 2
    assert "python -m rpcwire serve server:handler" in pairs[1][0]  # the CLI serves the guarded file
    for command, output in pairs:
        assert run(["bash", "-c", command], readme_folder) == output + "\n", command


def test_the_readme_http_server_answers_the_curl_line(readme_folder: Path) -> None:
    """The CLI serves the README's server over HTTP. Its stdin stays open, as a terminal's does: without the
    file's ``__main__`` guard, importing it would serve stdin first and never listen."""
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed")
    serve = readme_blocks()["http"].strip()
    assert serve.startswith("python ") and "127.0.0.1:8000" in serve
    [(curl, output)] = commands_and_outputs(readme_blocks()["curl"])
    command = ["bash", "-c", "exec " + serve.replace("127.0.0.1:8000", "127.0.0.1:0")]
    server = announced_server(  # the watchdog ends a silent server
        command, readme_folder, "listening on http://", TIMEOUT, env=activated_env(), open_stdin=True
    )
    with server as port:
        answer = run(["bash", "-c", curl.replace("127.0.0.1:8000", f"127.0.0.1:{port}")], readme_folder)
    assert answer.strip() == output


def test_the_readme_links_are_absolute_and_name_files_that_exist() -> None:
    text = README.read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)\s]+)\)", text)
    assert targets
    relative = [target for target in targets if not target.startswith(("https://", "#"))]
    assert not relative, f"relative links break on the package index: {relative}"
    for target in targets:
        for prefix in (f"{REPOSITORY}/blob/main/", f"{REPOSITORY}/tree/main/"):
            if target.startswith(prefix):
                assert (ROOT / target.removeprefix(prefix).split("#")[0]).exists(), target


# --- examples/tool_server.py ----------------------------------------------------------------------------


def docstring_messages(path: Path) -> list[Any]:
    """The JSON messages of a docstring's indented block: a line ``    {`` starts one, a line indented further
    continues it."""
    pieces: list[str] = []
    for line in path.read_text(encoding="utf-8").split('"""')[1].splitlines():
        if line.startswith("    {"):
            pieces.append(line.strip())
        elif line.startswith("     ") and pieces:
            pieces[-1] += line.strip()
    return [json.loads(piece) for piece in pieces]


class Lines:
    """A child's stdout read line by line on a thread, so that a test can wait with a deadline."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.lines: list[Any] = []
        self.done = threading.Event()
        self.changed = threading.Condition()
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream: IO[bytes]) -> None:
        for line in stream:
            with self.changed:
                self.lines.append(json.loads(line))
                self.changed.notify_all()
        self.done.set()

    def wait_for(self, predicate: Any) -> None:
        deadline = time.monotonic() + TIMEOUT
        with self.changed:
            while not predicate(self.lines):
                left = deadline - time.monotonic()
                assert left > 0, f"not seen in {TIMEOUT} s; lines so far: {self.lines}"
                self.changed.wait(left)


@pytest.fixture
def tool_server(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[subprocess.Popen[bytes]]:
    """examples/tool_server.py started as its docstring says, on the core of ``request.param``."""
    source = (EXAMPLES / "tool_server.py").read_text(encoding="utf-8")
    server = ServerProcess(tmp_path, on_core(source, request.param), [], TIMEOUT * 2)
    try:
        yield server.process
    finally:
        server.close()
    assert "Traceback" not in server.errors()


def test_the_tool_server_docstring_lists_the_messages_it_answers() -> None:
    methods = [message["method"] for message in docstring_messages(EXAMPLES / "tool_server.py")]
    assert methods == [
        "initialize",
        "notifications/initialized",
        "tools/call",
        "tools/call",
        "notifications/cancelled",
    ]


@pytest.mark.parametrize("tool_server", CORES, indirect=True)
def test_the_tool_server_answers_the_docstring_lines(tool_server: subprocess.Popen[bytes]) -> None:
    """Typed as its docstring says: the cancellation once ``add`` is answered and ``slow_count`` reports."""
    assert tool_server.stdin is not None and tool_server.stdout is not None
    *before, cancel = docstring_messages(EXAMPLES / "tool_server.py")
    lines = Lines(tool_server.stdout)
    tool_server.stdin.write(b"".join(json.dumps(message).encode() + b"\n" for message in before))
    tool_server.stdin.flush()
    lines.wait_for(lambda seen: any(line.get("id") == 2 for line in seen) and any("method" in line for line in seen))
    tool_server.stdin.write(json.dumps(cancel).encode() + b"\n")
    tool_server.stdin.close()
    assert tool_server.wait(timeout=TIMEOUT) == 0
    assert lines.done.wait(TIMEOUT)
    seen = lines.lines
    initialized = next(line for line in seen if line.get("id") == 0)
    assert initialized == {
        "jsonrpc": "2.0",
        "id": 0,
        "result": {
            "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "rpcwire-example-tools", "version": "1.0.0"},
        },
    }
    # a float parameter receives a float: 2 + 3 is 5.0 (as the MCP SDK's pydantic gives it)
    added = {"content": [{"type": "text", "text": "5.0"}], "structuredContent": {"result": 5.0}}
    assert {"jsonrpc": "2.0", "id": 2, "result": added} in seen
    progress = [line["params"] for line in seen if line.get("method") == "notifications/progress"]
    assert progress and all(item["progressToken"] == "p1" and item["total"] == 50 for item in progress)
    assert len(progress) < 50  # stopped by the cancellation
    assert not any(line.get("id") == 1 for line in seen)  # MCP: a cancelled call gets no answer
    assert len([line for line in seen if "id" in line]) == 2  # the notifications got no answer


def test_the_tool_server_serves_the_mcp_sdks_client(tmp_path: Path) -> None:
    """The MCP Python SDK's own client (``stdio_client`` + ``ClientSession``) against the example."""
    anyio = pytest.importorskip("anyio")
    pytest.importorskip("mcp")
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    async def session_checks() -> None:
        params = StdioServerParameters(command=sys.executable, args=[str(EXAMPLES / "tool_server.py")], env=child_env())
        with (tmp_path / "stderr").open("w") as errlog, anyio.fail_after(TIMEOUT):
            async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
                initialized = await session.initialize()
                assert initialized.server_info.name == "rpcwire-example-tools"
                tools = await session.list_tools()
                assert [tool.name for tool in tools.tools] == ["add", "slow_count"]
                # The schemas come from the functions' annotations and docstrings (TOOLS.mcp_tools()).
                add, slow_count = tools.tools
                assert add.description == "Add two numbers"
                assert add.input_schema == {
                    "type": "object",
                    "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                    "required": ["a", "b"],
                }
                assert add.output_schema == {
                    "type": "object",
                    "properties": {"result": {"type": "number"}},
                    "required": ["result"],
                }
                assert slow_count.input_schema["properties"] == {"n": {"type": "integer", "minimum": 1, "default": 3}}
                result = await session.call_tool("add", {"a": 2, "b": 3})
                assert not result.is_error
                assert [item.text for item in result.content] == ["5.0"]  # type: ignore[union-attr]
                assert result.structured_content == {"result": 5.0}  # checked against outputSchema by the client
                progress: list[tuple[float, float | None, str | None]] = []

                async def on_progress(value: float, total: float | None, message: str | None) -> None:
                    progress.append((value, total, message))

                counted = await session.call_tool(  # type: ignore[call-overload]
                    "slow_count", {"n": 3}, progress_callback=on_progress
                )
                assert [item.text for item in counted.content] == ["counted to 3"]
                assert progress == [(i, 3, f"counted to {i}") for i in (1, 2, 3)]

    anyio.run(session_checks)
    assert "Traceback" not in (tmp_path / "stderr").read_text(errors="replace")


# --- examples/flask_server.py and examples/http_client.py -----------------------------------------------


@pytest.fixture
def flask_example() -> Iterator[str]:
    """``python examples/flask_server.py 0``: Flask's development server on a free port; yields its URL."""
    pytest.importorskip("flask")
    process = subprocess.Popen(
        [sys.executable, str(EXAMPLES / "flask_server.py"), "0"],
        cwd=ROOT,
        env=child_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    watchdog = threading.Timer(TIMEOUT * 2, process.kill)
    watchdog.start()
    assert process.stdout is not None
    said: list[str] = []
    url: list[str] = []
    announced = threading.Event()

    def read(stream: IO[bytes]) -> None:  # to its end, so that the pipe never fills
        for raw in stream:
            said.append(raw.decode(errors="replace"))
            found = re.search(r"Running on (http://127\.0\.0\.1:\d+)", said[-1])
            if found and not url:
                url.append(found[1])
                announced.set()
        announced.set()

    reader = threading.Thread(target=read, args=(process.stdout,), daemon=True)
    reader.start()
    try:
        announced.wait(TIMEOUT)
        assert url, "the Flask example did not say where it runs: " + "".join(said)
        yield url[0]
    finally:
        watchdog.cancel()
        process.terminate()
        process.wait(timeout=TIMEOUT)
        reader.join(TIMEOUT)
        process.stdout.close()
    assert not any("Traceback" in line for line in said), "".join(said)


def test_the_http_client_example_against_the_flask_example(flask_example: str) -> None:
    printed = run([sys.executable, str(EXAMPLES / "http_client.py"), f"{flask_example}/rpc"], ROOT)
    docstring = (EXAMPLES / "http_client.py").read_text(encoding="utf-8").split('"""')[1]
    stated = re.search(r"prints\n\n((?:    .+\n)+)", docstring)
    assert stated is not None
    assert printed.splitlines() == [line.removeprefix("    ") for line in stated[1].splitlines()]


def test_the_flask_example_answers_its_curl_line(flask_example: str) -> None:
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed")
    docstring = (EXAMPLES / "flask_server.py").read_text(encoding="utf-8").split('"""')[1]
    curl = re.search(r"^    (curl .*?)\n\n", docstring, re.MULTILINE | re.DOTALL)
    stated = re.search(r"which prints ``(.*?)``", docstring)
    assert curl is not None and stated is not None
    answer = run(["bash", "-c", curl[1].replace("http://127.0.0.1:5000", flask_example)], ROOT)
    assert answer.strip() == stated[1]


# --- docs -----------------------------------------------------------------------------------------------


def test_the_performance_chart_is_what_its_table_gives() -> None:
    run([sys.executable, str(ROOT / "docs" / "tools" / "perf_chart.py"), "--check"], ROOT)

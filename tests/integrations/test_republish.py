"""bench/republish.py (`make bench-published`): its tables name benchmarks that exist, a failing benchmark prints its
error in its table's place while the others still run, and a smoke run of two real tables writes them with the
line that says when, on what and under what load."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _republish() -> ModuleType:
    if not (ROOT / "bench" / "republish.py").exists():
        pytest.skip("no source tree here (a wheel's run of the suite)")
    spec = importlib.util.spec_from_file_location("republish", ROOT / "bench" / "republish.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["republish"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_every_table_names_a_benchmark_and_a_published_place() -> None:
    republish = _republish()
    names = [table.name for table in republish.TABLES]
    assert len(names) == len(set(names))
    for table in republish.TABLES:
        assert (ROOT / "bench" / table.script).is_file(), table
        assert any(doc in table.where for doc in ("README.md", "docs/")), table
    default = sum(table.minutes for table in republish.TABLES if table.default)
    assert default <= 35  # the brief's bound for an idle 2-core machine


def test_a_failing_benchmark_leaves_its_error_in_its_place_and_the_rest_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    republish = _republish()
    failing = tmp_path / "failing.py"
    failing.write_text("import sys\nprint('half a table')\nsys.exit('the server did not start')\n")
    working = tmp_path / "working.py"
    working.write_text("print('| a | b |\\n| --- | ---: |\\n| x | 1.0 |')\n")
    monkeypatch.setattr(
        republish,
        "TABLES",
        (
            republish.Table("broken", "docs/x.md", str(failing), (), (), 0.1),
            republish.Table("fine", "README.md", str(working), (), (), 0.1),
        ),
    )
    out = tmp_path / "published.md"
    assert republish.main(["--out", str(out)]) == 1
    text = out.read_text()
    broken, fine = text.split("## broken")[1].split("## fine")
    assert "half a table" in broken
    assert "**Failed** (exit status 1)" in broken
    assert "the server did not start" in broken
    assert "| x | 1.0 |" in fine
    assert "Failed" not in fine
    assert "load average (1/5/15 min)" in fine
    assert "the server did not start" in (tmp_path / "published.log").read_text()


def test_a_quick_run_writes_each_table_under_its_line(tmp_path: Path) -> None:
    _republish()  # (skips where there is no source tree)
    out = tmp_path / "published.md"
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "republish.py"), "--quick", "--only", "accept", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=100,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr + out.read_text() if out.exists() else done.stderr
    text = out.read_text()
    assert "## accept: " in text
    assert "python bench/accept_bench.py --repeats 1" in text
    assert f"CPython {sys.version.split()[0]}" in text
    assert "| ASGIApp, sync handler (worker thread) | in process" in text


def test_the_transport_table_in_its_published_form(tmp_path: Path) -> None:
    republish = _republish()

    def cell(us: float, *, ok: bool = True, malformed: int = 5, **more: float) -> dict:
        check = {"parse_errors": malformed, "parse_errors_expected": 5}
        return {"median_us": us, "ok": ok, "check": check, **more}

    results = {
        "workloads": {
            "stream": {"summary": {"rpcwire": cell(0.5), "pylsp-jsonrpc": cell(2.5, malformed=0)}},
            "batch": {"summary": {"rpcwire": cell(0.4), "pylsp-jsonrpc": cell(1.0, ok=False)}},
            "ping-pong": {"summary": {"rpcwire": cell(12.0, p50_us=4.25)}},
        },
        "memory": {"rpcwire": {"peak_extra_bytes": 3 * 2**20}},
    }
    path = tmp_path / "results.json"
    path.write_text(json.dumps(results))
    table = republish.transport_table(path)
    assert "| **rpcwire** | **0.50** | **0.40** | **—** | **4.2** | **—** |" in table
    assert "| python-lsp-jsonrpc | 2.50 ✗ | can't | — | — | — |" in table
    assert "rpcwire 3.0 MiB" in table


def test_a_benchmark_past_its_limit_is_stopped_and_the_rest_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    republish = _republish()
    slow = tmp_path / "slow.py"
    slow.write_text("import sys, time\nprint('| first row |', flush=True)\ntime.sleep(60)\n")
    working = tmp_path / "working.py"
    working.write_text("print('| a |')\n")
    monkeypatch.setattr(
        republish,
        "TABLES",
        (
            republish.Table("slow", "docs/x.md", str(slow), (), (), 0.1),
            republish.Table("fine", "README.md", str(working), (), (), 0.1),
        ),
    )
    out = tmp_path / "published.md"
    assert republish.main(["--out", str(out), "--limit", "2"]) == 1
    slow_part, fine = out.read_text().split("## slow")[1].split("## fine")
    assert "| first row |" in slow_part
    assert "**Failed** (stopped after its limit of 2 s)" in slow_part
    assert "| a |" in fine

"""The API reference as a user reads it: every public name with its docstring, signature and members.

The site is built here with the docs' own MkDocs (``.venv-docs``, which ``make docs`` creates) into a temporary
folder, and read by ``docs/tools/check_reference.py``: an anchor on each public name's public path followed by
its docstring's first line, a class's methods and properties included; no private parameter in a signature, no
Sphinx ``~``, no anchor on a private path, the native classes with their constructor's signature and their members
in the stub's order, a search index. Without ``.venv-docs`` the build is skipped (its reason says so); CI's
``make docs`` runs the same check after its build. The checker itself is tested on pages with each fault.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import re
import shutil
import subprocess
from pathlib import Path
from types import ModuleType

import pytest
from support import ROOT

MKDOCS = ROOT / ".venv-docs" / "bin" / "mkdocs"


def _checker() -> ModuleType:
    if not (ROOT / "python" / "rpcwire").is_dir():
        pytest.skip("no source tree: the checker reads the public names from python/rpcwire (an installed wheel's run)")
    spec = importlib.util.spec_from_file_location("check_reference", ROOT / "docs" / "tools" / "check_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not MKDOCS.exists():
        pytest.skip("no .venv-docs here to build the site with (`make docs` creates it and runs this check)")
    out = tmp_path_factory.mktemp("site")
    build = subprocess.run(
        [str(MKDOCS), "build", "--strict", "--quiet", "--site-dir", str(out)],
        check=False,
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert build.returncode == 0, build.stderr
    return out


@pytest.mark.slow
def test_reference_shows_every_public_name(site: Path) -> None:
    assert _checker().check(site) == []


@pytest.mark.slow
def test_search_index_holds_the_reference(site: Path) -> None:
    index = (site / "search" / "search_index.json").read_text(encoding="utf-8")
    assert "rpcwire.StdioTransport" in index and "guides/stdio-server/" in index


def _page(site: Path, page: str) -> Path:
    path = site / "reference" / "api" / "index.html"
    path.parent.mkdir(parents=True)
    path.write_text(page, encoding="utf-8")
    (site / "search").mkdir()
    (site / "search" / "search_index.json").write_text('{"docs": [{"location": "reference/api/"}]}')
    return site


def test_checker_finds_each_fault(tmp_path: Path) -> None:
    check = _checker()
    faults = check.check(
        _page(
            tmp_path,
            '<article class="md-content__inner">'
            '<h3 id="rpcwire._client.Client">rpcwire.Client</h3>'
            '<div class="doc-signature highlight">Client(transport, *, _process=None)</div>'
            "<p>fails with <code>~rpcwire.ConnectionClosed</code></p></article>",
        )
    )
    text = "\n".join(faults)
    assert "rpcwire.Client: no anchor #rpcwire.Client" in text
    assert "rpcwire.StdioTransport: no anchor" in text
    assert "#rpcwire._client.Client: an anchor on a private path" in text
    assert "a private parameter _process" in text
    assert "a Sphinx ~ shown" in text
    assert "rpcwire.AsyncWebSocketClient.spawn" not in text  # not a member: it does not apply


def test_checker_wants_the_docstring_under_its_heading(tmp_path: Path) -> None:
    check = _checker()
    faults = check.check(_page(tmp_path, '<h3 id="rpcwire.Client">rpcwire.Client</h3><h3 id="rpcwire.Client.call">'))
    assert any(f.startswith("rpcwire.Client: its docstring's first line is not under its heading") for f in faults)


def test_first_line_as_the_page_shows_it() -> None:
    first_line = _checker().first_line
    assert first_line(":class:`~rpcwire.HTTPRequestInfo` and ``user``\n  more") == "HTTPRequestInfo and user"
    assert first_line("Fails with :exc:`rpcwire.ConnectionClosed`.") == "Fails with rpcwire.ConnectionClosed."


def test_websocket_client_has_no_spawn(impl: ModuleType) -> None:
    """AsyncClient.spawn starts a process; a WebSocket client only connects to a URL (it is not in the reference)."""
    with pytest.raises(TypeError, match=r"connect\(url\)"):
        asyncio.run(impl.AsyncWebSocketClient.spawn([shutil.which("true") or "true"]))


# --- the README: every guide and every extra named ------------------------------------------------------

GUIDES = sorted(path.name for path in (ROOT / "docs" / "guides").glob("*.md"))


def _readme_section(title: str) -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


@pytest.mark.parametrize("section", ["Documentation", "What else is in it"])
def test_readme_links_every_guide(section: str) -> None:
    text = _readme_section(section)
    missing = [guide for guide in GUIDES if f"/docs/guides/{guide})" not in text]
    assert not missing, f"README's {section!r} does not link {missing}"


def test_readme_install_names_every_extra() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")  # no tomllib on 3.10: the one table, by hand
    table = pyproject.split("[project.optional-dependencies]\n", 1)[1].split("\n[", 1)[0]
    extras = re.findall(r"^([a-z][\w-]*) = ", table, re.M)
    assert "mcp" in extras
    install = _readme_section("Install")
    assert [extra for extra in extras if f"pip install 'rpcwire[{extra}]'" not in install] == []


def test_readme_names_the_docs_targets() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "make docs-serve" in text and "make docs" in text
    assert text.count("git clone ") == 1, "one way from source"


def test_site_nav_and_index_link_every_guide() -> None:
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    index = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    assert [g for g in GUIDES if f"guides/{g}" not in nav or f"(guides/{g})" not in index] == []


# --- the guides: a runnable example first, code that fits the column ------------------------------------

# The guides docs/guides/ holds that this check covers (the others are written by their areas' owners).
CHECKED_GUIDES = sorted(path.stem for path in (ROOT / "docs" / "guides").glob("*.md"))
CODE_WIDTH = 88  # what the site's code column shows without a scroll bar


def _blocks(text: str) -> list[tuple[int, str, str]]:
    """``(offset, language, code)`` of each fenced block."""
    return [(m.start(), m.group(1), m.group(2)) for m in re.finditer(r"^```(\w*)\n(.*?)^```", text, re.S | re.M)]


@pytest.mark.parametrize("guide", CHECKED_GUIDES)
def test_guide_opens_with_a_runnable_example(guide: str) -> None:
    text = (ROOT / "docs" / "guides" / f"{guide}.md").read_text(encoding="utf-8")
    first_section = text.find("\n## ")
    python = [(start, code) for start, language, code in _blocks(text) if language == "python"]
    assert python and python[0][0] < first_section, f"{guide}: no Python example before its first section"
    compile(python[0][1], f"{guide}.md", "exec")  # runs as written: no placeholder a reader must fill in first
    assert "\n\n" in text[:first_section].split("```", 1)[0], f"{guide}: no words on when to use it before the code"


@pytest.mark.parametrize("guide", CHECKED_GUIDES)
def test_guide_code_fits_the_column(guide: str) -> None:
    text = (ROOT / "docs" / "guides" / f"{guide}.md").read_text(encoding="utf-8")
    long = [line for _, _, code in _blocks(text) for line in code.splitlines() if len(line) > CODE_WIDTH]
    assert long == []


@pytest.mark.parametrize("guide", CHECKED_GUIDES)
def test_guide_keeps_implementation_detail_in_the_specification(guide: str) -> None:
    text = (ROOT / "docs" / "guides" / f"{guide}.md").read_text(encoding="utf-8")
    words = ["PIPE_BUF", "MSG_DONTWAIT", "readinto1", "GIL", "does not bind", "inspect.signature"]
    assert [word for word in words if word in text] == []

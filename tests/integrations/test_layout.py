"""docs/development.md's layout table and reading order stay true to the source tree (issue 30).

- Every file of the package (``python/rpcwire/``: ``.py`` and ``.pyi``) has its place in the layout table: the
  first column of a row names it (its path from the package, ``_typed.py``, ``http/_wsgi.py``), or, for a file
  in a folder, the folder's row (``_pure/``, ``pure/``) names it in backticks.
- Every Rust file of ``src/`` and ``crates/`` is named in the first column of a row, by its path from the
  checkout (``src/lib.rs``; ``tests/integrations/test_rust_layout.py`` holds the Rust files to their module docs
  and their size).
- No row names a file or a folder that is gone, and every file the reading order names is there.
- Every module of the package reads in a sitting: at most 800 lines (the Rust files are held to the same by
  ``test_rust_layout.py``).

Skipped where the source tree is not here (the wheels' runs of the suite, from a copy of ``tests/``). No core is
involved: this reads files.
"""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path

import pytest
from support import ROOT

PACKAGE = "python/rpcwire"
MOST_LINES = 800
RUST_DIRS = ("src", "crates")
# A name in the first column that starts with one of these is a path from the checkout; any other is a path from
# the package.
FROM_THE_ROOT = ("python/", "src/", "crates/", "tests/", "bench/", "fuzz/", "docs/", "examples/")


@pytest.fixture
def root() -> Path:
    if not (ROOT / PACKAGE / "__init__.py").exists() or not (ROOT / "src" / "lib.rs").exists():
        pytest.skip("no source tree here (a wheel's run of the suite)")
    return ROOT


def section(root: Path, title: str) -> str:
    """The text of docs/development.md's section ``title``, up to the next section."""
    text = (root / "docs" / "development.md").read_text(encoding="utf-8")
    return re.split(r"^## ", text.split(f"## {title}\n", 1)[1], maxsplit=1, flags=re.MULTILINE)[0]


def rows(root: Path) -> list[tuple[list[str], str]]:
    """The layout table's rows: the names in backticks of the first column, and the whole row."""
    found = []
    for line in section(root, "Layout").splitlines():
        if line.startswith("| ") and not line.startswith("| ---") and not line.startswith("| path "):
            first = line[2:].split(" | ", 1)[0]
            found.append((re.findall(r"`([^`]+)`", first), line))
    return found


def package_files(root: Path) -> list[str]:
    """The package's Python files and stubs, as paths from the package."""
    package = root / PACKAGE
    return sorted(
        str(path.relative_to(package))
        for suffix in ("*.py", "*.pyi")
        for path in package.rglob(suffix)
        if "__pycache__" not in path.parts
    )


def rust_files(root: Path) -> list[str]:
    return sorted(str(path.relative_to(root)) for folder in RUST_DIRS for path in (root / folder).rglob("*.rs"))


def where(root: Path, name: str) -> Path:
    return root / name if name.startswith(FROM_THE_ROOT) else root / PACKAGE / name


def test_every_file_of_the_package_has_its_place(root: Path) -> None:
    table = rows(root)
    named = {name for names, _ in table for name in names}
    unplaced = []
    for name in package_files(root):
        if name in named:
            continue
        folder, _, base = name.rpartition("/")
        in_its_folder = any(f"{folder}/" in names and f"`{base}`" in line for names, line in table if folder)
        if not in_its_folder:
            unplaced.append(name)
    assert unplaced == [], "files of python/rpcwire/ the layout table does not name"


def test_every_rust_file_has_its_row(root: Path) -> None:
    named = {name for names, _ in rows(root) for name in names}
    assert [name for name in rust_files(root) if name not in named] == []


def test_no_row_names_what_is_gone(root: Path) -> None:
    gone = [name for names, _ in rows(root) for name in names if not where(root, name).exists()]
    assert gone == []


def test_the_reading_order_names_files_that_are_there(root: Path) -> None:
    """Each file of the reading order (a path, a name within the step's folder, or a pattern: ``scan*.rs``)
    is a file of the package or of the Rust crates."""
    files = [f"{PACKAGE}/{name}" for name in package_files(root)] + rust_files(root)
    named = re.findall(r"`([^`\s]+\.(?:py|rs))`", section(root, "Reading order: one message's way through"))
    assert len(named) > 10
    missing = [name for name in named if not any(fnmatch.fnmatch(path, f"*{name}") for path in files)]
    assert missing == []


def test_every_module_of_the_package_reads_in_a_sitting(root: Path) -> None:
    lines = {name: len((root / PACKAGE / name).read_text("utf-8").splitlines()) for name in package_files(root)}
    assert {name: count for name, count in lines.items() if count > MOST_LINES} == {}, "split it by concern"

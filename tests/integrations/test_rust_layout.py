"""The Rust crates' layout as docs/development.md promises it: modules of one concern, each read in a sitting.

Every Rust file of the binding (``src/``) and of the protocol crate (``crates/rpcwire-protocol/src/``) opens
with a ``//!`` module doc saying what it owns, holds at most 800 lines, and has its row in the layout table of
``docs/development.md``; every Rust file that table names exists. Skipped where the source tree is not here
(the wheels' runs of the suite, from a copy of ``tests/``). No core is involved: this reads files.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support import ROOT

MOST_LINES = 800
RUST_DIRS = ("src", "crates/rpcwire-protocol/src")


def rust_files(root: Path) -> list[str]:
    """The Rust files of both crates, as paths from the repository's root."""
    return sorted(str(path.relative_to(root)) for folder in RUST_DIRS for path in (root / folder).rglob("*.rs"))


def layout_paths(root: Path) -> set[str]:
    """The Rust paths the layout table of docs/development.md names in its first column."""
    text = (root / "docs" / "development.md").read_text(encoding="utf-8")
    table = text.split("## Layout", 1)[1]
    return set(re.findall(r"^\| `([^`]+\.rs)` \|", table, flags=re.MULTILINE))


@pytest.fixture
def root() -> Path:
    if not (ROOT / "src" / "lib.rs").exists():
        pytest.skip("no source tree here (a wheel's run of the suite)")
    return ROOT


def test_every_rust_file_opens_with_what_it_owns(root: Path) -> None:
    undocumented = [name for name in rust_files(root) if not (root / name).read_text("utf-8").startswith("//!")]
    assert undocumented == []


def test_every_rust_file_reads_in_a_sitting(root: Path) -> None:
    lines = {name: len((root / name).read_text("utf-8").splitlines()) for name in rust_files(root)}
    assert {name: count for name, count in lines.items() if count > MOST_LINES} == {}


def test_the_layout_table_lists_every_rust_file_and_no_other(root: Path) -> None:
    files = set(rust_files(root))
    listed = layout_paths(root)
    assert sorted(files - listed) == [], "files the layout table does not list"
    assert sorted(listed - files) == [], "rows of the layout table without their file"

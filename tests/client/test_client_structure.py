"""The clients' structure holds: modules of one concern, each of a size one reads in a sitting, each named in
docs/development.md's layout; what a lone call's one call into the core comes back with is a type both cores
make, never a tagged tuple."""

from __future__ import annotations

import ast
import os
from pathlib import Path
from types import ModuleType

import pytest
import rpcwire
from rpcwire._contract import ErrorAnswer, LoneOutcome, ReadFailed, ReadOn, Unsent

PACKAGE = Path(rpcwire.__file__).parent
DEVELOPMENT = PACKAGE.parents[1] / "docs" / "development.md"  # beside the source tree, not an installed package
MAX_LINES = 800

# The clients' modules, each of one concern (docs/development.md, "Layout").
CLIENTS = [
    "_peer.py",
    "_id_null_ledger.py",
    "_server_stderr.py",
    "_client.py",
    "_client_reading.py",
    "_client_output.py",
    "_client_callbacks.py",
    "_client_process.py",
    "_async_client.py",
    "_async_client_pipes.py",
    "_ws_client.py",
    "_http_client.py",
    "_http_client_wire.py",
    "_http_client_tls.py",
    "_pure/client_pipe.py",
    "pure/_clients.py",
]


def test_every_client_module_is_listed() -> None:
    """A module of the clients' added without its place here (and in the layout) fails this."""
    on_disk = {path.name for path in PACKAGE.glob("_*client*.py")} | {path.name for path in PACKAGE.glob("_peer.py")}
    assert on_disk <= {Path(name).name for name in CLIENTS}


@pytest.mark.parametrize("name", CLIENTS)
def test_a_client_module_is_read_in_a_sitting(name: str) -> None:
    lines = (PACKAGE / name).read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_LINES, f"{name}: {lines} lines, over {MAX_LINES}: split it by concern"


@pytest.mark.parametrize("name", CLIENTS)
def test_a_client_module_is_in_the_layout(name: str) -> None:
    if not DEVELOPMENT.exists():
        pytest.skip("no source tree: the installed package has no docs/development.md beside it")
    assert f"`{Path(name).name}`" in DEVELOPMENT.read_text(encoding="utf-8")


@pytest.mark.parametrize("name", ["_client.py", "_client_reading.py", "_pure/client_pipe.py"])
def test_no_tagged_tuple_is_matched_on_the_lone_call(name: str) -> None:
    """The lone call's outcome is told by its type: nothing compares a tag taken out of a tuple."""
    tree = ast.parse((PACKAGE / name).read_text(encoding="utf-8"))
    tags = [
        ast.unparse(node)
        for node in ast.walk(tree)
        if isinstance(node, ast.Compare) and isinstance(node.left, ast.Name) and node.left.id == "tag"
    ]
    returned_tuples = [
        ast.unparse(node)
        for node in ast.walk(tree)
        if isinstance(node, ast.Return)
        and isinstance(node.value, ast.Tuple)
        and node.value.elts
        and isinstance(node.value.elts[0], ast.Constant)
        and isinstance(node.value.elts[0].value, int)
    ]
    assert tags == [] and returned_tuples == []


def test_the_lone_call_outcomes_are_read_only_and_compared_by_value() -> None:
    outcomes = [Unsent(b"line"), ErrorAnswer(rpcwire.Response(1, None, {})), ReadOn(None), ReadFailed(OSError())]
    for outcome in outcomes:
        assert isinstance(outcome, LoneOutcome)
        with pytest.raises(AttributeError):
            outcome.line = b"other"  # type: ignore[union-attr]
    assert Unsent(b"line") == Unsent(b"line") != ReadOn(b"line")
    assert repr(ReadOn(None)) == "ReadOn(None)"


def test_both_cores_hand_back_the_same_outcome_classes(impl: ModuleType) -> None:
    """A call that cannot go the quick way (its line longer than ``quick_bytes``) comes back ``Unsent``, of the one
    class in ``rpcwire._contract``, from either core."""
    out_read, out_write = os.pipe()
    in_read, in_write = os.pipe()
    halt_read, halt_write = os.pipe()
    try:
        pipe = impl.Client._core._ClientPipe(out_read, in_write, halt_read, max_message_bytes=1 << 20, max_depth=16)

        class Output:
            def _locked(self) -> bool:
                return False

        outcome = pipe._call("echo", [1], 1, 1, 32, 1.0, Output())
        assert type(outcome) is Unsent
        assert outcome.line == impl.Client._core._encode_request("echo", [1], 1)
    finally:
        for fd in (out_read, out_write, in_read, in_write, halt_read, halt_write):
            os.close(fd)

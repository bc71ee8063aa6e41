"""``methods()`` with annotated functions against hostile or extreme input: the checking's work bounded by the
input (unions), input as deep as the transport accepts (checking and converting without the interpreter's stack),
texts of ``data`` cut whatever produced them, and one rule for scalars, ``Literal`` and ``Enum``."""

from __future__ import annotations

import dataclasses
import enum
import io
import json
import sys
import threading
from types import ModuleType
from typing import Annotated, Any, Literal, Optional, Union

import pydantic
import pytest
import rpcwire
from rpcwire._typed import GOT_LENGTH
from rpcwire._types import MAX_MAX_DEPTH
from support.messages import answers, err, ok, request
from support.serving import MODES, serve_in_mode

if sys.version_info >= (3, 11):
    from typing import NotRequired, TypedDict
else:  # 3.10's typing has no NotRequired: typing_extensions' (as in test_typed_methods.py)
    from typing_extensions import NotRequired, TypedDict

INVALID = rpcwire.ERR_INVALID_PARAMS


def answer(impl: ModuleType, handler: Any, message: bytes, **limits: Any) -> Any:
    body = impl.dispatch(message, handler, **limits)
    return None if body is None else json.loads(body)


def invalid(*errors: tuple[list[Any], str, str]) -> dict[str, Any]:
    return err(1, INVALID, "Invalid params", [{"path": p, "expected": e, "got": g} for p, e, g in errors])


def nested(member: str, depth: int, bottom: Any, **siblings: Any) -> Any:
    """``{member: {member: ... bottom}}``, ``depth`` objects deep, each with ``siblings`` too (no recursion)."""
    value = bottom
    for _ in range(depth):
        value = {member: value, **siblings}
    return value


# --- unions: work bounded by the input ---------------------------------------------------------------------


class Budget(Exception):
    """Raised by a counter past its budget: the unfixed checker is exponential, the test fails rather than hang."""


@dataclasses.dataclass
class Left:
    child: Left | Right | None = None
    a: int = 0

    def __post_init__(self) -> None:
        BUILT.append(self)
        if len(BUILT) > BUDGET:
            raise Budget(len(BUILT))


@dataclasses.dataclass
class Right:
    child: Left | Right | None = None
    b: int = 0

    def __post_init__(self) -> None:
        BUILT.append(self)
        if len(BUILT) > BUDGET:
            raise Budget(len(BUILT))


BUILT: list[Any] = []
BUDGET = 10_000


def depth_of(node: Left | Right) -> int:
    levels = 0
    current: Any = node
    while current is not None:
        levels += 1
        current = current.child
    return levels


@pytest.mark.parametrize("depth", [10, 20, 30])
def test_a_union_accepted_deep_is_built_once_per_level(impl: ModuleType, depth: int) -> None:
    """``Left | Right`` where both have a member ``Left | Right | None``, each level ``{"child": ..., "b": 1}``:
    ``Left`` takes the child, then refuses ``b``; ``Right`` accepts. Each level's instance is built once (counted
    by ``__post_init__``), not once per way down (2**depth)."""
    BUILT.clear()
    registry = rpcwire.methods({"depth_of": depth_of})
    value = nested("child", depth, None, b=1)
    assert answer(impl, registry, request("depth_of", [value])) == ok(1, depth)
    assert len(BUILT) == depth
    assert all(type(built) is Right for built in BUILT)


@pytest.mark.parametrize("depth", [10, 20, 30])
def test_a_union_refused_deep_is_walked_once_per_level(
    impl: ModuleType, depth: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same union, the deepest level ``{"child": 1}``: refused at the top, after a walk whose refusals
    (each one a call of ``_got``) are a few per level, not 2**depth."""
    calls = []
    got = rpcwire._typed._got

    def counted(value: Any) -> str:
        calls.append(value)
        if len(calls) > BUDGET:
            raise Budget(len(calls))
        return got(value)

    monkeypatch.setattr(rpcwire._typed, "_got", counted)
    registry = rpcwire.methods({"depth_of": depth_of})
    value = nested("child", depth, 1)
    assert answer(impl, registry, request("depth_of", [value])) == invalid((["node"], "Left | Right", "dict"))
    assert len(calls) <= 3 * depth + 10  # (2 * depth + 7 when written)


@pytest.mark.parametrize("depth", [10, 20, 30])
def test_each_value_is_walked_a_bounded_number_of_times(depth: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The walk's per-node function (``_walk``: one value under one compiled type) is called a bounded number of
    times per level of the input, whatever the union's alternatives do below."""
    calls = []
    walk = rpcwire._typed._walk

    def counted(node: Any, value: Any) -> Any:
        calls.append(id(value))
        if len(calls) > BUDGET:
            raise Budget(len(calls))
        return walk(node, value)

    monkeypatch.setattr(rpcwire._typed, "_walk", counted)
    registry = rpcwire.methods({"depth_of": depth_of})
    with pytest.raises(rpcwire.InvalidParams):
        registry("depth_of", [nested("child", depth, 1)])
    refused = len(calls)
    calls.clear()
    BUILT.clear()
    assert registry("depth_of", [nested("child", depth, None, b=1)]) == depth
    assert refused <= 4 * depth + 10 and len(calls) <= 4 * depth + 10  # (3 * depth + 6 each when written)
    # A value meets three compiled types (the union, Left, Right), each once: a scalar at the bottom twice.
    assert max(calls.count(value) for value in set(calls)) <= 6


# --- input as deep as the transport accepts ------------------------------------------------------------------


@dataclasses.dataclass
class Chain:
    next: Chain | None = None
    n: int = 0


@dataclasses.dataclass
class Tree:
    children: list[Tree]
    label: str = ""


class Linked(TypedDict):
    next: NotRequired[Optional[Linked]]  # noqa: UP045 (Optional spelled out: another path of the checker)


def chain_length(chain: Chain) -> int:
    levels = 0
    current: Chain | None = chain
    while current is not None:
        assert isinstance(current, Chain)
        levels += 1
        current = current.next
    return levels


def same_chain(chain: Chain) -> Chain:
    return chain


def tree_height(tree: Tree) -> int:
    levels = 0
    current = tree
    while current.children:
        assert isinstance(current, Tree)
        levels += 1
        current = current.children[0]
    return levels


def same_tree(tree: Tree) -> Tree:
    return tree


def linked_length(linked: Linked) -> int:
    levels = 0
    current: Any = linked
    while current is not None:
        levels += 1
        current = current.get("next")
    return levels


def unannotated(value):  # type: ignore[no-untyped-def]
    return "seen"


DEEP = rpcwire.methods(
    {f.__name__: f for f in (chain_length, same_chain, tree_height, same_tree, linked_length, unannotated)}
)
MAX_DEPTH = MAX_MAX_DEPTH
# A request's own levels: the envelope's object and the params' array.
ENVELOPE = 2


def deep_requests() -> tuple[bytes, list[Any]]:
    """Requests that nest exactly MAX_DEPTH levels, and their answers."""
    chain = nested("next", MAX_DEPTH - ENVELOPE, None)
    levels = (MAX_DEPTH - ENVELOPE) // 2  # a Tree level is an object and its children's array
    tree: Any = {"children": []}
    for _ in range(levels - 1):
        tree = {"children": [tree]}
    linked = nested("next", MAX_DEPTH - ENVELOPE, None)
    data = (
        request("chain_length", [chain], id=1)
        + request("same_chain", [chain], id=2)
        + request("tree_height", [tree], id=3)
        + request("same_tree", [tree], id=4)
        + request("linked_length", [linked], id=5)
        + request("unannotated", [chain], id=6)
    )
    dumped_chain = nested("next", MAX_DEPTH - ENVELOPE, None, n=0)
    # The answer's result sits one level deeper than the params' array: the transport reads what it wrote.
    dumped_tree: Any = {"children": [], "label": ""}
    for _ in range(levels - 1):
        dumped_tree = {"children": [dumped_tree], "label": ""}
    expected = [
        ok(1, MAX_DEPTH - ENVELOPE),
        ok(2, dumped_chain),
        ok(3, levels - 1),
        ok(4, dumped_tree),
        ok(5, MAX_DEPTH - ENVELOPE),
        ok(6, "seen"),
    ]
    return data, expected


def test_deep_input_is_checked_and_converted(impl: ModuleType) -> None:
    """Recursive dataclasses (through ``Optional`` and through a list) and a recursive TypedDict, nested as deep
    as the transport accepts, through the sequential ``serve``: answered as the unannotated function's request
    is (not -32603 RecursionError), the results converted back to objects as deep."""
    data, expected = deep_requests()
    out = io.BytesIO()
    impl.serve(DEEP, impl.StdioTransport(io.BytesIO(data), out, max_depth=MAX_DEPTH))
    assert answers(out.getvalue()) == expected


def test_deep_input_through_dispatch(impl: ModuleType) -> None:
    chain = nested("next", 400, None)
    assert answer(impl, DEEP, request("chain_length", [chain]), max_depth=MAX_DEPTH) == ok(1, 400)
    bad = nested("next", 400, {"n": "x"})
    got = answer(impl, DEEP, request("chain_length", [bad]), max_depth=MAX_DEPTH)
    assert got == invalid((["chain", *["next"] * 400, "n"], "int", "'x'"))


@pytest.mark.parametrize("mode", MODES)
def test_deep_input_on_small_worker_stacks(impl: ModuleType, mode: str) -> None:
    """The concurrent engines check on worker threads; started here with a 256 KiB stack (a thirty-second of
    the main thread's usual one), they check and convert as deep as the sequential loop."""
    data, expected = deep_requests()
    previous = threading.stack_size(256 * 1024)
    try:
        out = io.BytesIO()
        serve_in_mode(mode, impl, DEEP, impl.StdioTransport(io.BytesIO(data), out, max_depth=MAX_DEPTH))
    finally:
        threading.stack_size(previous)
    assert sorted(answers(out.getvalue()), key=lambda answer: answer["id"]) == expected


# --- texts of data are cut, whatever produced them --------------------------------------------------------------


class Cat(pydantic.BaseModel):
    kind: Literal["cat"]


class Dog(pydantic.BaseModel):
    kind: Literal["dog"]


def adopt(pet: Annotated[Union[Cat, Dog], pydantic.Field(discriminator="kind")]) -> str:  # noqa: UP007
    return pet.kind


def test_pydantic_messages_do_not_echo_the_input(impl: ModuleType) -> None:
    """A discriminated union's tag is part of pydantic's message: cut there as ``got`` is."""
    registry = rpcwire.methods({"adopt": adopt})
    tag = "x" * 5_000
    got = answer(impl, registry, request("adopt", [{"kind": tag}]))
    cut = "x" * (GOT_LENGTH - 1) + "…"
    assert got == invalid(
        (["pet"], f"Input tag '{cut}' found using 'kind' does not match any of the expected tags: 'cat', 'dog'", "dict")
    )
    long_number = int("9" * 1_000)
    got = answer(impl, registry, request("adopt", [{"kind": long_number}]))
    assert "9" * GOT_LENGTH not in json.dumps(got)
    # pydantic's texts of the type itself (the expected tags, a Literal's values) are as it wrote them.
    assert answer(impl, registry, request("adopt", [{"kind": "cow"}])) == invalid(
        (["pet"], "Input tag 'cow' found using 'kind' does not match any of the expected tags: 'cat', 'dog'", "dict")
    )


def test_binding_errors_cut_the_name_as_paths_do(impl: ModuleType) -> None:
    """An unexpected argument's name: cut in ``path`` as a member's is."""

    def add(a: int, b: int) -> int:
        return a + b

    registry = rpcwire.methods({"add": add})
    long = "x" * 100_000
    cut = "x" * (GOT_LENGTH - 1) + "…"
    got = answer(impl, registry, request("add", {"a": 1, "b": 2, long: 3}))
    assert got == invalid(([cut], "no such parameter", "3"))


# --- one rule for scalars, Literal and Enum ------------------------------------------------------------------


class One(enum.Enum):
    ONE = 1


class OneInt(enum.IntEnum):
    ONE = 1


class OneFloat(enum.Enum):
    ONE = 1.0


class Half(enum.Enum):
    TWO = 2.0


class Yes(enum.Enum):
    YES = True


class Word(enum.Enum):
    ONE = "1"


class Colour(enum.Enum):
    RED = "red"


VALUES = [1, 1.0, True, "1", None]
# The declared kind, its annotations (a plain type, a Literal, Enums), and the values of VALUES each accepts.
RULE = [
    ("integer", [int, Literal[1], One, OneInt], [1]),
    ("float", [float, Literal[1.0], OneFloat], [1, 1.0]),
    ("boolean", [bool, Literal[True], Yes], [True]),
    ("string", [str, Literal["1"], Word], ["1"]),
]


@pytest.mark.parametrize(("kind", "annotations", "accepted"), RULE, ids=[row[0] for row in RULE])
def test_scalars_literals_and_enums_follow_one_rule(
    impl: ModuleType, kind: str, annotations: list[Any], accepted: list[Any]
) -> None:
    """A value of another JSON kind is refused by each (no coercion: 1.0 is not the member 1, True is not 1),
    the one widening being an integer where a float is declared (JSON has one number type)."""

    def check(value: Any) -> Any:
        return rpcwire._typed.dump(value)

    for annotation in annotations:
        check.__annotations__ = {"value": annotation}
        registry = rpcwire.methods({"check": check})
        for value in VALUES:
            got = answer(impl, registry, request("check", [value]))
            if any(type(value) is type(good) and value == good for good in accepted):
                assert got == ok(1, value), (annotation, value, got)
            else:
                assert got["error"]["code"] == INVALID, (annotation, value, got)


def test_an_integer_for_a_float_member_is_the_member(impl: ModuleType) -> None:
    def member(value: Half) -> str:
        assert value is Half.TWO
        return value.name

    def literal(value: Literal[2.0]) -> Any:
        return value

    registry = rpcwire.methods({"member": member, "literal": literal})
    assert answer(impl, registry, request("member", [2])) == ok(1, "TWO")
    assert answer(impl, registry, request("member", [2.0])) == ok(1, "TWO")
    assert answer(impl, registry, request("literal", [2])) == ok(1, 2)  # as given, as for float
    assert answer(impl, registry, request("member", [True])) == invalid((["value"], "Half (2.0)", "True"))


def test_a_literal_of_enum_members_takes_their_values(impl: ModuleType) -> None:
    def paint(colour: Literal[Colour.RED]) -> str:
        assert colour is Colour.RED
        return colour.name

    registry = rpcwire.methods({"paint": paint})
    assert answer(impl, registry, request("paint", ["red"])) == ok(1, "RED")
    assert answer(impl, registry, request("paint", ["blue"])) == invalid((["colour"], "'red'", "'blue'"))


class Links(pydantic.BaseModel):
    next: Links | None = None


def test_a_model_nested_past_pydantics_json_depth_is_refused_plainly(impl: ModuleType) -> None:
    """A pydantic-checked value is read from its JSON text (strict mode): nested past pydantic's parser's depth,
    it is one error, the value's type as ``got`` (not the text written for pydantic)."""

    def walk(chain: Links) -> int:
        depth = 0
        while chain.next is not None:
            chain, depth = chain.next, depth + 1
        return depth

    registry = rpcwire.methods({"walk": walk})
    assert answer(impl, registry, request("walk", [nested("next", 100, None)]), max_depth=512) == ok(1, 99)
    got = answer(impl, registry, request("walk", [nested("next", 400, None)]), max_depth=512)
    assert got == invalid(
        (["chain"], "a value nested less deeply (pydantic reads JSON up to its own depth limit)", "dict")
    )


class Note(pydantic.BaseModel):
    text: str
    count: int = 0


def test_a_lone_surrogate_in_a_model_is_checked_as_python(impl: ModuleType) -> None:
    """A string holding a lone surrogate (``"\\ud800"``, which JSON allows and pydantic's parser refuses) in a
    pydantic-checked value: checked as a Python value, strict too, not refused as unreadable."""

    def keep(note: Note) -> list[Any]:
        return [len(note.text), note.count]

    registry = rpcwire.methods({"keep": keep})
    message = b'{"jsonrpc":"2.0","id":1,"method":"keep","params":[{"text":"a\\ud800b","count":2}]}'
    assert answer(impl, registry, message) == ok(1, [3, 2])
    message = b'{"jsonrpc":"2.0","id":1,"method":"keep","params":[{"text":"a\\ud800b","count":"2"}]}'
    assert answer(impl, registry, message) == invalid((["note", "count"], "a valid integer", "'2'"))

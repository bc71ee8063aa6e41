"""``methods()`` with annotated functions (``rpcwire._typed``): arguments checked before the call (-32602 with
the errors in ``data``) and converted, results converted for the encoder; through ``dispatch`` and ``serve`` of
both cores."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import enum
import importlib.util
import json
import logging
import subprocess
import sys
import textwrap
import traceback
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Annotated, Any, Literal, NewType, Optional, Union

import pydantic
import pydantic_core
import pytest
import rpcwire
from rpcwire._typed import GOT_LENGTH, MAX_ERRORS
from support.messages import answers, err, ok, request
from support.processes import QUIET_STDERR, child_env
from support.serving import served, transport_for

if sys.version_info >= (3, 11):
    from typing import NotRequired, Required, TypedDict
else:  # 3.10's typing has neither qualifier: typing_extensions' (pydantic's dependency), which users there have
    from typing_extensions import NotRequired, Required, TypedDict

INVALID = rpcwire.ERR_INVALID_PARAMS


def answer(impl: ModuleType, handler: Any, message: bytes) -> Any:
    body = impl.dispatch(message, handler)
    return None if body is None else json.loads(body)


def invalid(*errors: tuple[list[Any], str, str]) -> dict[str, Any]:
    """The -32602 answer (id 1) whose data lists ``errors`` as (path, expected, got)."""
    return err(1, INVALID, "Invalid params", [{"path": p, "expected": e, "got": g} for p, e, g in errors])


@dataclasses.dataclass
class Point:
    x: float
    y: float = 0.0


@dataclasses.dataclass
class Shape:
    name: str
    points: list[Point]
    parent: Shape | None = None


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Movie(TypedDict):
    title: str
    year: NotRequired[int]


class Partial(TypedDict, total=False):
    id: Required[int]
    tags: list[str]


UserId = NewType("UserId", int)


class User(pydantic.BaseModel):
    name: str
    age: int = pydantic.Field(gt=0)


def identity_of(annotation: Any) -> Any:
    """A registry of one function, ``check(value: annotation)``, answering what it received (its repr and the
    value for the encoder)."""

    def check(value: Any) -> Any:
        return [type(value).__name__, rpcwire._typed.dump(value)]

    check.__annotations__ = {"value": annotation}
    return rpcwire.methods({"check": check})


# (annotation, accepted value, what the function receives: its type's name and its value as JSON)
ACCEPTED = [
    (int, 3, ["int", 3]),
    (float, 2.5, ["float", 2.5]),
    (float, 2, ["float", 2.0]),  # an int for a float: that float, as pydantic gives it
    (list[float], [1, 2.5], ["list", [1.0, 2.5]]),
    (str, "s", ["str", "s"]),
    (bool, False, ["bool", False]),
    (None, None, ["NoneType", None]),
    (Any, {"a": [1]}, ["dict", {"a": [1]}]),
    (list[int], [1, 2], ["list", [1, 2]]),
    (Sequence[str], ["a"], ["list", ["a"]]),
    (list, [1, "a"], ["list", [1, "a"]]),
    (tuple[int, str], [1, "a"], ["tuple", [1, "a"]]),
    (tuple[float, ...], [1, 2.5], ["tuple", [1, 2.5]]),
    (set[int], [1, 1, 2], ["set", [1, 2]]),
    (dict[str, int], {"a": 1}, ["dict", {"a": 1}]),
    (Optional[int], None, ["NoneType", None]),  # noqa: UP045 (the typing spelling is the case here)
    (int | None, 4, ["int", 4]),
    (Union[int, str], "x", ["str", "x"]),  # noqa: UP007
    (Literal["a", "b"], "b", ["str", "b"]),
    (Literal[1], 1, ["int", 1]),
    (Color, "green", ["Color", "green"]),
    (UserId, 7, ["int", 7]),
    (Annotated[int, "a note"], 5, ["int", 5]),
    (Movie, {"title": "t"}, ["dict", {"title": "t"}]),
    (Movie, {"title": "t", "year": 1999}, ["dict", {"title": "t", "year": 1999}]),
    (Partial, {"id": 1}, ["dict", {"id": 1}]),
    (Point, {"x": 1}, ["Point", {"x": 1.0, "y": 0.0}]),
    (list[Point], [{"x": 1, "y": 2}], ["list", [{"x": 1, "y": 2}]]),
]


@pytest.mark.parametrize(("annotation", "value", "received"), ACCEPTED, ids=lambda v: repr(v)[:30])
def test_builtin_kinds_accepted(impl: ModuleType, annotation: Any, value: Any, received: Any) -> None:
    registry = identity_of(annotation)
    assert answer(impl, registry, request("check", [value])) == ok(1, received)
    assert answer(impl, registry, request("check", {"value": value})) == ok(1, received)


REFUSED = [
    (int, "1", "int", "'1'"),
    (int, True, "int", "True"),  # a bool is not an int
    (int, 1.0, "int", "1.0"),
    (float, "1.5", "float", "'1.5'"),
    (float, False, "float", "False"),
    (str, 1, "str", "1"),
    (bool, 0, "bool", "0"),
    (None, 0, "None", "0"),
    (list[int], {"a": 1}, "list[int]", "dict"),
    (tuple[int, str], [1], "tuple[int, str]", "list"),
    (set[Any], [[1]], "set[Any]", "list"),  # an unhashable element
    (dict[str, int], [1], "dict[str, int]", "list"),
    (Optional[int], "x", "int", "'x'"),  # Optional[X]: X's own error  # noqa: UP045
    (Union[int, str], 1.5, "int | str", "1.5"),  # noqa: UP007
    (Literal["a", "b"], "c", "'a' | 'b'", "'c'"),
    (Literal[1], True, "1", "True"),
    (Color, "blue", "Color ('red' | 'green')", "'blue'"),
    (Color, True, "Color ('red' | 'green')", "True"),
    (Movie, "t", "Movie", "'t'"),
    (Point, [1, 2], "Point", "list"),
]


@pytest.mark.parametrize(("annotation", "value", "expected", "got"), REFUSED, ids=lambda v: repr(v)[:30])
def test_builtin_kinds_refused(impl: ModuleType, annotation: Any, value: Any, expected: str, got: str) -> None:
    registry = identity_of(annotation)
    assert answer(impl, registry, request("check", [value])) == invalid((["value"], expected, got))


def test_nested_paths_and_every_error(impl: ModuleType) -> None:
    def draw(shape: Shape, colors: dict[str, list[Color]]) -> None:
        return None

    registry = rpcwire.methods({"draw": draw})
    params = {
        "shape": {"name": 1, "points": [{"x": 1}, {"y": 2, "z": 3}], "parent": {"name": "p", "points": "no"}},
        "colors": {"a": ["red", "pink"]},
    }
    assert answer(impl, registry, request("draw", params)) == invalid(
        (["shape", "name"], "str", "1"),
        (["shape", "points", 1, "z"], "no such member", "3"),
        (["shape", "points", 1, "x"], "float", "missing"),
        (["shape", "parent", "points"], "list[Point]", "'no'"),
        (["colors", "a", 1], "Color ('red' | 'green')", "'pink'"),
    )
    good = {"shape": {"name": "s", "points": [{"x": 1}], "parent": {"name": "p", "points": []}}, "colors": {}}
    assert answer(impl, registry, request("draw", good)) == ok(1, None)


def test_typed_dict_keys(impl: ModuleType) -> None:
    registry = identity_of(Partial)
    assert answer(impl, registry, request("check", [{"tags": ["a", 2]}])) == invalid(
        (["value", "tags", 1], "str", "2"), (["value", "id"], "int", "missing")
    )
    registry = identity_of(Movie)
    assert answer(impl, registry, request("check", [{"year": 2000}])) == invalid((["value", "title"], "str", "missing"))
    # A key the TypedDict does not declare: reported, as a dataclass's unknown member is (not passed on).
    assert answer(impl, registry, request("check", [{"title": "t", "other": [1]}])) == invalid(
        (["value", "other"], "no such member", "list")
    )


def test_positional_named_defaults_and_variadics(impl: ModuleType) -> None:
    def f(a: int, b: str = "b", *rest: float, flag: bool = False, **options: int) -> list[Any]:
        return [a, b, list(rest), flag, options]

    def g(a: int = None) -> Any:  # type: ignore[assignment]  # noqa: RUF013 (a default is not checked)
        return a

    registry = rpcwire.methods({"f": f, "g": g})
    assert answer(impl, registry, request("f", [1])) == ok(1, [1, "b", [], False, {}])
    assert answer(impl, registry, request("f", [1, "x", 2, 3.5])) == ok(1, [1, "x", [2, 3.5], False, {}])
    assert answer(impl, registry, request("f", {"a": 1, "flag": True, "n": 2})) == ok(1, [1, "b", [], True, {"n": 2}])
    assert answer(impl, registry, request("f", ["1", 2, 3, "x"])) == invalid(
        (["a"], "int", "'1'"), (["b"], "str", "2"), (["rest", 1], "float", "'x'")
    )
    assert answer(impl, registry, request("f", {"a": 1, "flag": 1, "n": "2"})) == invalid(
        (["flag"], "bool", "1"), (["n"], "int", "'2'")
    )
    assert answer(impl, registry, request("g")) == ok(1, None)
    assert answer(impl, registry, request("g", ["x"])) == invalid((["a"], "int", "'x'"))


def test_params_that_do_not_fit_are_errors_of_the_list(impl: ModuleType) -> None:
    """Missing, unknown or extra arguments: errors of the same list as the types' (``path``, ``expected``,
    ``got``), listed after them in one answer."""

    def add(a: int, b: int, *, scale: float = 1.0) -> float:
        return (a + b) * scale

    registry = rpcwire.methods({"add": add})
    assert answer(impl, registry, request("add", [1])) == invalid((["b"], "int", "missing"))
    assert answer(impl, registry, request("add", {"a": 1, "b": 2, "c": 2})) == invalid(
        (["c"], "no such parameter", "2")
    )
    assert answer(impl, registry, request("add", [1, 2, 3, "x"])) == invalid(
        ([2], "no such parameter", "3"), ([3], "no such parameter", "'x'")
    )
    assert answer(impl, registry, request("add", {"a": "x", "c": None})) == invalid(
        (["a"], "int", "'x'"), (["c"], "no such parameter", "None"), (["b"], "int", "missing")
    )
    assert answer(impl, registry, request("add", ["x"])) == invalid((["a"], "int", "'x'"), (["b"], "int", "missing"))
    assert answer(impl, registry, request("add", {"a": 1, "b": 2, "scale": 2})) == ok(1, 6.0)


def test_a_type_error_inside_the_function_is_still_internal(impl: ModuleType) -> None:
    def fails(n: int) -> None:
        raise TypeError("inside")

    got = answer(impl, rpcwire.methods({"fails": fails}), request("fails", [1]))
    assert got == err(1, rpcwire.ERR_INTERNAL, "Internal error", {"exception": "TypeError", "detail": "inside"})


def test_got_is_bounded_and_errors_are_few(impl: ModuleType) -> None:
    registry = identity_of(list[int])
    got = answer(impl, registry, request("check", [["x" * 10_000] + ["y"] * 100]))["error"]["data"]
    assert len(got) == MAX_ERRORS
    assert got[0] == {"path": ["value", 0], "expected": "int", "got": "'" + "x" * (GOT_LENGTH - 2) + "…"}
    assert len(got[0]["got"]) == GOT_LENGTH
    assert got[-1]["path"] == ["value", MAX_ERRORS - 1]


def test_unknown_members_stop_at_the_cap(impl: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    """A dataclass given an object of 200k unknown members: exactly MAX_ERRORS errors, and the walk stops there
    (the members examined are counted through ``_got``, called once per error; no timing)."""
    calls = []
    got = rpcwire._typed._got

    def counted(value: Any) -> str:
        calls.append(value)
        return got(value)

    monkeypatch.setattr(rpcwire._typed, "_got", counted)
    registry = identity_of(Point)
    members = {f"m{index}": index for index in range(200_000)}
    data = answer(impl, registry, request("check", [{"x": 1, **members}]))["error"]["data"]
    assert len(data) == MAX_ERRORS
    assert data[0] == {"path": ["value", "m0"], "expected": "no such member", "got": "0"}
    assert data[-1]["path"] == ["value", f"m{MAX_ERRORS - 1}"]
    assert len(calls) <= MAX_ERRORS

    def many(*values: int, **options: int) -> None:
        return None

    registry = rpcwire.methods({"many": many})
    for params in (["x"] * 50_000, {f"o{index}": "x" for index in range(50_000)}):
        calls.clear()
        data = answer(impl, registry, request("many", params))["error"]["data"]
        assert len(data) == MAX_ERRORS
        assert len(calls) <= MAX_ERRORS


def test_path_segments_are_bounded(impl: ModuleType) -> None:
    """A key, an unknown member's name, a ``**kwargs`` name: cut to GOT_LENGTH in ``path`` as in ``got``."""
    long = "k" * 100_000
    cut = "k" * (GOT_LENGTH - 1) + "…"

    def many(**options: int) -> None:
        return None

    registry = identity_of(dict[str, int])
    assert answer(impl, registry, request("check", [{long: "x"}])) == invalid((["value", cut], "int", "'x'"))
    registry = identity_of(Point)
    assert answer(impl, registry, request("check", [{"x": 1, long: 2}])) == invalid(
        (["value", cut], "no such member", "2")
    )
    registry = rpcwire.methods({"many": many})
    assert answer(impl, registry, request("many", {long: "x"})) == invalid(([cut], "int", "'x'"))
    short = "k" * GOT_LENGTH  # as long as allowed: as it came
    assert answer(impl, registry, request("many", {short: "x"})) == invalid(([short], "int", "'x'"))


# --- results -----------------------------------------------------------------------------------------


def test_results_are_converted(impl: ModuleType) -> None:
    def one(x: float) -> Point:
        return Point(x, x)

    def many(n: int) -> list[Point]:
        return [Point(i) for i in range(n)]

    def anything(x: int) -> Any:  # Any, or no return annotation: a dataclass at the top
        return Point(x)

    def unannotated_return(x: int):  # type: ignore[no-untyped-def]
        return Point(x)

    def color(c: Color) -> Color:
        return c

    def pair(x: int) -> tuple[int, Color]:
        return (x, Color.RED)

    def user(u: User) -> User:
        return u

    registry = rpcwire.methods({f.__name__: f for f in (one, many, anything, unannotated_return, color, pair, user)})
    assert answer(impl, registry, request("one", [1.5])) == ok(1, {"x": 1.5, "y": 1.5})
    assert answer(impl, registry, request("many", [2])) == ok(1, [{"x": 0, "y": 0.0}, {"x": 1, "y": 0.0}])
    assert answer(impl, registry, request("anything", [2])) == ok(1, {"x": 2, "y": 0.0})
    assert answer(impl, registry, request("unannotated_return", [2])) == ok(1, {"x": 2, "y": 0.0})
    assert answer(impl, registry, request("color", ["red"])) == ok(1, "red")
    assert answer(impl, registry, request("pair", [3])) == ok(1, [3, "red"])
    assert answer(impl, registry, request("user", [{"name": "n", "age": 3}])) == ok(1, {"name": "n", "age": 3})


def test_plain_results_are_not_walked() -> None:
    """A result annotated with JSON types only goes to the encoder as the function returned it."""
    data = [{"a": [1, 2]}]

    def plain(n: int) -> list[dict[str, Any]]:
        return data

    def untyped_top(n: int) -> Any:
        return data

    registry = rpcwire.methods({"plain": plain, "untyped_top": untyped_top})
    assert registry("plain", [1]) is data
    assert registry("untyped_top", [1]) is data


class Boom(Exception):
    """What a test's function raises, for its traceback."""


def checking_frames(registry: Any, method: str, params: Any) -> list[str]:
    """The frames of the typed checking (``rpcwire/_typed*.py``) that the traceback of an exception raised in the
    function passes through, as a user reads it in a log."""
    with pytest.raises(Boom) as raised:
        registry(method, params)
    return [frame.name for frame in traceback.extract_tb(raised.tb) if Path(frame.filename).name.startswith("_typed")]


def test_unannotated_functions_are_called_as_before() -> None:
    """No annotation: the registry calls the function itself (no checking, no conversion): what it is given and
    what it returns are the objects themselves, and no frame of the checking stands between the registry and it."""

    def add(a, b):  # type: ignore[no-untyped-def]
        if a == "boom":
            raise Boom
        return a + b

    def returns_only(a, b) -> int:  # type: ignore[no-untyped-def]
        if a == "boom":
            raise Boom
        return (a, b)  # type: ignore[no-any-return]

    def annotated(a: str, b):  # type: ignore[no-untyped-def]
        if a == "boom":
            raise Boom
        return a + b

    registry = rpcwire.methods({"add": add, "returns_only": returns_only, "annotated": annotated})
    assert checking_frames(registry, "add", ["boom", 1]) == []
    assert checking_frames(registry, "returns_only", ["boom", 1]) == []  # -> int alone checks and converts nothing
    assert checking_frames(registry, "annotated", ["boom", 1]) != []  # (what a checked call shows)
    given = object()
    assert registry("returns_only", [given, given]) == (given, given)  # a tuple, as returned: not converted
    assert registry("add", ["a", "b"]) == "ab"


# --- classes of the registering scope, annotations that do not resolve --------------------------------


def test_local_classes_in_string_annotations(impl: ModuleType) -> None:
    @dataclasses.dataclass
    class Local:
        n: int

    def f(value: Local) -> Local:
        assert isinstance(value, Local)
        return Local(value.n + 1)

    registry = rpcwire.methods()
    registry.add(f)
    assert answer(impl, registry, request("f", [{"n": 1}])) == ok(1, {"n": 2})
    assert answer(impl, registry, request("f", [{"n": "1"}])) == invalid((["value", "n"], "int", "'1'"))


def test_an_annotation_that_does_not_resolve_is_unchecked(impl: ModuleType, caplog: pytest.LogCaptureFixture) -> None:
    def f(value: Nowhere, n: int) -> Any:  # type: ignore[name-defined]  # noqa: F821
        return [value, n]

    with caplog.at_level(logging.WARNING, logger="rpcwire"):
        registry = rpcwire.methods({"f": f})
    assert [record.getMessage() for record in caplog.records] == [
        "methods(): method 'f', parameter 'value': the annotation 'Nowhere' does not resolve "
        "(NameError(\"name 'Nowhere' is not defined\")); not checked"
    ]
    assert answer(impl, registry, request("f", ["anything", 1])) == ok(1, ["anything", 1])
    assert answer(impl, registry, request("f", ["anything", "1"])) == invalid((["n"], "int", "'1'"))


# --- async functions -------------------------------------------------------------------------------------


async def scale(p: Point, k: float = 1.0) -> Point:
    await asyncio.sleep(0)
    return Point(p.x * k, p.y * k)


def sync_norm(p: Point) -> float:
    assert isinstance(p, Point)
    return (p.x**2 + p.y**2) ** 0.5


def test_async_registry_checks_and_converts(impl: ModuleType) -> None:
    registry = rpcwire.methods({"scale": scale, "norm": sync_norm})
    assert registry.rpcwire_async
    data = (
        request("scale", [{"x": 1, "y": 2}, 2], id=1)
        + request("scale", [{"x": "1"}], id=2)
        + request("norm", {"p": {"x": 3, "y": 4}}, id=3)
        + request("norm", {"p": [3, 4]}, id=4)
        + request("scale", [], id=5)
    )
    transport, out = transport_for(impl, data)
    impl.serve(registry, transport)
    got = sorted(answers(out.getvalue()), key=lambda answer: answer["id"])
    assert got == [
        ok(1, {"x": 2, "y": 4}),
        err(2, INVALID, "Invalid params", [{"path": ["p", "x"], "expected": "float", "got": "'1'"}]),
        ok(3, 5.0),
        err(4, INVALID, "Invalid params", [{"path": ["p"], "expected": "Point", "got": "list"}]),
        err(5, INVALID, "Invalid params", [{"path": ["p"], "expected": "Point", "got": "missing"}]),
    ]


# --- pydantic ----------------------------------------------------------------------------------------------


def positive(n: Annotated[int, pydantic.Field(gt=0)], small: pydantic.conint(lt=5) = 1) -> int:  # type: ignore[valid-type]
    return n + small


def birthday(user: User, when: list[User] | None = None) -> User:
    assert isinstance(user, User)
    return User(name=user.name, age=user.age + 1)


def test_pydantic_through_serve(impl: ModuleType) -> None:
    registry = rpcwire.methods({"positive": positive, "birthday": birthday})
    data = (
        request("positive", [1, 2], id=1)
        + request("positive", [0, 9], id=2)
        + request("birthday", {"user": {"name": "a", "age": 1}}, id=3)
        + request("birthday", [{"age": "x" * 1000}, [{"name": "b", "age": -1}]], id=4)
        + request("positive", {"n": "3"}, id=5)  # strict, as the built-in checker: "3" is no int
        + request("birthday", {"user": {"name": "a", "age": "3"}}, id=6)  # nor inside a model
    )
    got = answers(served(impl, data, registry))
    assert got == [
        ok(1, 3),
        err(
            2,
            INVALID,
            "Invalid params",
            [
                {"path": ["n"], "expected": "greater than 0", "got": "0"},
                {"path": ["small"], "expected": "less than 5", "got": "9"},
            ],
        ),
        ok(3, {"name": "a", "age": 2}),
        err(
            4,
            INVALID,
            "Invalid params",
            [
                {"path": ["user", "name"], "expected": "a value", "got": "missing"},
                {
                    "path": ["user", "age"],
                    "expected": "a valid integer",
                    "got": "'" + "x" * (GOT_LENGTH - 2) + "…",
                },
                {"path": ["when", 0, "age"], "expected": "greater than 0", "got": "-1"},
            ],
        ),
        err(5, INVALID, "Invalid params", [{"path": ["n"], "expected": "a valid integer", "got": "'3'"}]),
        err(6, INVALID, "Invalid params", [{"path": ["user", "age"], "expected": "a valid integer", "got": "'3'"}]),
    ]


class Bag(pydantic.BaseModel, extra="forbid"):
    counts: dict[str, int] = {}


def test_pydantic_locations_are_bounded(impl: ModuleType) -> None:
    long = "k" * 100_000
    cut = "k" * (GOT_LENGTH - 1) + "…"
    registry = identity_of(Bag)
    assert answer(impl, registry, request("check", [{"counts": {long: "x"}}])) == invalid(
        (["value", "counts", cut], "a valid integer", "'x'")
    )
    assert answer(impl, registry, request("check", [{long: 1}])) == invalid((["value", cut], "no such member", "1"))


def _known_user(name: str) -> str:
    if name not in ("root", "svc-backup"):
        raise ValueError(f"{name!r} not in ['root', 'svc-backup']")
    return name


def _asserted(n: int) -> int:
    assert n != 13, "secret assertion"
    return n


def _custom(n: int) -> int:
    if n == 7:
        raise pydantic_core.PydanticCustomError("not_seven", "secret custom {n}", {"n": n})
    return n


def test_validators_messages_are_not_sent(impl: ModuleType, caplog: pytest.LogCaptureFixture) -> None:
    """A custom validator's message (user code's exception text) is replaced by "a valid value" and logged;
    pydantic's own constraint messages are sent."""

    def login(
        user: Annotated[str, pydantic.AfterValidator(_known_user)],
        n: Annotated[int, pydantic.AfterValidator(_asserted)] = 0,
        m: Annotated[int, pydantic.AfterValidator(_custom)] = 0,
        k: Annotated[int, pydantic.Field(gt=0)] = 1,
    ) -> None:
        return None

    registry = rpcwire.methods({"login": login})
    with caplog.at_level(logging.DEBUG, logger="rpcwire"):
        got = answer(impl, registry, request("login", {"user": "x", "n": 13, "m": 7, "k": 0}))
    assert got == invalid(
        (["user"], "a valid value", "'x'"),
        (["n"], "a valid value", "13"),
        (["m"], "a valid value", "7"),
        (["k"], "greater than 0", "0"),
    )
    assert "root" not in json.dumps(got) and "secret" not in json.dumps(got)
    logged = "\n".join(record.getMessage() for record in caplog.records if record.name == "rpcwire")
    assert "'x' not in ['root', 'svc-backup']" in logged
    assert "secret assertion" in logged
    assert "secret custom 7" in logged


PYDANTIC_MISSING = textwrap.dedent(
    """
    import sys
    sys.modules["pydantic"] = None  # import pydantic raises ImportError
    import datetime
    from typing import Annotated, Any
    import annotated_types
    import rpcwire

    def when(day: datetime.date, n: Annotated[int, annotated_types.Gt(0)]) -> Any:
        return [str(day), n]

    rpcwire.serve(rpcwire.methods({"when": when}), rpcwire.StdioTransport())
    """
)


def test_without_pydantic_such_types_are_unchecked() -> None:
    """A real server on pipes whose ``import pydantic`` fails: a warning on registering, the base type of
    ``Annotated`` still checked, the rest passed as given."""
    data = request("when", ["2026-12-04", 0], id=1) + request("when", ["not a date", "0"], id=2)
    child = subprocess.run(
        [sys.executable, "-c", PYDANTIC_MISSING],
        input=data,
        capture_output=True,
        timeout=60,
        env=child_env(),
        check=False,
    )
    assert child.returncode == 0, child.stderr.decode(errors="replace")
    assert answers(child.stdout) == [
        ok(1, ["2026-12-04", 0]),
        err(2, INVALID, "Invalid params", [{"path": ["n"], "expected": "int", "got": "'0'"}]),
    ]
    stderr = child.stderr.decode()
    assert [line for line in stderr.splitlines() if line not in QUIET_STDERR.splitlines()] == [
        "methods(): method 'when', parameter 'day': date: not checked (pydantic is not installed)",
        "methods(): method 'when', parameter 'n': the constraints of int: not checked (pydantic is not installed)",
    ]


def test_scalar_parameters(impl: ModuleType) -> None:
    """Parameters that are all scalars: values of exactly their types pass at once, any other goes through the
    full check (an int for a float is accepted there)."""

    def f(a: int, b: float, c: str, d: bool, e: None) -> list:  # type: ignore[type-arg]
        return [a, b, c, d, e]

    registry = rpcwire.methods({"f": f})
    assert answer(impl, registry, request("f", [1, 2.5, "c", True, None])) == ok(1, [1, 2.5, "c", True, None])
    assert answer(impl, registry, request("f", [1, 2, "c", False, None])) == ok(1, [1, 2, "c", False, None])
    named = {"e": None, "d": True, "c": "c", "b": 2.5, "a": 1}  # another order than the parameters'
    assert answer(impl, registry, request("f", named)) == ok(1, [1, 2.5, "c", True, None])
    assert answer(impl, registry, request("f", [True, 2.5, "c", 1, 0])) == invalid(
        (["a"], "int", "True"), (["d"], "bool", "1"), (["e"], "None", "0")
    )
    assert answer(impl, registry, request("f", {"a": 1.5, "b": "2", "c": "c", "d": True, "e": None})) == invalid(
        (["a"], "int", "1.5"), (["b"], "float", "'2'")
    )


# --- an int for a float ------------------------------------------------------------------------------------


@dataclasses.dataclass
class Reading:
    value: float
    unit: Literal[1.0, 1000.0] = 1.0


def test_a_float_parameter_receives_a_float(impl: ModuleType) -> None:
    """An int sent where a float is declared: the function receives the float (as pydantic gives it), at the top,
    in a list, a dataclass's field and a Literal of floats; a bool is no number, an int past 1.8e308 no float."""

    def kinds(a: float, more: list[float], reading: Reading, scale: Literal[2.0] = 2.0) -> list[Any]:
        return [type(a).__name__, a, [type(x).__name__ for x in more], type(reading.value).__name__]

    def unit(reading: Reading) -> str:
        return type(reading.unit).__name__

    registry = rpcwire.methods({"kinds": kinds, "unit": unit})
    got = answer(impl, registry, request("kinds", [1, [2, 2.5], {"value": 3}, 2]))
    assert got == ok(1, ["float", 1.0, ["float", "float"], "float"])
    assert answer(impl, registry, request("kinds", {"a": 1, "more": [], "reading": {"value": 1}})) == ok(
        1, ["float", 1.0, [], "float"]
    )
    assert answer(impl, registry, request("unit", [{"value": 1, "unit": 1000}])) == ok(1, "float")
    huge = 10**400
    assert answer(impl, registry, request("kinds", [True, [huge], {"value": False}])) == invalid(
        (["a"], "float", "True"),
        (["more", 0], "float (a number of at most 1.8e308)", repr(huge)[: GOT_LENGTH - 1] + "…"),
        (["reading", "value"], "float", "False"),
    )


def test_a_float_through_serve(impl: ModuleType) -> None:
    def half(x: float) -> list[Any]:
        return [type(x).__name__, x / 2]

    data = request("half", [3], id=1) + request("half", {"x": 10**400}, id=2)
    assert answers(served(impl, data, rpcwire.methods({"half": half}))) == [
        ok(1, ["float", 1.5]),
        err(
            2,
            INVALID,
            "Invalid params",
            [
                {
                    "path": ["x"],
                    "expected": "float (a number of at most 1.8e308)",
                    "got": repr(10**400)[: GOT_LENGTH - 1] + "…",
                }
            ],
        ),
    ]


# --- params that do not fit the function ---------------------------------------------------------------------


def test_params_that_do_not_fit_an_unannotated_function(impl: ModuleType) -> None:
    """The same list for a function without annotations (``expected`` "a value"), positional-only parameters
    named, and a long list of extra arguments cut at MAX_ERRORS."""

    def pair(a, b, /, *, c=0):  # type: ignore[no-untyped-def]
        return [a, b, c]

    registry = rpcwire.methods({"pair": pair})
    assert answer(impl, registry, request("pair", [1, 2])) == ok(1, [1, 2, 0])
    assert answer(impl, registry, request("pair", [1])) == invalid((["b"], "a value", "missing"))
    assert answer(impl, registry, request("pair", {"a": 1, "c": 2, "d": [3]})) == invalid(
        (["a"], "given by position", "1"), (["d"], "no such parameter", "list"), (["b"], "a value", "missing")
    )
    data = answer(impl, registry, request("pair", list(range(50_000))))["error"]["data"]
    assert data == [{"path": [index], "expected": "no such parameter", "got": str(index)} for index in range(2, 22)]
    assert len(data) == MAX_ERRORS


def test_params_that_do_not_fit_through_serve(impl: ModuleType) -> None:
    """Served, sync and async registries alike: the list of errors."""

    def add(a: int, b: int) -> int:
        return a + b

    async def later(a: int, b: int) -> int:
        return a + b

    missing = [{"path": ["b"], "expected": "int", "got": "missing"}]
    unknown = [{"path": ["z"], "expected": "no such parameter", "got": "0"}]
    for registry in (rpcwire.methods({"f": add}), rpcwire.methods({"f": later})):
        data = request("f", [1], id=1) + request("f", {"a": 1, "b": 2, "z": 0}, id=2) + request("f", [1, 2], id=3)
        got = sorted(answers(served(impl, data, registry)), key=lambda answer: answer["id"])
        assert got == [err(1, INVALID, "Invalid params", missing), err(2, INVALID, "Invalid params", unknown), ok(3, 3)]


# --- constraints of Annotated dicts ------------------------------------------------------------------------------


CONSTRAINED = [
    (Annotated[int, {"minimum": 1}], 1, 0, "greater than or equal to 1", "0"),
    (Annotated[float, {"maximum": 2.5}], 2, 3, "less than or equal to 2.5", "3"),
    (Annotated[int, {"exclusiveMinimum": 0}], 1, 0, "greater than 0", "0"),
    (Annotated[int, {"exclusiveMaximum": 10}], 9, 10, "less than 10", "10"),
    (Annotated[float, {"multipleOf": 0.5}], 1.5, 1.2, "a multiple of 0.5", "1.2"),
    (Annotated[int, {"multipleOf": 3}], 9, 10, "a multiple of 3", "10"),
    (Annotated[str, {"minLength": 2}], "ab", "a", "a string of at least 2 characters", "'a'"),
    (Annotated[str, {"maxLength": 1}], "a", "ab", "a string of at most 1 character", "'ab'"),
    (Annotated[str, {"pattern": "^[a-z]+$"}], "abc", "aBc", "a string matching '^[a-z]+$'", "'aBc'"),
    (Annotated[list[int], {"minItems": 1}], [1], [], "an array of at least 1 item", "list"),
    (
        Annotated[list[Point], {"maxItems": 1}],
        [{"x": 1.0, "y": 0.0}],
        [{"x": 1}, {"x": 2}],
        "an array of at most 1 item",
        "list",
    ),
    (Annotated[dict[str, int], {"minProperties": 1}], {"a": 1}, {}, "an object of at least 1 member", "dict"),
    (Annotated[dict[str, int], {"maxProperties": 0}], {}, {"a": 1}, "an object of at most 0 members", "dict"),
    (Annotated[str, {"enum": ["a", "b"]}], "b", "c", "'a' | 'b'", "'c'"),
    (Annotated[Any, {"const": 1}], 1, True, "1", "True"),
    (Annotated[int, {"minimum": 1}, {"maximum": 3}], 3, 4, "less than or equal to 3", "4"),
    (Annotated[int, pydantic.Field(lt=10), {"minimum": 1}], 5, 0, "greater than or equal to 1", "0"),
]


@pytest.mark.parametrize(("annotation", "good", "bad", "expected", "got"), CONSTRAINED, ids=lambda v: repr(v)[:40])
def test_annotated_constraints_are_enforced(  # noqa: PLR0917 (the parametrized case)
    impl: ModuleType, annotation: Any, good: Any, bad: Any, expected: str, got: str
) -> None:
    """What ``Annotated[T, {...}]`` advertises in the schemas is checked: at the top and as a dataclass's field."""
    registry = identity_of(annotation)
    assert answer(impl, registry, request("check", [good]))["result"][1] == good
    assert answer(impl, registry, request("check", [bad])) == invalid((["value"], expected, got))

    registry = identity_of(dataclasses.make_dataclass("Holder", [("field", annotation)]))
    assert answer(impl, registry, request("check", [{"field": bad}])) == invalid((["value", "field"], expected, got))


def test_a_keyword_applies_to_its_json_type_and_every_broken_one_is_listed(impl: ModuleType) -> None:
    registry = identity_of(Annotated[Union[int, str], {"minimum": 5, "maxLength": 2}])  # noqa: UP007
    assert answer(impl, registry, request("check", ["abc"])) == invalid(
        (["value"], "a string of at most 2 characters", "'abc'")
    )
    assert answer(impl, registry, request("check", [7]))["result"] == ["int", 7]  # maxLength: strings only
    assert answer(impl, registry, request("check", [1.5])) == invalid((["value"], "int | str", "1.5"))  # type first
    registry = identity_of(Annotated[str, {"minLength": 3, "pattern": "^x"}])
    assert answer(impl, registry, request("check", ["ab"])) == invalid(
        (["value"], "a string of at least 3 characters", "'ab'"), (["value"], "a string matching '^x'", "'ab'")
    )


def test_keywords_not_enforced_are_warned_about(caplog: pytest.LogCaptureFixture) -> None:
    def f(n: Annotated[int, {"type": "string", "minimum": 1, "exclusiveMinimum": True, "title": "N"}]) -> int:
        return n

    with caplog.at_level(logging.WARNING, logger="rpcwire"):
        registry = rpcwire.methods({"f": f})
    assert [record.getMessage() for record in caplog.records] == [
        "methods(): method 'f', parameter 'n': int's 'type', 'exclusiveMinimum' (True: not a number): not checked, "
        "nor advertised in its schemas"
    ]
    assert registry.mcp_tools()[0]["inputSchema"]["properties"] == {
        "n": {"type": "integer", "minimum": 1, "title": "N"}
    }
    assert answer(rpcwire, registry, request("f", [0]))["error"]["data"] == [
        {"path": ["n"], "expected": "greater than or equal to 1", "got": "0"}
    ]


def test_the_tool_server_enforces_what_it_advertises(impl: ModuleType) -> None:
    """examples/tool_server.py: ``slow_count``'s ``n`` advertises ``minimum: 1``; a call below it, or with a
    string, is -32602 with the errors; ``add`` receives floats."""
    path = Path(__file__).parents[2] / "examples" / "tool_server.py"
    spec = importlib.util.spec_from_file_location("tool_server_example", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    tools = {tool["name"]: tool for tool in module.TOOLS.mcp_tools()}
    assert tools["slow_count"]["inputSchema"]["properties"]["n"]["minimum"] == 1

    def call(name: str, arguments: Any) -> Any:
        return answer(impl, module.handler, request("tools/call", {"name": name, "arguments": arguments}))

    assert call("slow_count", {"n": 0}) == invalid((["n"], "greater than or equal to 1", "0"))
    assert call("slow_count", {"n": "3"}) == invalid((["n"], "int", "'3'"))
    assert call("slow_count", {"m": 1}) == invalid((["m"], "no such parameter", "1"))
    assert call("add", {"a": 2, "b": 3})["result"]["structuredContent"] == {"result": 5.0}


# --- one strictness, at the top and inside models ------------------------------------------------------------


class Event(pydantic.BaseModel):
    at: datetime.datetime
    count: int
    weights: dict[int, float] = {}


def test_pydantic_types_follow_the_same_strictness(impl: ModuleType) -> None:
    """A model's fields are checked as the built-in checker checks the top: no coercion ("3" is no int, 1 no
    bool), what JSON spells as a string read as pydantic's JSON mode reads it (a datetime, an int key)."""

    def log(event: Event, flag: bool, at: datetime.datetime) -> list[Any]:
        return [event.at.year, event.count, event.weights, at.year]

    registry = rpcwire.methods({"log": log})
    good = {"at": "2026-12-06T05:00:00Z", "count": 3, "weights": {"1": 2}}
    assert answer(impl, registry, request("log", [good, True, "2020-01-01T00:00:00"])) == ok(
        1, [2026, 3, {"1": 2.0}, 2020]
    )
    bad = {"at": "2026-12-06T05:00:00Z", "count": "3"}
    assert answer(impl, registry, request("log", [bad, 1, "2020-01-01T00:00:00"])) == invalid(
        (["event", "count"], "a valid integer", "'3'"), (["flag"], "bool", "1")
    )

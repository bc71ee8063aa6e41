"""``methods()`` with annotated functions (``rpcwire._typed``): arguments checked before the call (-32602 with
the errors in ``data``) and converted, results converted for the encoder; through ``dispatch`` and ``serve`` of
both cores."""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import json
import logging
import subprocess
import sys
import textwrap
from collections.abc import Sequence
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
    (float, 2, ["int", 2]),  # an int for a float: passed as given
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
    (Movie, {"title": "t", "year": 1999, "other": [1]}, ["dict", {"title": "t", "year": 1999, "other": [1]}]),
    (Partial, {"id": 1}, ["dict", {"id": 1}]),
    (Point, {"x": 1}, ["Point", {"x": 1, "y": 0.0}]),
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


def test_binding_errors_are_as_before(impl: ModuleType) -> None:
    """Missing or extra arguments: the binding's reason as ``data`` (a string), as for an unannotated function;
    the types are checked first."""

    def add(a: int, b: int) -> int:
        return a + b

    registry = rpcwire.methods({"add": add})
    expected = err(1, INVALID, "Invalid params", "missing a required argument: 'b'")
    assert answer(impl, registry, request("add", [1])) == expected
    assert answer(impl, registry, request("add", {"a": 1, "b": 2, "c": 2}))["error"]["data"] == (
        "got an unexpected keyword argument 'c'"
    )
    assert answer(impl, registry, request("add", [1, 2, 3]))["error"]["data"] == "too many positional arguments"
    assert answer(impl, registry, request("add", ["x"])) == invalid((["a"], "int", "'x'"))


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


def test_unannotated_functions_are_called_as_before() -> None:
    """No annotation: the registry calls the function itself (no checking, no conversion)."""

    def add(a, b):  # type: ignore[no-untyped-def]
        return a + b

    def returns_only(a, b) -> int:  # type: ignore[no-untyped-def]
        return a + b

    registry = rpcwire.methods({"add": add, "returns_only": returns_only})
    assert registry._typed["add"] is None and registry._calls["add"] is add
    assert registry._calls["returns_only"] is returns_only  # -> int alone checks and converts nothing
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
        err(5, INVALID, "Invalid params", "missing a required argument: 'p'"),
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
        + request("positive", {"n": "3"}, id=5)  # pydantic's lax mode: "3" is 3
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
                    "expected": "a valid integer, unable to parse string as an integer",
                    "got": "'" + "x" * (GOT_LENGTH - 2) + "…",
                },
                {"path": ["when", 0, "age"], "expected": "greater than 0", "got": "-1"},
            ],
        ),
        ok(5, 4),
    ]


class Bag(pydantic.BaseModel, extra="forbid"):
    counts: dict[str, int] = {}


def test_pydantic_locations_are_bounded(impl: ModuleType) -> None:
    long = "k" * 100_000
    cut = "k" * (GOT_LENGTH - 1) + "…"
    registry = identity_of(Bag)
    assert answer(impl, registry, request("check", [{"counts": {long: "x"}}])) == invalid(
        (["value", "counts", cut], "a valid integer, unable to parse string as an integer", "'x'")
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

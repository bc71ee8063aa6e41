"""Typed handlers' walks, and what a refusal holds: the base of the ``_typed_*`` modules.

``methods()`` checks a function's arguments against its parameters' annotations (see
``rpcwire._typed_function`` for what a call does, ``rpcwire._typed_compile`` for what each annotation accepts).
An annotation compiles to a node (see "the walk" below); a value decoded from JSON is walked under it and comes
out as the value the function receives (the same object, or a converted one: a dataclass instance, a tuple, an
enum member, a pydantic model), or as an :class:`Invalid` with its errors. A result is converted for the
encoder by :func:`dump`, walked the same way.

Neither walk recurses on the interpreter's stack (a list of generators is the checking's stack, ``_run``; a list
of frames is ``dump``'s): input as deep as the transport accepts (``max_depth`` up to 512) is checked, and a
result converted, on any thread. The checking's work is bounded by the input's size times the annotation's: a
union's outcome for a value is kept for the walk, so that alternatives sharing a member's type do not each walk
that member again.

A refusal is a list (at most :data:`MAX_ERRORS`) of ``{"path": [...], "expected": "...", "got": "..."}``:
``path`` starts with the parameter's name (then list indexes and member names, each name or key cut to
:data:`GOT_LENGTH` characters), ``expected`` describes the type (:func:`describe`), ``got`` is ``"missing"``, a
short ``repr`` of a scalar (at most :data:`GOT_LENGTH` characters) or the type's name of anything else
(``"list"``, ``"dict"``): never the input echoed back whole. The checking stops once :data:`MAX_ERRORS` errors
are found.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Callable, Generator, Iterable
from typing import Any, Union

__all__ = [
    "GOT_LENGTH",
    "MAX_ERRORS",
    "PLAIN",
    "Checker",
    "Constrained",
    "DictOf",
    "Error",
    "Invalid",
    "ListOf",
    "Node",
    "ObjectOf",
    "TupleOf",
    "UnionOf",
    "Walked",
    "below",
    "constrained_leaf",
    "cut",
    "describe",
    "dump",
    "entry",
    "got",
    "path_segments",
    "refuse",
    "segment",
    "under",
]

MAX_ERRORS = 20
"""At most this many errors in an answer's ``data`` (and containers stop looking once they hold as many)."""

GOT_LENGTH = 40
"""A scalar's ``repr`` in ``got`` is cut to this many characters (then ``…``)."""

Checker = Callable[[Any], Any]
"""A leaf's check: the value the function receives, or :class:`Invalid` raised."""

PLAIN = frozenset({dict, list, str, int, float, bool, type(None)})
"""The types the encoder takes as they are."""

# An error is (path, expected, got); ``path`` is a chain of pairs (segment, the rest of the path) ending in ``()``,
# its outermost segment first. The errors found below a value are never changed by the levels above: each level
# puts its segment in front in one step (a deep error is not copied once per level), and an outcome a union keeps
# (``_run``) can be handed out again. ``under`` turns them into ``data``'s dicts, once, at the top.
Error = tuple[Any, str, str]


class Invalid(Exception):
    """A refusal: its errors' paths are relative to the value refused. A leaf checker raises it; a walk returns
    it as a value's outcome."""

    def __init__(self, errors: list[Error]) -> None:
        super().__init__()
        self.errors = errors


def cut(text: str) -> str:
    """``text`` as the errors send what came from the input: at most :data:`GOT_LENGTH` characters (then ``…``)."""
    return text if len(text) <= GOT_LENGTH else text[: GOT_LENGTH - 1] + "…"


def _got(value: Any) -> str:
    """What ``got`` says of ``value`` (see :func:`got`)."""
    if value is None or type(value) in (bool, int, float, str):
        return cut(repr(value))
    return type(value).__name__


def got(value: Any) -> str:
    """What ``got`` says of ``value``: a scalar's short ``repr``, else its type's name. Every module of the
    checking asks here, and this asks ``_got`` (the one place it is made: tests count its calls)."""
    return _got(value)


def segment(key: Any) -> Any:
    """A path's segment: a name or a key (from the input: cut as ``got`` is), or an index."""
    return cut(key) if type(key) is str else key


def refuse(expected: str, value: Any) -> Invalid:
    return Invalid([((), expected, _got(value))])


def below(key: Any, exc: Invalid, errors: list[Error]) -> None:
    """``exc``'s errors, found under ``key`` (an index, a member's name or a key), added to ``errors``."""
    first = segment(key)
    errors.extend(((first, path), expected, said) for path, expected, said in exc.errors)


def path_segments(path: Any) -> list[Any]:
    """An error's ``path`` (a chain of pairs) as the list ``data`` sends, its outermost segment first."""
    out = []
    while path:
        part, path = path
        out.append(part)
    return out


def under(segments: tuple[Any, ...], exc: Invalid, errors: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """``exc``'s errors as ``data`` lists them, under ``segments`` (a parameter's name, an index among
    ``*args``), added to ``errors``."""
    prefix = list(map(segment, segments))
    found = [
        {"path": prefix + path_segments(path), "expected": expected, "got": said} for path, expected, said in exc.errors
    ]
    if errors is None:
        return found
    errors.extend(found)
    return errors


def describe(tp: Any) -> str:
    """A short text for an annotation (``int``, ``list[Point]``, ``str | None``, ``'a' | 'b'``)."""
    if tp is None or tp is type(None):
        return "None"
    if tp is Any:
        return "Any"
    if tp is Ellipsis:
        return "..."
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Union or origin is types.UnionType:
        return " | ".join(describe(arg) for arg in args)
    if origin is typing.Literal:  # an Enum member by its value: what is sent for it
        return " | ".join(repr(arg.value if isinstance(arg, enum.Enum) else arg) for arg in args)
    if origin is typing.Annotated:
        return describe(args[0])
    if origin is not None and args:
        return f"{getattr(origin, '__name__', repr(origin))}[{', '.join(describe(arg) for arg in args)}]"
    if isinstance(tp, type):
        return tp.__name__
    return repr(tp).replace("typing.", "")


# --- the walk ------------------------------------------------------------------------------------------------
#
# An annotation compiles to a node. A leaf (a scalar type, a Literal, an Enum, a type pydantic checks, a union or
# an Optional of leaves) is a plain function, ``checker(value)``, which returns the value the function receives or
# raises ``Invalid``; a type with members (a list, a tuple, a set, a dict, a dataclass or a TypedDict, a union of
# such types) is a ``Walked`` whose ``walk(value)`` is a generator: it checks its leaf members in place, yields
# ``(node, element)`` for each member walked in turn and is sent back that member's outcome (its value, or an
# ``Invalid``), and returns the value's own outcome. ``_run`` drives the generators with a list as its stack, so
# the walk does not recurse on the interpreter's stack however deep the input nests (worker threads' stacks are
# small), and keeps a union's outcomes (see ``_run``), so that the work is bounded by the input's size.


class Walked:
    """A compiled type with members (see above)."""

    __slots__ = ()

    def walk(self, value: Any) -> Generator[tuple[Any, Any], Any, Any]:
        raise NotImplementedError


Node = Union[Checker, Walked, None]  # noqa: UP007 (a runtime alias: X | Y of a Callable alias fails on 3.10)
"""A compiled annotation: a leaf checker, a walked type, or ``None`` (anything is accepted as it is)."""


def _walk(node: Walked, value: Any) -> Generator[tuple[Any, Any], Any, Any]:
    """The walk of one value under one node: the walk's step per (value, type) met (``_run`` calls it for each;
    tests count the calls)."""
    return node.walk(value)


def _run(walk: Generator[tuple[Any, Any], Any, Any], request: tuple[Any, Any]) -> Any:
    """The outcome of a walk that asked for its first member's outcome (``request``): the value the function
    receives, or an ``Invalid``.

    One generator per level being walked, on a list. A union's outcome for a list or a dict is kept for the rest of
    the walk, by the value's identity: alternatives that share a member's type (``A | B`` whose classes both have a
    member ``A | B | None``) ask for that member's outcome under the union again and get it without a second walk,
    where trying each alternative anew would walk the member once per way down (2**depth). So each list or dict is
    walked at most once per node of the annotation. (The same object met twice under one union, which a decoded
    request never holds, is given the same outcome both times.)
    """
    memo: dict[tuple[int, Walked], Any] = {}
    stack: list[tuple[Generator[tuple[Any, Any], Any, Any], Any]] = []
    key: Any = None
    while True:
        node, element = request
        stack.append((walk, key))
        key = None
        sent: Any = None
        if type(node) is UnionOf and isinstance(element, (list, dict)):
            key = (id(element), node)
        if key is not None and key in memo:
            sent = memo[key]
            walk, key = stack.pop()
        else:
            walk = _walk(node, element)
        while True:  # the outcomes handed back to walks that end, down the stack
            try:
                request = walk.send(sent)
                break
            except StopIteration as stop:
                sent = stop.value
                if key is not None:
                    memo[key] = sent
                if not stack:
                    return sent
                walk, key = stack.pop()


def entry(node: Node) -> Checker | None:
    """A parameter's checker: a leaf as it is, a walked type through ``_run`` (a value whose members are all
    leaves, the usual dataclass, ends in its first step: no stack)."""
    if not isinstance(node, Walked):
        return node

    def check(value: Any) -> Any:
        walk = _walk(node, value)
        try:
            request = walk.send(None)
        except StopIteration as stop:
            outcome = stop.value
        else:
            outcome = _run(walk, request)
        if type(outcome) is Invalid:
            raise outcome
        return outcome

    return check


def _member(node: Node) -> tuple[Node, bool]:
    """A member's node and whether it is walked (else called in place)."""
    return node, isinstance(node, Walked)


def _elements(
    value: Any, pairs: Iterable[tuple[Any, Any]], item: Node, walked: bool, copy: Callable[[Any], Any]
) -> Generator[tuple[Any, Any], Any, Any]:
    """A list's or a dict's elements (``pairs``: index or key, element) checked; ``copy`` of it made only when an
    element was converted."""
    out = value
    errors: list[Error] = []
    for key, element in pairs:
        if walked:
            checked = yield item, element
        else:
            try:
                checked = item(element)  # type: ignore[misc,operator]
            except Invalid as exc:
                checked = exc
        if type(checked) is Invalid:
            below(key, checked, errors)
            if len(errors) >= MAX_ERRORS:
                break  # no more are sent: the rest is not looked at
            continue
        if checked is not element:
            if out is value:
                out = copy(value)
            out[key] = checked
    return Invalid(errors) if errors else out


class ListOf(Walked):
    """``list[X]`` (``Sequence``...), ``tuple[X, ...]`` and ``set[X]``: a JSON array, each element checked, then
    ``finish`` (``tuple``, ``set``, ``frozenset``) applied when given."""

    __slots__ = ("expected", "finish", "item", "walked")

    def __init__(self, tp: Any, item: Node, finish: Callable[[Any], Any] | None = None) -> None:
        self.expected = describe(tp)
        self.item, self.walked = _member(item)
        self.finish = finish

    def walk(self, value: Any) -> Generator[tuple[Any, Any], Any, Any]:
        if not isinstance(value, list):
            return refuse(self.expected, value)
        out = value
        if self.item is not None:
            out = yield from _elements(value, enumerate(value), self.item, self.walked, list)
            if type(out) is Invalid:
                return out
        if self.finish is None:
            return out
        try:
            return self.finish(out)
        except TypeError:  # an unhashable element of a set
            return refuse(self.expected, value)


class DictOf(Walked):
    """``dict[str, X]`` (``Mapping``...): a JSON object, each value checked (``keys``: its keys are ``str``)."""

    __slots__ = ("expected", "item", "keys", "walked")

    def __init__(self, tp: Any, item: Node, *, keys: bool = True) -> None:
        self.expected = describe(tp) if keys else "dict"
        self.item, self.walked = _member(item)
        self.keys = keys

    def walk(self, value: Any) -> Generator[tuple[Any, Any], Any, Any]:
        if not isinstance(value, dict) or (self.keys and not all(type(key) is str for key in value)):
            return refuse(self.expected, value)
        if self.item is None:
            return value
        return (yield from _elements(value, value.items(), self.item, self.walked, dict))


class TupleOf(Walked):
    """``tuple[X, Y]``: an array of that length, each element checked by its own type."""

    __slots__ = ("expected", "items")

    def __init__(self, tp: Any, items: list[Node]) -> None:
        self.expected = describe(tp)
        self.items = [_member(item) for item in items]

    def walk(self, value: Any) -> Generator[tuple[Any, Any], Any, Any]:
        if not isinstance(value, (list, tuple)) or len(value) != len(self.items):
            return refuse(self.expected, value)
        out = list(value)
        errors: list[Error] = []
        for index, (item, walked) in enumerate(self.items):
            if item is None:
                continue
            element = out[index]
            if walked:
                checked = yield item, element
            else:
                try:
                    checked = item(element)  # type: ignore[operator]
                except Invalid as exc:
                    checked = exc
            if type(checked) is Invalid:
                below(index, checked, errors)
            else:
                out[index] = checked
        return Invalid(errors) if errors else tuple(out)


class ObjectOf(Walked):
    """A JSON object's members checked by name, an unknown member refused: a TypedDict (``build`` None: the dict)
    or a dataclass (``build``: its instance). Made before its members' nodes (``fill``), so that a member of the
    class's own type refers to it."""

    __slots__ = ("build", "expected", "fields", "required")

    def __init__(self, tp: type, build: type | None) -> None:
        self.expected = describe(tp)
        self.build = build
        self.fields: dict[str, tuple[Node, bool]] = {}
        self.required: list[tuple[str, str]] = []

    def fill(self, fields: dict[str, Node], required: list[tuple[str, str]]) -> None:
        self.fields = {key: _member(node) for key, node in fields.items()}
        self.required = required

    def walk(self, value: Any) -> Generator[tuple[Any, Any], Any, Any]:
        build = self.build
        if build is not None and isinstance(value, build):
            return value
        if not isinstance(value, dict):
            return refuse(self.expected, value)
        fields = self.fields
        out = value if build is None else {}
        errors: list[Error] = []
        for key, element in value.items():
            field = fields.get(key) if type(key) is str else None
            if field is None:  # a member the class does not declare: refused, for a TypedDict too
                errors.append(((segment(key), ()), "no such member", _got(element)))
                if len(errors) >= MAX_ERRORS:
                    break  # no more are sent: the rest is not looked at
                continue
            node, walked = field
            checked = element
            if walked:
                checked = yield node, element
            elif node is not None:
                try:
                    checked = node(element)  # type: ignore[operator]
                except Invalid as exc:
                    checked = exc
            if type(checked) is Invalid:
                below(key, checked, errors)
                if len(errors) >= MAX_ERRORS:
                    break
                continue
            if build is not None:
                out[key] = checked
            elif checked is not element:
                if out is value:
                    out = dict(value)
                out[key] = checked
        for key, description in self.required:
            if len(errors) >= MAX_ERRORS:
                break
            if key not in value:
                errors.append(((segment(key), ()), description, "missing"))
        if errors:
            return Invalid(errors[:MAX_ERRORS])
        return out if build is None else build(**out)


class UnionOf(Walked):
    """``X | Y`` of which a walked type: the first alternative that accepts (its outcomes kept by ``_run``);
    ``Optional[X]``: ``None``, or X with X's own errors. Made before its alternatives' nodes (``fill``), so that an
    alternative whose members are of this union's type refers to it."""

    __slots__ = ("alternatives", "expected", "optional")

    def __init__(self, tp: Any) -> None:
        self.expected = describe(tp)
        self.alternatives: list[tuple[Node, bool]] = []
        self.optional: tuple[Node, bool] | None = None

    def fill(self, found: list[Node], none: Checker) -> None:
        """The alternatives' nodes, in order; ``none``: the leaf of ``None``, which makes ``X | None`` an
        Optional."""
        self.alternatives = [_member(node) for node in found]
        others = [node for node in found if node is not none]
        self.optional = _member(others[0]) if len(others) == 1 and len(found) == 2 else None

    def walk(self, value: Any) -> Generator[tuple[Any, Any], Any, Any]:
        if self.optional is not None:
            if value is None:
                return None
            node, walked = self.optional
            if walked:
                return (yield node, value)
            if node is None:
                return value
            try:
                return node(value)  # type: ignore[operator]
            except Invalid as exc:
                return exc
        for node, walked in self.alternatives:
            if walked:
                checked = yield node, value
                if type(checked) is not Invalid:
                    return checked
            elif node is None:  # Any
                return value
            else:
                try:
                    return node(value)  # type: ignore[operator]
                except Invalid:
                    pass
        return refuse(self.expected, value)


class Constrained(Walked):
    """``Annotated[X, {...}]`` of a walked X: X's outcome, then the keywords checked on the value as it came."""

    __slots__ = ("base", "check")

    def __init__(self, base: Walked, check: Callable[[Any], None]) -> None:
        self.base = base
        self.check = check

    def walk(self, value: Any) -> Generator[tuple[Any, Any], Any, Any]:
        out = yield self.base, value
        if type(out) is Invalid:
            return out
        try:
            self.check(value)
        except Invalid as exc:
            return exc
        return out


def constrained_leaf(node: Checker | None, check: Callable[[Any], None]) -> Checker:
    """``Annotated[X, {...}]`` of a leaf X (or of ``Any``: ``node`` None)."""
    if node is None:

        def constrained_any(value: Any) -> Any:
            check(value)
            return value

        return constrained_any

    def constrained(value: Any) -> Any:
        out = node(value)
        check(value)
        return out

    return constrained


# --- results ---------------------------------------------------------------------------------------


# Where converting a result stops: as deep as the encoders go (rpcwire.pure.codec's cap, the native encoder's). A
# result that nests deeper (one that holds itself) is the encoder's RecursionError, found here first.
_DUMP_DEPTH = 2_000


def dump(value: Any) -> Any:
    """``value`` with its dataclasses, pydantic models, enums, tuples and sets turned into what JSON holds
    (the same object where nothing changed: no deep copy).

    Walked with a list as its stack (as the checking is), not recursively: a result converted is as deep as
    the argument it came from may be.
    """
    top, owned = _opened(value)
    if owned is None:
        return top
    # One frame per list or dict being walked: (its pairs left, it, the output, whether the output is ours to
    # change (a new list or dict), the key and element it came from in the frame below).
    stack: list[tuple[Any, Any, Any, bool, Any, Any]] = []
    container, out = top, top
    pairs: Any = iter(enumerate(top) if type(top) is list else top.items())
    key: Any = None
    element: Any = None
    while True:
        for key, element in pairs:
            converted, child_owned = _opened(element)
            if child_owned is None:
                if converted is not element:
                    if out is container and not owned:
                        out = type(container)(container)  # copied (list or dict alike) at the first change
                    out[key] = converted
                continue
            if len(stack) >= _DUMP_DEPTH:
                raise RecursionError("maximum recursion depth exceeded while converting a result")
            stack.append((pairs, container, out, owned, key, element))
            container, out, owned = converted, converted, child_owned
            pairs = iter(enumerate(converted) if type(converted) is list else converted.items())
            break
        else:
            if not stack:
                return out
            converted = out
            pairs, container, out, owned, key, element = stack.pop()
            if converted is not element:
                if out is container and not owned:
                    out = type(container)(container)
                out[key] = converted


def _opened(value: Any) -> tuple[Any, bool | None]:
    """``value`` converted, and ``None`` when nothing is under it; else the list or dict whose elements are
    converted next, and whether it is a new one (``True``: changed in place) or ``value`` itself (``False``:
    copied at its first converted element)."""
    while True:
        kind = type(value)
        if kind in PLAIN:
            return value, (False if kind is list or kind is dict else None)
        model_dump = getattr(value, "model_dump", None)
        if model_dump is not None and hasattr(kind, "__pydantic_validator__"):
            return model_dump(mode="json"), None
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return {field.name: getattr(value, field.name) for field in dataclasses.fields(value)}, True
        if isinstance(value, enum.Enum):
            value = value.value
            continue
        if isinstance(value, (tuple, set, frozenset)):
            return list(value), True
        if isinstance(value, dict):
            return dict(value), True
        return value, None

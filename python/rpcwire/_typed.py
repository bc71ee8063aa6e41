"""Typed handlers: ``methods()`` checks a function's arguments against its parameters' annotations.

``compile_function(function, signature)`` runs once, when the function is registered: it resolves the
annotations (strings too, ``from __future__ import annotations``) and builds one checker per annotated
parameter. A checker takes a value decoded from JSON and gives back the value the function receives (the
same object, or a converted one: a dataclass instance, a tuple, an enum member, a pydantic model), or raises
``_Invalid`` with its errors. A function with no annotation at all gets no :class:`Typed` and is called as
before (``methods()``' fast path).

Built in, with no dependency: ``int`` (not ``bool``), ``float`` (an ``int`` is accepted, JSON having one
number type, and received as the ``float``; past 1.8e308 refused), ``str``, ``bool``, ``None``,
``Any``/``object``, ``list[X]`` (and ``Sequence[X]``), ``tuple[X, Y]``/``tuple[X, ...]`` (a tuple),
``set[X]``/``frozenset[X]``, ``dict[str, X]`` (and ``Mapping``), ``X | Y``/``Optional``/``Union`` (the first
alternative that accepts), ``Literal``, ``TypedDict`` (required and optional keys; an unknown key is refused),
dataclasses (a JSON object becomes the instance, nested; an unknown member is refused), ``Enum`` (by value: the
member), ``NewType`` and ``Annotated`` (its base type, with the JSON Schema keywords of a dict among its metadata
enforced, :data:`ENFORCED`, the ones the schemas advertise; pydantic's or annotated-types' constraints through
pydantic). Scalars, ``Literal`` values and ``Enum`` members follow one rule: a value of the JSON type declared,
never coerced (``True`` is not ``1``, ``1.0`` is not the member ``1``), an ``int`` being accepted where a
``float`` is declared (``Literal[2.0]``, a member ``2.0``), as for ``float``, and received as the float (the
member).

The checking does not recurse on the interpreter's stack (a list of generators is its stack, ``_run``): input
as deep as the transport accepts (``max_depth`` up to 512) is checked, and a result converted, on any thread.
Its work is bounded by the input's size times the annotation's: a union's outcome for a value is kept for the
walk, so that alternatives sharing a member's type do not each walk that member again.

Anything else (a pydantic model, ``datetime``, ``Annotated[int, Field(gt=0)]``, ``conint(...)``): pydantic's
``TypeAdapter(...).validate_json`` of the value written as JSON, in strict mode (the built-in checker's rule, no
coercion, inside a model as at the top; what JSON writes as a string, a datetime or a UUID, read as JSON mode
reads it), when pydantic imports; without pydantic, or a
type pydantic cannot build a schema for, the value is passed unchecked and one warning says so on the
``rpcwire`` logger when the function is registered. The checking of a parameter is the same whether pydantic
is installed or not whenever the built-in checker handles its type.

A failure is :class:`InvalidParams` (-32602) whose ``data`` is a list (at most :data:`MAX_ERRORS`) of
``{"path": [...], "expected": "...", "got": "..."}``: ``path`` starts with the parameter's name (then list
indexes and member names, each name or key cut to :data:`GOT_LENGTH` characters), ``expected`` describes the
type (pydantic's message without its leading "Input should be ", a part of it that may come from the input,
such as a discriminated union's tag, cut to :data:`GOT_LENGTH` characters; ``"a valid value"`` for a
validator's own message, logged at DEBUG instead), ``got`` is ``"missing"``, a short ``repr`` of a scalar (at
most :data:`GOT_LENGTH` characters) or the type's name of anything else (``"list"``, ``"dict"``): never the
input echoed back whole. The checking stops once :data:`MAX_ERRORS` errors are found. Params that do not fit
the function are errors of the same list (:func:`binding_errors`): an argument past the last parameter (``path``
its index), a name no parameter takes (``no such parameter``), a parameter left out (``got`` ``missing``).

Return annotations are not checked; they only say how a result is converted for the encoder (dataclasses to
dicts without a deep copy, pydantic models by ``model_dump(mode="json")``, enums to their values, tuples and
sets to lists): walked through when the annotation names a dataclass, a model, an enum, a tuple or a set (or
a type the checker does not know); when it is absent or ``Any``, only a dataclass or model returned at the
top is converted; when it names JSON types only, the result goes to the encoder as it is.
"""

from __future__ import annotations

import asyncio
import collections.abc
import contextlib
import dataclasses
import enum
import functools
import inspect
import itertools
import json
import logging
import math
import re
import types
import typing
from collections.abc import Callable, Generator, Iterable
from typing import Any, Union

from rpcwire._types import InvalidParams

__all__ = ["ENFORCED", "GOT_LENGTH", "MAX_ERRORS", "Typed", "binding_errors", "compile_function", "constraints"]

MAX_ERRORS = 20
"""At most this many errors in an answer's ``data`` (and containers stop looking once they hold as many)."""

GOT_LENGTH = 40
"""A scalar's ``repr`` in ``got`` is cut to this many characters (then ``…``)."""

_log = logging.getLogger("rpcwire")

Checker = Callable[[Any], Any]
_EMPTY = inspect.Parameter.empty
_PLAIN = frozenset({dict, list, str, int, float, bool, type(None)})
_SEQUENCES = frozenset({list, collections.abc.Sequence, collections.abc.MutableSequence, collections.abc.Iterable})
_MAPPINGS = frozenset({dict, collections.abc.Mapping, collections.abc.MutableMapping})
_SETS = {set: set, frozenset: frozenset, collections.abc.Set: frozenset, collections.abc.MutableSet: set}
# The modules whose Annotated metadata are constraints only pydantic enforces.
_CONSTRAINT_MODULES = frozenset({"pydantic", "pydantic_core", "annotated_types"})


# An error is (path, expected, got); ``path`` is a chain of pairs (segment, the rest of the path) ending in ``()``,
# its outermost segment first. The errors found below a value are never changed by the levels above: each level
# puts its segment in front in one step (a deep error is not copied once per level), and an outcome a union keeps
# (``_run``) can be handed out again. ``_under`` turns them into ``data``'s dicts, once, at the top.
Error = tuple[Any, str, str]


class _Invalid(Exception):
    """A refusal: its errors' paths are relative to the value refused. A leaf checker raises it; a walk returns
    it as a value's outcome."""

    def __init__(self, errors: list[Error]) -> None:
        super().__init__()
        self.errors = errors


def cut(text: str) -> str:
    """``text`` as the errors send what came from the input: at most :data:`GOT_LENGTH` characters (then ``…``)."""
    return text if len(text) <= GOT_LENGTH else text[: GOT_LENGTH - 1] + "…"


def _got(value: Any) -> str:
    if value is None or type(value) in (bool, int, float, str):
        return cut(repr(value))
    return type(value).__name__


def _segment(key: Any) -> Any:
    """A path's segment: a name or a key (from the input: cut as ``got`` is), or an index."""
    return cut(key) if type(key) is str else key


def _refuse(expected: str, value: Any) -> _Invalid:
    return _Invalid([((), expected, _got(value))])


def _below(key: Any, exc: _Invalid, errors: list[Error]) -> None:
    """``exc``'s errors, found under ``key`` (an index, a member's name or a key), added to ``errors``."""
    segment = _segment(key)
    errors.extend(((segment, path), expected, got) for path, expected, got in exc.errors)


def _segments(path: Any) -> list[Any]:
    out = []
    while path:
        segment, path = path
        out.append(segment)
    return out


def _under(segments: tuple[Any, ...], exc: _Invalid, errors: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """``exc``'s errors as ``data`` lists them, under ``segments`` (a parameter's name, an index among
    ``*args``), added to ``errors``."""
    prefix = list(map(_segment, segments))
    found = [{"path": prefix + _segments(path), "expected": expected, "got": got} for path, expected, got in exc.errors]
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
# raises ``_Invalid``; a type with members (a list, a tuple, a set, a dict, a dataclass or a TypedDict, a union of
# such types) is a ``_Walked`` whose ``walk(value)`` is a generator: it checks its leaf members in place, yields
# ``(node, element)`` for each member walked in turn and is sent back that member's outcome (its value, or an
# ``_Invalid``), and returns the value's own outcome. ``_run`` drives the generators with a list as its stack, so
# the walk does not recurse on the interpreter's stack however deep the input nests (worker threads' stacks are
# small), and keeps a union's outcomes (see ``_run``), so that the work is bounded by the input's size.


class _Walked:
    """A compiled type with members (see above)."""

    __slots__ = ()

    def walk(self, value: Any) -> Generator[tuple[Any, Any], Any, Any]:
        raise NotImplementedError


Node = Union[Checker, _Walked, None]  # noqa: UP007 (a runtime alias: X | Y of a Callable alias fails on 3.10)
"""A compiled annotation: a leaf checker, a walked type, or ``None`` (anything is accepted as it is)."""


def _walk(node: _Walked, value: Any) -> Generator[tuple[Any, Any], Any, Any]:
    """The walk of one value under one node: the walk's step per (value, type) met (``_run`` calls it for each;
    tests count the calls)."""
    return node.walk(value)


def _run(walk: Generator[tuple[Any, Any], Any, Any], request: tuple[Any, Any]) -> Any:
    """The outcome of a walk that asked for its first member's outcome (``request``): the value the function
    receives, or an ``_Invalid``.

    One generator per level being walked, on a list. A union's outcome for a list or a dict is kept for the rest of
    the walk, by the value's identity: alternatives that share a member's type (``A | B`` whose classes both have a
    member ``A | B | None``) ask for that member's outcome under the union again and get it without a second walk,
    where trying each alternative anew would walk the member once per way down (2**depth). So each list or dict is
    walked at most once per node of the annotation. (The same object met twice under one union, which a decoded
    request never holds, is given the same outcome both times.)
    """
    memo: dict[tuple[int, _Walked], Any] = {}
    stack: list[tuple[Generator[tuple[Any, Any], Any, Any], Any]] = []
    key: Any = None
    while True:
        node, element = request
        stack.append((walk, key))
        key = None
        sent: Any = None
        if type(node) is _Union and isinstance(element, (list, dict)):
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


def _entry(node: Node) -> Checker | None:
    """A parameter's checker: a leaf as it is, a walked type through ``_run`` (a value whose members are all
    leaves, the usual dataclass, ends in its first step: no stack)."""
    if not isinstance(node, _Walked):
        return node

    def check(value: Any) -> Any:
        walk = _walk(node, value)
        try:
            request = walk.send(None)
        except StopIteration as stop:
            outcome = stop.value
        else:
            outcome = _run(walk, request)
        if type(outcome) is _Invalid:
            raise outcome
        return outcome

    return check


def _member(node: Node) -> tuple[Node, bool]:
    """A member's node and whether it is walked (else called in place)."""
    return node, isinstance(node, _Walked)


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
            except _Invalid as exc:
                checked = exc
        if type(checked) is _Invalid:
            _below(key, checked, errors)
            if len(errors) >= MAX_ERRORS:
                break  # no more are sent: the rest is not looked at
            continue
        if checked is not element:
            if out is value:
                out = copy(value)
            out[key] = checked
    return _Invalid(errors) if errors else out


class _List(_Walked):
    """``list[X]`` (``Sequence``...), ``tuple[X, ...]`` and ``set[X]``: a JSON array, each element checked, then
    ``finish`` (``tuple``, ``set``, ``frozenset``) applied when given."""

    __slots__ = ("expected", "finish", "item", "walked")

    def __init__(self, tp: Any, item: Node, finish: Callable[[Any], Any] | None = None) -> None:
        self.expected = describe(tp)
        self.item, self.walked = _member(item)
        self.finish = finish

    def walk(self, value: Any) -> Generator[tuple[Any, Any], Any, Any]:
        if not isinstance(value, list):
            return _refuse(self.expected, value)
        out = value
        if self.item is not None:
            out = yield from _elements(value, enumerate(value), self.item, self.walked, list)
            if type(out) is _Invalid:
                return out
        if self.finish is None:
            return out
        try:
            return self.finish(out)
        except TypeError:  # an unhashable element of a set
            return _refuse(self.expected, value)


class _Dict(_Walked):
    """``dict[str, X]`` (``Mapping``...): a JSON object, each value checked (``keys``: its keys are ``str``)."""

    __slots__ = ("expected", "item", "keys", "walked")

    def __init__(self, tp: Any, item: Node, *, keys: bool = True) -> None:
        self.expected = describe(tp) if keys else "dict"
        self.item, self.walked = _member(item)
        self.keys = keys

    def walk(self, value: Any) -> Generator[tuple[Any, Any], Any, Any]:
        if not isinstance(value, dict) or (self.keys and not all(type(key) is str for key in value)):
            return _refuse(self.expected, value)
        if self.item is None:
            return value
        return (yield from _elements(value, value.items(), self.item, self.walked, dict))


class _Tuple(_Walked):
    """``tuple[X, Y]``: an array of that length, each element checked by its own type."""

    __slots__ = ("expected", "items")

    def __init__(self, tp: Any, items: list[Node]) -> None:
        self.expected = describe(tp)
        self.items = [_member(item) for item in items]

    def walk(self, value: Any) -> Generator[tuple[Any, Any], Any, Any]:
        if not isinstance(value, (list, tuple)) or len(value) != len(self.items):
            return _refuse(self.expected, value)
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
                except _Invalid as exc:
                    checked = exc
            if type(checked) is _Invalid:
                _below(index, checked, errors)
            else:
                out[index] = checked
        return _Invalid(errors) if errors else tuple(out)


class _Object(_Walked):
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
            return _refuse(self.expected, value)
        fields = self.fields
        out = value if build is None else {}
        errors: list[Error] = []
        for key, element in value.items():
            field = fields.get(key) if type(key) is str else None
            if field is None:  # a member the class does not declare: refused, for a TypedDict too
                errors.append(((_segment(key), ()), "no such member", _got(element)))
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
                except _Invalid as exc:
                    checked = exc
            if type(checked) is _Invalid:
                _below(key, checked, errors)
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
                errors.append(((_segment(key), ()), description, "missing"))
        if errors:
            return _Invalid(errors[:MAX_ERRORS])
        return out if build is None else build(**out)


class _Union(_Walked):
    """``X | Y`` of which a walked type: the first alternative that accepts (its outcomes kept by ``_run``);
    ``Optional[X]``: ``None``, or X with X's own errors. Made before its alternatives' nodes (``fill``), so that an
    alternative whose members are of this union's type refers to it."""

    __slots__ = ("alternatives", "expected", "optional")

    def __init__(self, tp: Any) -> None:
        self.expected = describe(tp)
        self.alternatives: list[tuple[Node, bool]] = []
        self.optional: tuple[Node, bool] | None = None

    def fill(self, found: list[Node]) -> None:
        self.alternatives = [_member(node) for node in found]
        others = [node for node in found if node is not _none]
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
            except _Invalid as exc:
                return exc
        for node, walked in self.alternatives:
            if walked:
                checked = yield node, value
                if type(checked) is not _Invalid:
                    return checked
            elif node is None:  # Any
                return value
            else:
                try:
                    return node(value)  # type: ignore[operator]
                except _Invalid:
                    pass
        return _refuse(self.expected, value)


class _Constrained(_Walked):
    """``Annotated[X, {...}]`` of a walked X: X's outcome, then the keywords checked on the value as it came."""

    __slots__ = ("base", "check")

    def __init__(self, base: _Walked, check: Callable[[Any], None]) -> None:
        self.base = base
        self.check = check

    def walk(self, value: Any) -> Generator[tuple[Any, Any], Any, Any]:
        out = yield self.base, value
        if type(out) is _Invalid:
            return out
        try:
            self.check(value)
        except _Invalid as exc:
            return exc
        return out


def _constrained_leaf(node: Checker | None, check: Callable[[Any], None]) -> Checker:
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


# --- constraints: the JSON Schema keywords of an Annotated dict ------------------------------------------
#
# ``Annotated[int, {"minimum": 1}]`` advertises ``minimum`` in the schemas (``_schema``); the checker enforces it.
# A keyword applies, as JSON Schema says, to a value of its JSON type only (``minLength`` to a string...), checked
# on the value as it came. The validation keywords not enforced here are not advertised either, and the same
# warning says so when the function is registered; any other member (``title``, ``description``, ``examples``,
# ``format``, an unknown name) is an annotation, advertised and not checked, as in JSON Schema.

ENFORCED = frozenset(
    {
        "const",
        "enum",
        "exclusiveMaximum",
        "exclusiveMinimum",
        "maxItems",
        "maxLength",
        "maxProperties",
        "maximum",
        "minItems",
        "minLength",
        "minProperties",
        "minimum",
        "multipleOf",
        "pattern",
    }
)
"""The keywords of an ``Annotated`` dict that a typed function's checking enforces."""

# The validation and applicator keywords of JSON Schema that the checking does not enforce: left out.
_NOT_ENFORCED = frozenset(
    {
        "$dynamicRef",
        "$ref",
        "additionalItems",
        "additionalProperties",
        "allOf",
        "anyOf",
        "contains",
        "dependencies",
        "dependentRequired",
        "dependentSchemas",
        "else",
        "if",
        "items",
        "maxContains",
        "minContains",
        "not",
        "oneOf",
        "patternProperties",
        "prefixItems",
        "properties",
        "propertyNames",
        "required",
        "then",
        "type",
        "unevaluatedItems",
        "unevaluatedProperties",
        "uniqueItems",
    }
)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _scalar(value: Any) -> bool:
    return value is None or type(value) in (bool, int, float, str)


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _keyword_fault(keyword: str, bound: Any) -> str | None:
    """Why ``bound`` is no value for ``keyword`` (``None``: it is)."""
    if keyword in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"):
        if not _number(bound) or (type(bound) is float and not math.isfinite(bound)):
            return "not a number"
        if keyword == "multipleOf" and bound <= 0:
            return "not above 0"
    elif keyword in ("minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties"):
        if type(bound) is not int or bound < 0:
            return "not a count"
    elif keyword == "pattern":
        if not isinstance(bound, str):
            return "not a string"
        try:
            re.compile(bound)
        except re.error:
            return "not a regular expression Python reads"
    elif keyword == "enum":
        if not isinstance(bound, (list, tuple)) or not bound or not all(map(_scalar, bound)):
            return "not a list of JSON scalars"
    elif keyword == "const" and not _scalar(bound):
        return "not a JSON scalar"
    return None


def constraints(meta: collections.abc.Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """An ``Annotated`` dict split: its members that the schemas advertise (the keywords enforced and the
    annotations), and the keywords left out (not enforced, or of a value they cannot take), each with why."""
    advertised: dict[str, Any] = {}
    left_out = []
    for keyword, bound in meta.items():
        if keyword in _NOT_ENFORCED:
            left_out.append(repr(keyword))
            continue
        fault = _keyword_fault(keyword, bound) if keyword in ENFORCED else None
        if fault is not None:
            left_out.append(f"{keyword!r} ({cut(repr(bound))}: {fault})")
            continue
        advertised[keyword] = bound
    return advertised, left_out


# keyword -> (the JSON type it applies to, whether a value keeps it, the expected text), from its bound.
_Keyword = tuple[Callable[[Any], bool], Callable[[Any], bool], str]


def _multiple(bound: Any) -> Callable[[Any], bool]:
    def holds(value: Any) -> bool:
        if type(value) is int and type(bound) is int:
            return value % bound == 0
        try:
            quotient = value / bound
            return bool(quotient == int(quotient))
        except (OverflowError, ValueError):  # beyond a float, or infinite
            return False

    return holds


def _one_of(values: tuple[Any, ...], expected: str) -> Callable[[Any], bool]:
    check = _literal(None, values, expected)

    def holds(value: Any) -> bool:
        try:
            check(value)
        except _Invalid:
            return False
        return True

    return holds


def _is_str(value: Any) -> bool:
    return isinstance(value, str)


def _is_list(value: Any) -> bool:
    return isinstance(value, list)


def _is_dict(value: Any) -> bool:
    return isinstance(value, dict)


def _anything(value: Any) -> bool:
    return True


def _keyword(keyword: str, bound: Any) -> _Keyword:
    if keyword == "minimum":
        return _number, lambda value: value >= bound, f"greater than or equal to {bound!r}"
    if keyword == "maximum":
        return _number, lambda value: value <= bound, f"less than or equal to {bound!r}"
    if keyword == "exclusiveMinimum":
        return _number, lambda value: value > bound, f"greater than {bound!r}"
    if keyword == "exclusiveMaximum":
        return _number, lambda value: value < bound, f"less than {bound!r}"
    if keyword == "multipleOf":
        return _number, _multiple(bound), f"a multiple of {bound!r}"
    if keyword == "minLength":
        return _is_str, lambda value: len(value) >= bound, f"a string of at least {_plural(bound, 'character')}"
    if keyword == "maxLength":
        return _is_str, lambda value: len(value) <= bound, f"a string of at most {_plural(bound, 'character')}"
    if keyword == "pattern":
        search = re.compile(bound).search
        return _is_str, lambda value: search(value) is not None, f"a string matching {bound!r}"
    if keyword == "minItems":
        return _is_list, lambda value: len(value) >= bound, f"an array of at least {_plural(bound, 'item')}"
    if keyword == "maxItems":
        return _is_list, lambda value: len(value) <= bound, f"an array of at most {_plural(bound, 'item')}"
    if keyword == "minProperties":
        return _is_dict, lambda value: len(value) >= bound, f"an object of at least {_plural(bound, 'member')}"
    if keyword == "maxProperties":
        return _is_dict, lambda value: len(value) <= bound, f"an object of at most {_plural(bound, 'member')}"
    values = tuple(bound) if keyword == "enum" else (bound,)
    expected = " | ".join(map(repr, values))
    return _anything, _one_of(values, expected), expected


def _keywords_check(keywords: dict[str, Any]) -> Callable[[Any], None] | None:
    """A check of the enforced ``keywords`` (raising ``_Invalid`` with one error per keyword a value breaks), or
    ``None`` when there is none."""
    if not keywords:
        return None
    tests = [_keyword(keyword, bound) for keyword, bound in keywords.items()]

    def check(value: Any) -> None:
        errors = [
            ((), expected, _got(value)) for applies, holds, expected in tests if applies(value) and not holds(value)
        ]
        if errors:
            raise _Invalid(errors)

    return check


class _Compiler:
    """Builds the nodes of one function (``globalns`` resolves the strings among its annotations)."""

    def __init__(self, globalns: dict[str, Any], where: str, localns: dict[str, Any] | None = None) -> None:
        self.globalns = globalns
        self.localns = localns
        self.where = where
        self.notes: list[str] = []
        self.done: dict[Any, Node] = {}  # dataclasses, TypedDicts (recursive types) and unions of them met

    def resolve(self, tp: Any) -> Any:
        if isinstance(tp, typing.ForwardRef):
            tp = tp.__forward_arg__
        if isinstance(tp, str):
            tp = eval(tp, self.globalns, self.localns)
        return tp

    def checker(self, tp: Any) -> Checker | None:
        """The checker of a parameter of type ``tp``, or ``None`` when every value is accepted as it is."""
        return _entry(self.node(tp))

    def node(self, tp: Any) -> Node:
        """The node of ``tp``, or ``None`` when every value is accepted as it is."""
        try:
            tp = self.resolve(tp)
        except Exception as exc:
            self.notes.append(f"{self.where}: the annotation {tp!r} does not resolve ({exc!r}); not checked")
            return None
        if typing.get_origin(tp) is typing.Annotated:
            return self.annotated(tp)
        try:
            hash(tp)
        except TypeError:  # a Literal of a list...
            return self.pydantic(tp, describe(tp))
        if tp in self.done:
            return self.done[tp]
        if tp is Any or tp is object or isinstance(tp, typing.TypeVar):
            return None
        if tp is None or tp is type(None):
            return _none
        simple = _SIMPLE.get(tp)
        if simple is not None:
            return simple
        origin = typing.get_origin(tp)
        args = typing.get_args(tp)
        if origin is typing.Union or origin is types.UnionType:
            return self.union(tp, args)
        if origin is typing.Literal:
            return _literal(tp, args)
        if tp in _SEQUENCES or origin in _SEQUENCES:
            return _List(tp, self.node(args[0]) if args else None)
        if tp is tuple or origin is tuple:
            return self.tuple_of(tp, args)
        if tp in _SETS or origin in _SETS:
            return _List(tp, self.node(args[0]) if args else None, _SETS[origin or tp])
        if tp in _MAPPINGS or origin in _MAPPINGS:
            if args and self.resolve(args[0]) is not str:
                return self.pydantic(tp, f"the keys of {describe(tp)}")
            return _Dict(tp, self.node(args[1]) if args else None)
        supertype = getattr(tp, "__supertype__", None)  # NewType
        if supertype is not None:
            return self.node(supertype)
        if isinstance(tp, type):
            if hasattr(tp, "__pydantic_validator__"):  # a pydantic model or dataclass
                return self.pydantic(tp, describe(tp))
            if dataclasses.is_dataclass(tp):
                return self.dataclass(tp)
            if issubclass(tp, dict) and hasattr(tp, "__required_keys__"):
                return self.typed_dict(tp)
            if issubclass(tp, enum.Enum):
                return _enum(tp)
        return self.pydantic(tp, describe(tp))

    def annotated(self, tp: Any) -> Node:
        """``Annotated[X, ...]``: X, with the constraints of its metadata: the JSON Schema keywords of a dict
        (``{"minimum": 1}``, see ``constraints``), pydantic's or annotated-types' objects (through pydantic)."""
        base, *metadata = typing.get_args(tp)
        keywords: dict[str, Any] = {}
        others = []
        for meta in metadata:
            if isinstance(meta, collections.abc.Mapping):
                advertised, left_out = constraints(meta)
                keywords.update((key, value) for key, value in advertised.items() if key in ENFORCED)
                if left_out:
                    self.notes.append(
                        f"{self.where}: {describe(base)}'s {', '.join(left_out)}: not checked, nor advertised in "
                        "its schemas"
                    )
            else:
                others.append(meta)
        if any(type(meta).__module__.partition(".")[0] in _CONSTRAINT_MODULES for meta in others):
            node = self.pydantic(typing.Annotated[(base, *others)], f"the constraints of {describe(tp)}")
        else:
            node = self.node(base)
        check = _keywords_check(keywords)
        if check is None:
            return node
        if isinstance(node, _Walked):
            return _Constrained(node, check)
        return _constrained_leaf(node, check)

    def pydantic(self, tp: Any, what: str) -> Node:
        try:
            import pydantic  # noqa: PLC0415 (only for the types the built-in checker does not know)
        except ImportError:
            self.notes.append(f"{self.where}: {what}: not checked (pydantic is not installed)")
            return self.fallback(tp)
        try:
            adapter = pydantic.TypeAdapter(tp)
        except Exception as exc:
            self.notes.append(f"{self.where}: {what}: not checked (pydantic: {type(exc).__name__}: {exc})")
            return None
        validate_json = adapter.validate_json
        validate = adapter.validate_python
        validation_error = pydantic.ValidationError
        where = self.where

        def check(value: Any) -> Any:
            try:
                try:
                    text = _dumps(value).encode()
                except (TypeError, ValueError):
                    # Not JSON (a value a caller made in Python), or a string with a lone surrogate ("\ud800",
                    # which JSON allows and UTF-8 cannot hold): checked as a Python value, in strict mode too.
                    return validate(value, strict=True)
                return validate_json(text, strict=True)
            except validation_error as exc:
                errors = exc.errors(include_url=False)[:MAX_ERRORS]
                if errors and errors[0].get("type") == "json_invalid":  # nested past what its parser reads
                    raise _Invalid([((), _TOO_DEEP, _got(value))]) from None
                raise _Invalid([_from_pydantic(error, where) for error in errors]) from None

        return check

    def fallback(self, tp: Any) -> Node:
        """Without pydantic: the base type of an ``Annotated`` (or a dict's values), nothing for a class."""
        origin = typing.get_origin(tp)
        if origin is typing.Annotated:
            return self.node(typing.get_args(tp)[0])
        if origin in _MAPPINGS:
            return _Dict(tp, self.node(typing.get_args(tp)[1]), keys=False)
        return None

    def union(self, tp: Any, args: tuple[Any, ...]) -> Node:
        notes = len(self.notes)
        # Registered first: a union whose alternatives have members of its own type (``A | B`` with a member
        # ``A | B | None`` in both) is one node, so that _run keeps one outcome per value for all of them.
        walked = self.done[tp] = _Union(tp)
        found = [self.node(arg) for arg in args]
        walked.fill(found)
        if len(self.notes) > notes:
            del self.done[tp]  # compiled again for another parameter, which gets its own warning
        if any(isinstance(node, _Walked) for node in found) and all(node is not None for node in found):
            return walked
        # Any among them, or leaves only: None, or a plain function called in place (a member that referred to
        # this union while it was compiled keeps the node, which does the same).
        self.done.pop(tp, None)
        if any(node is None for node in found):
            return None
        others = [node for node in found if node is not _none]
        if len(others) == 1 and len(found) == 2:  # Optional[X]: X's own errors (their paths) when not None
            other: Checker = others[0]  # type: ignore[assignment]

            def optional(value: Any) -> Any:
                return None if value is None else other(value)

            return optional
        checkers: list[Checker] = found  # type: ignore[assignment]
        expected = describe(tp)

        def union(value: Any) -> Any:
            for checker in checkers:
                try:
                    return checker(value)
                except _Invalid:
                    pass
            raise _refuse(expected, value)

        return union

    def tuple_of(self, tp: Any, args: tuple[Any, ...]) -> Node:
        if not args or (len(args) == 2 and args[1] is Ellipsis):
            return _List(tp, self.node(args[0]) if args else None, tuple)
        if args == ((),):  # tuple[()]
            args = ()
        return _Tuple(tp, [self.node(arg) for arg in args])

    def dataclass(self, tp: type) -> Node:
        hints = _hints(tp)
        members = [
            (
                field.name,
                hints.get(field.name, field.type),
                field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING,
            )
            for field in dataclasses.fields(tp)
            if field.init
        ]
        return self.members(tp, members, tp)

    def typed_dict(self, tp: type) -> Node:
        members = []
        for key, hint in _hints(tp).items():
            annotation = self.safe(hint)
            # Required/NotRequired read here too: __required_keys__ misses them in string annotations (3.11).
            is_required = key in tp.__required_keys__  # type: ignore[attr-defined]
            while (qualifier := _key_qualifier(annotation)) is not None:
                if qualifier != "ReadOnly":
                    is_required = qualifier == "Required"
                annotation = typing.get_args(annotation)[0]
            members.append((key, annotation, is_required))
        return self.members(tp, members, None)

    def members(self, tp: type, members: list[tuple[str, Any, bool]], build: type | None) -> Node:
        """The node of a dataclass or a TypedDict of ``members`` (name, annotation, required)."""
        node = _Object(tp, build)
        self.done[tp] = node  # a member of the class's own type
        fields: dict[str, Node] = {}
        required: list[tuple[str, str]] = []
        saved, self.where = self.where, f"{self.where} ({tp.__name__})"
        for key, annotation, is_required in members:
            fields[key] = self.node(annotation)
            if is_required:
                required.append((key, describe(self.safe(annotation))))
        self.where = saved
        node.fill(fields, required)
        return node

    def safe(self, tp: Any) -> Any:
        try:
            return self.resolve(tp)
        except Exception:
            return tp


def _hints(tp: type) -> dict[str, Any]:
    """A class's annotations resolved; when one does not resolve, as written (each one then tried alone)."""
    try:
        return typing.get_type_hints(tp, include_extras=True)
    except Exception:  # whatever evaluating an annotation raises
        return dict(getattr(tp, "__annotations__", {}))


def _key_qualifier(annotation: Any) -> str | None:
    """``"Required"``, ``"NotRequired"`` or ``"ReadOnly"`` for a TypedDict key's qualifier, else ``None``. By
    name: ``typing``'s (3.11+) and ``typing_extensions``' (what 3.10 has) are different objects."""
    name = getattr(typing.get_origin(annotation), "_name", None)
    return name if name in ("Required", "NotRequired", "ReadOnly") else None


# --- leaves: one rule for scalars, Literal values and Enum members ---------------------------------------------
#
# A value is accepted where its JSON type is the one declared (the type, or a Literal value's or an Enum member
# value's type), with no coercion: a bool is not an int (nor 1 a True), a float is not an int (1.0 is not the
# member 1), a number is not a str. The one widening: an int where a float is declared, JSON having one number
# type; the function then receives the float (the member, for an Enum), as pydantic gives it.


# A value pydantic checks is given to it as the JSON it came as, in strict mode: the rule of the built-in checker
# (no coercion: "3" is not an int, inside a model as at the top), with what JSON spells as strings read as JSON
# mode reads them (a datetime, a UUID, a dict's int keys). Compact: the text is only pydantic's input.
_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
# What the text a value was written as cannot be read for (its parser's nesting limit, 200 levels in pydantic-core).
_TOO_DEEP = "a value nested less deeply (pydantic reads JSON up to its own depth limit)"


def _int(value: Any) -> Any:
    if type(value) is int or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise _refuse("int", value)


def _float(value: Any) -> Any:
    if type(value) is float:
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return float(value)  # an int where a float is declared: the float, as pydantic gives it
        except OverflowError:  # past 1.8e308: no float holds it
            raise _refuse(_FINITE, value) from None
    raise _refuse("float", value)


_FINITE = "float (a number of at most 1.8e308)"


def _str(value: Any) -> Any:
    if isinstance(value, str):
        return value
    raise _refuse("str", value)


def _bool(value: Any) -> Any:
    if value is True or value is False:
        return value
    raise _refuse("bool", value)


def _none(value: Any) -> Any:
    if value is None:
        return value
    raise _refuse("None", value)


_SIMPLE: dict[Any, Checker] = {int: _int, float: _float, str: _str, bool: _bool}
_EXACT: dict[Checker | None, type] = {_int: int, _float: float, _str: str, _bool: bool, _none: type(None)}
_AS_GIVEN = object()


def _literal(tp: Any, args: tuple[Any, ...], expected: str | None = None) -> Checker:
    # (type, value) -> what the function receives: the value as given (an int for a float: the float), or the
    # Enum member whose value it is.
    allowed: dict[tuple[type, Any], Any] = {}
    for arg in args:
        if isinstance(arg, enum.Enum):
            allowed[(type(arg), arg)] = arg
            with contextlib.suppress(TypeError):  # an unhashable member value: never a JSON scalar anyway
                allowed.setdefault((type(arg.value), arg.value), arg)
        else:
            allowed.setdefault((type(arg), arg), _AS_GIVEN)
    if expected is None:
        expected = describe(tp)

    def check(value: Any) -> Any:
        kind = type(value)
        try:
            found = allowed.get((kind, value))
            if found is None and kind is int:  # an int for a float value: that float
                found = allowed.get((float, value))
                if found is _AS_GIVEN:
                    return float(value)
        except TypeError:  # unhashable: a list or a dict
            found = None
        if found is None:
            raise _refuse(expected, value)
        return value if found is _AS_GIVEN else found

    return check


def _enum(tp: type[enum.Enum]) -> Checker:
    expected = f"{tp.__name__} ({' | '.join(repr(member.value) for member in tp)})"

    def check(value: Any) -> Any:
        if isinstance(value, tp):
            return value
        try:
            member = tp(value)  # by value (a Flag's combination, the class's _missing_, too)
        except (ValueError, TypeError):
            raise _refuse(expected, value) from None
        declared = type(member.value)
        if declared is type(value) or (declared is float and type(value) is int):
            return member
        raise _refuse(expected, value)  # found by equality across types: 1.0 or True for the member 1

    return check


@functools.cache
def _pydantic_own_errors() -> frozenset[str]:
    """The types of pydantic's own errors whose messages it writes itself (``greater than 0``): not
    ``value_error``/``assertion_error`` (a validator's exception text) nor a ``PydanticCustomError``'s type."""
    from pydantic_core.core_schema import ErrorType  # noqa: PLC0415 (pydantic imports: it checked the value)

    return frozenset(typing.get_args(ErrorType)) - {"value_error", "assertion_error"}


# The members of pydantic's error contexts that come from the type (a Literal's values, the expected tags, a
# pattern, a bound): sent as pydantic wrote them, as the built-in checker's ``expected`` is. Any other (a
# discriminated union's tag, a parser's or an exception's text) may carry the input, and is cut where the
# message holds it, as ``got`` is.
_PYDANTIC_TYPE_CONTEXT = frozenset(
    {
        "class",
        "class_name",
        "decimal_places",
        "discriminator",
        "encoding",
        "expected",
        "expected_plural",
        "expected_schemes",
        "expected_tags",
        "expected_version",
        "field_type",
        "ge",
        "gt",
        "le",
        "lt",
        "max_digits",
        "max_length",
        "method_name",
        "min_length",
        "multiple_of",
        "pattern",
        "tz_expected",
        "whole_digits",
    }
)


def _from_pydantic(error: Any, where: str) -> Error:
    kind = error.get("type")
    message = str(error.get("msg", ""))
    path: Any = ()
    for segment in reversed(error.get("loc", ())):
        path = (_segment(segment), path)
    if kind == "missing":
        got = "missing"
        message = "a value"
    else:
        got = _got(error.get("input"))
    if kind == "extra_forbidden":
        message = "no such member"
    elif kind not in _pydantic_own_errors():
        # The text of an exception raised by a validator (user code): not sent, as an exception's text is not
        # with expose_errors=False; logged (DEBUG: a caller can cause any number of them).
        _log.debug("methods(): %s: at %s, a validator refused the value: %s", where, _segments(path), message)
        message = "a valid value"
    else:
        for key, value in (error.get("ctx") or {}).items():
            text = str(value)
            if key not in _PYDANTIC_TYPE_CONTEXT and len(text) > GOT_LENGTH:
                message = message.replace(text, cut(text))
        if message.startswith("Input should be "):
            message = message[len("Input should be ") :]
    return (path, message, got)


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
        if kind in _PLAIN:
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


def _dump_top(value: Any) -> Any:
    """Without a return annotation: only a dataclass or a model at the top is converted."""
    if type(value) in _PLAIN:
        return value
    if hasattr(type(value), "__pydantic_validator__") or (
        dataclasses.is_dataclass(value) and not isinstance(value, type)
    ):
        return dump(value)
    return value


def _needs_dump(tp: Any, globalns: dict[str, Any], seen: set[int]) -> bool:
    """Whether a result of type ``tp`` may hold something the encoder does not take."""
    if isinstance(tp, (str, typing.ForwardRef)):
        try:
            tp = _Compiler(globalns, "").resolve(tp)
        except Exception:
            return True
    if id(tp) in seen:
        return False
    seen.add(id(tp))
    if tp is None or tp is type(None) or tp in _PLAIN or tp is Any or tp is object:
        return False
    if tp in _SEQUENCES or tp in _MAPPINGS:
        return False
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Literal:
        return any(isinstance(arg, enum.Enum) for arg in args)
    if origin is typing.Annotated:
        return _needs_dump(args[0], globalns, seen)
    if origin is typing.Union or origin is types.UnionType or origin in _SEQUENCES or origin in _MAPPINGS:
        return any(_needs_dump(arg, globalns, seen) for arg in args)
    if isinstance(tp, type) and issubclass(tp, dict) and hasattr(tp, "__required_keys__"):
        try:
            hints = typing.get_type_hints(tp)
        except Exception:
            return True
        return any(_needs_dump(hint, globalns, seen) for hint in hints.values())
    return True  # a dataclass, a model, an enum, a tuple, a set, or a type not known here


# --- one function ----------------------------------------------------------------------------------


class Typed:
    """What ``methods()`` compiled from one function's annotations.

    ``signature`` is the function's, its annotations resolved (a string evaluated; one that does not
    evaluate left as it is); ``returns`` the resolved return annotation (``inspect.Parameter.empty`` when
    absent).
    """

    __slots__ = (
        "active",
        "checks",
        "dump",
        "exact",
        "named",
        "positional",
        "returns",
        "signature",
        "var_named",
        "var_positional",
    )

    def __init__(
        self, function: Callable[..., Any], signature: inspect.Signature, where: str, localns: dict[str, Any] | None
    ) -> None:
        unwrapped = inspect.unwrap(function)
        globalns = dict(getattr(unwrapped, "__globals__", {}))
        compiler = _Compiler(globalns, where, localns)
        try:
            hints = typing.get_type_hints(function, localns=localns, include_extras=True)
        except Exception:
            hints = {}
        self.positional: list[tuple[str, Checker | None]] = []
        self.named: dict[str, Checker] = {}
        self.var_positional: tuple[str, Checker] | None = None
        self.var_named: Checker | None = None
        parameters = []
        kind = inspect.Parameter
        for declared in signature.parameters.values():
            annotation = hints.get(declared.name, declared.annotation)
            checker = None
            parameter = declared
            if annotation is not _EMPTY:
                compiler.where = f"{where}, parameter {declared.name!r}"
                checker = compiler.checker(annotation)
                parameter = declared.replace(annotation=compiler.safe(annotation))
            parameters.append(parameter)
            if parameter.kind in (kind.POSITIONAL_ONLY, kind.POSITIONAL_OR_KEYWORD):
                self.positional.append((parameter.name, checker))
            if parameter.kind in (kind.POSITIONAL_OR_KEYWORD, kind.KEYWORD_ONLY) and checker is not None:
                self.named[parameter.name] = checker
            if parameter.kind is kind.VAR_POSITIONAL and checker is not None:
                self.var_positional = (parameter.name, checker)
            if parameter.kind is kind.VAR_KEYWORD:
                self.var_named = checker
        # The annotated positional parameters: (index, name, checker).
        self.checks: list[tuple[int, tuple[Any, ...], Checker]] = [
            (index, (name,), checker) for index, (name, checker) in enumerate(self.positional) if checker
        ]
        # The type of each parameter's value when all of them are scalars, each named once (the fast path).
        exact = (
            [_EXACT.get(checker) for _, checker in self.positional] if len(parameters) == len(self.positional) else []
        )
        self.exact = tuple(exact) if exact and None not in exact else None
        returns = hints.get("return", signature.return_annotation)
        self.returns = compiler.safe(returns)
        self.signature = signature.replace(parameters=parameters, return_annotation=self.returns)
        if returns is _EMPTY or self.returns is Any or self.returns is object:
            self.dump: Callable[[Any], Any] | None = _dump_top
        else:
            self.dump = dump if _needs_dump(self.returns, globalns, set()) else None
        self.active = bool(
            self.dump is not None
            or self.var_positional is not None
            or self.var_named is not None
            or self.named
            or any(checker is not None for _, checker in self.positional)
        )
        """Whether a call checks or converts anything (a function annotated ``-> int`` alone does not)."""
        for note in compiler.notes:
            _log.warning("methods(): %s", note)

    def check(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The arguments the function receives, or :class:`InvalidParams` with every error found."""
        errors = None
        if args:
            given = len(args)
            checks: Iterable[tuple[int, tuple[Any, ...], Checker]] = self.checks
            count = len(self.positional)
            if given > count and self.var_positional is not None:  # *args: (name, index among them) in path
                name, rest = self.var_positional
                # Made as the loop goes (it stops at MAX_ERRORS errors).
                checks = itertools.chain(
                    checks, ((index, (name, index - count), rest) for index in range(count, given))
                )
            out = None  # a copy only when a value was converted
            for index, path, checker in checks:
                if index >= given:
                    break  # missing: the binding says so
                value = args[index]
                try:
                    checked = checker(value)
                except _Invalid as exc:
                    errors = _under(path, exc, errors)
                    if len(errors) >= MAX_ERRORS:
                        break  # no more are sent (a long *args): the rest is not looked at
                    continue
                if checked is not value:
                    if out is None:
                        out = list(args)
                    out[index] = checked
            if out is not None:
                args = tuple(out)
        if kwargs:
            named = self.named
            var_named = self.var_named
            converted = None
            for key, value in kwargs.items():
                found = named.get(key, var_named)
                if found is None:
                    continue
                try:
                    checked = found(value)
                except _Invalid as exc:
                    errors = _under((key,), exc, errors)
                    if len(errors) >= MAX_ERRORS:
                        break  # no more are sent (a long **kwargs): the rest is not looked at
                    continue
                if checked is not value:
                    if converted is None:
                        converted = dict(kwargs)
                    converted[key] = checked
            if converted is not None:
                kwargs = converted
        if errors:
            if len(errors) < MAX_ERRORS:  # the params that do not fit the function too, in the same list
                errors.extend(binding_errors(self.signature, args, kwargs))
            raise InvalidParams(data=errors[:MAX_ERRORS])
        return args, kwargs

    def wrap(self, function: Callable[..., Any]) -> Callable[..., Any]:
        """``function`` called with its arguments checked and its result converted (a sync function)."""
        check = self.check
        convert = self.dump
        exact = self.exact
        names = tuple(name for name, _ in self.positional)
        if exact is not None and convert is None:
            # Every parameter is a scalar (int, str, bool, float, None) and every value of exactly its type
            # (one comparison of the values' types): nothing to convert, nothing to refuse. Else the full check.
            def scalars(*args: Any, **kwargs: Any) -> Any:
                if kwargs:
                    if not args and tuple(map(type, kwargs.values())) == exact and tuple(kwargs) == names:
                        return function(**kwargs)
                elif tuple(map(type, args)) == exact:
                    return function(*args)
                args, kwargs = check(args, kwargs)
                return function(*args, **kwargs)

            return scalars
        if convert is None:

            def checked(*args: Any, **kwargs: Any) -> Any:
                args, kwargs = check(args, kwargs)
                return function(*args, **kwargs)

            return checked

        def converted(*args: Any, **kwargs: Any) -> Any:
            args, kwargs = check(args, kwargs)
            return convert(function(*args, **kwargs))

        return converted

    async def later(self, function: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """An async registry's call whose result is converted (the arguments already checked)."""
        if inspect.iscoroutinefunction(function):
            result = await function(*args, **kwargs)
        else:
            result = await asyncio.to_thread(function, *args, **kwargs)
        return self.dump(result) if self.dump is not None else result


def binding_errors(signature: inspect.Signature, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[dict[str, Any]]:
    """The params that do not fit ``signature``, as ``data`` lists errors (at most :data:`MAX_ERRORS`): an argument
    beyond the last positional parameter (``path`` its index: ``[2]``), a name no parameter takes (``[name]``,
    ``no such parameter``), a parameter without default left out (``got`` ``missing``, ``expected`` its
    annotation or ``a value``)."""
    kind = inspect.Parameter
    parameters = list(signature.parameters.values())
    positional = [
        parameter for parameter in parameters if parameter.kind in (kind.POSITIONAL_ONLY, kind.POSITIONAL_OR_KEYWORD)
    ]
    # The names a parameter takes, each with its position (None: keyword-only).
    by_name: dict[str, int | None] = {
        parameter.name: index
        for index, parameter in enumerate(positional)
        if parameter.kind is kind.POSITIONAL_OR_KEYWORD
    }
    by_name.update((parameter.name, None) for parameter in parameters if parameter.kind is kind.KEYWORD_ONLY)
    var_positional = any(parameter.kind is kind.VAR_POSITIONAL for parameter in parameters)
    var_named = any(parameter.kind is kind.VAR_KEYWORD for parameter in parameters)
    errors: list[dict[str, Any]] = []
    if not var_positional:  # range(), not a slice: a long list is not copied
        for index in range(len(positional), min(len(args), len(positional) + MAX_ERRORS)):
            errors.append({"path": [index], "expected": "no such parameter", "got": _got(args[index])})
    reported: set[str] = set()
    for key, value in kwargs.items():
        if len(errors) >= MAX_ERRORS:
            break
        if key in by_name:
            position = by_name[key]
            if position is not None and position < len(args):  # by position too (methods() passes one or the other)
                errors.append({"path": [_segment(key)], "expected": "one value", "got": _got(value)})
            continue
        if var_named:
            continue
        if any(parameter.name == key for parameter in positional):
            expected = "given by position"
            reported.add(key)
        else:
            expected = "no such parameter"
        errors.append({"path": [_segment(key)], "expected": expected, "got": _got(value)})
    for index, parameter in enumerate(parameters):
        if len(errors) >= MAX_ERRORS:
            break
        if parameter.default is not _EMPTY or parameter.kind in (kind.VAR_POSITIONAL, kind.VAR_KEYWORD):
            continue
        if parameter.kind is kind.KEYWORD_ONLY:
            given = parameter.name in kwargs
        else:
            given = index < len(args) or (parameter.kind is not kind.POSITIONAL_ONLY and parameter.name in kwargs)
        if not given and parameter.name not in reported:
            annotation = parameter.annotation
            expected = (
                "a value"
                if annotation is _EMPTY
                else annotation
                if isinstance(annotation, str)
                else describe(annotation)
            )
            errors.append({"path": [parameter.name], "expected": expected, "got": "missing"})
    return errors[:MAX_ERRORS]


def compile_function(
    function: Callable[..., Any], signature: inspect.Signature | None, name: str, localns: dict[str, Any] | None = None
) -> Typed | None:
    """A function's :class:`Typed`, or ``None`` when it has no annotation (or no signature). ``localns``: the
    names of the scope that registers it (a class defined in a function, named in a string annotation)."""
    if signature is None:
        return None
    if signature.return_annotation is _EMPTY and all(
        parameter.annotation is _EMPTY for parameter in signature.parameters.values()
    ):
        return None
    return Typed(function, signature, f"method {name!r}", localns)

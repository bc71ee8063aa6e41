"""Typed handlers' constraints: the JSON Schema keywords of an ``Annotated`` dict, checked.

``Annotated[int, {"minimum": 1}]`` advertises ``minimum`` in the schemas (``rpcwire._schema``); the checker
enforces it. A keyword applies, as JSON Schema says, to a value of its JSON type only (``minLength`` to a
string...), checked on the value as it came. The validation keywords not enforced here are not advertised either,
and a warning says so when the function is registered; any other member (``title``, ``description``,
``examples``, ``format``, an unknown name) is an annotation, advertised and not checked, as in JSON Schema.
"""

from __future__ import annotations

import collections.abc
import math
import re
from collections.abc import Callable
from typing import Any

from rpcwire._typed import Invalid, cut, got
from rpcwire._typed_leaves import literal

__all__ = ["ENFORCED", "constraints", "keywords_check"]

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
    check = literal(None, values, expected)

    def holds(value: Any) -> bool:
        try:
            check(value)
        except Invalid:
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


def keywords_check(keywords: dict[str, Any]) -> Callable[[Any], None] | None:
    """A check of the enforced ``keywords`` (raising ``Invalid`` with one error per keyword a value breaks), or
    ``None`` when there is none."""
    if not keywords:
        return None
    tests = [_keyword(keyword, bound) for keyword, bound in keywords.items()]

    def check(value: Any) -> None:
        errors = [
            ((), expected, got(value)) for applies, holds, expected in tests if applies(value) and not holds(value)
        ]
        if errors:
            raise Invalid(errors)

    return check

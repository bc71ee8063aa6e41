"""Typed handlers' leaves: one rule for scalars, ``Literal`` values and ``Enum`` members.

A value is accepted where its JSON type is the one declared (the type, or a ``Literal`` value's or an ``Enum``
member value's type), with no coercion: a bool is not an int (nor 1 a True), a float is not an int (1.0 is not the
member 1), a number is not a str. The one widening: an int where a float is declared, JSON having one number
type; the function then receives the float (the member, for an ``Enum``), as pydantic gives it. Past 1.8e308 an
int is refused where a float is declared (no float holds it).

A leaf is a plain function (``rpcwire._typed.Checker``): the value the function receives, or
``rpcwire._typed.Invalid`` raised.
"""

from __future__ import annotations

import contextlib
import enum
from typing import Any

from rpcwire._typed import Checker, describe, refuse

__all__ = ["EXACT", "SIMPLE", "check_none", "enum_leaf", "literal"]


def _int(value: Any) -> Any:
    if type(value) is int or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise refuse("int", value)


def _float(value: Any) -> Any:
    if type(value) is float:
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return float(value)  # an int where a float is declared: the float, as pydantic gives it
        except OverflowError:  # past 1.8e308: no float holds it
            raise refuse(_FINITE, value) from None
    raise refuse("float", value)


_FINITE = "float (a number of at most 1.8e308)"


def _str(value: Any) -> Any:
    if isinstance(value, str):
        return value
    raise refuse("str", value)


def _bool(value: Any) -> Any:
    if value is True or value is False:
        return value
    raise refuse("bool", value)


def check_none(value: Any) -> Any:
    if value is None:
        return value
    raise refuse("None", value)


SIMPLE: dict[Any, Checker] = {int: _int, float: _float, str: _str, bool: _bool}
EXACT: dict[Checker | None, type] = {_int: int, _float: float, _str: str, _bool: bool, check_none: type(None)}
_AS_GIVEN = object()


def literal(tp: Any, args: tuple[Any, ...], expected: str | None = None) -> Checker:
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
            raise refuse(expected, value)
        return value if found is _AS_GIVEN else found

    return check


def enum_leaf(tp: type[enum.Enum]) -> Checker:
    expected = f"{tp.__name__} ({' | '.join(repr(member.value) for member in tp)})"

    def check(value: Any) -> Any:
        if isinstance(value, tp):
            return value
        try:
            member = tp(value)  # by value (a Flag's combination, the class's _missing_, too)
        except (ValueError, TypeError):
            raise refuse(expected, value) from None
        declared = type(member.value)
        if declared is type(value) or (declared is float and type(value) is int):
            return member
        raise refuse(expected, value)  # found by equality across types: 1.0 or True for the member 1

    return check

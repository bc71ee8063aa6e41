"""Typed handlers' bridge to pydantic: a type the built-in checker does not know, checked by pydantic, and
pydantic's errors said as the built-in checker says its own.

The value is given to ``TypeAdapter(...).validate_json`` as the JSON it came as, in strict mode (the built-in
checker's rule, no coercion, inside a model as at the top; what JSON writes as a string, a datetime or a UUID,
read as JSON mode reads it). pydantic's message becomes ``expected`` without its leading "Input should be "; a part
of it that may come from the input (a discriminated union's tag, a parser's text) is cut to ``GOT_LENGTH``
characters as ``got`` is; a validator's own message (user code) is sent as ``"a valid value"`` and logged at
DEBUG instead. Nothing here imports pydantic before a type needs it.
"""

from __future__ import annotations

import functools
import json
import logging
import typing
from typing import Any

from rpcwire._typed import GOT_LENGTH, MAX_ERRORS, Checker, Error, Invalid, cut, got, path_segments, segment

__all__ = ["checker"]

_log = logging.getLogger("rpcwire")

# A value pydantic checks is given to it as the JSON it came as (see the module doc). Compact: the text is only
# pydantic's input.
_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
# What the text a value was written as cannot be read for (its parser's nesting limit, 200 levels in pydantic-core).
_TOO_DEEP = "a value nested less deeply (pydantic reads JSON up to its own depth limit)"


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
    for part in reversed(error.get("loc", ())):
        path = (segment(part), path)
    if kind == "missing":
        said = "missing"
        message = "a value"
    else:
        said = got(error.get("input"))
    if kind == "extra_forbidden":
        message = "no such member"
    elif kind not in _pydantic_own_errors():
        # The text of an exception raised by a validator (user code): not sent, as an exception's text is not
        # with expose_errors=False; logged (DEBUG: a caller can cause any number of them).
        _log.debug("methods(): %s: at %s, a validator refused the value: %s", where, path_segments(path), message)
        message = "a valid value"
    else:
        for key, value in (error.get("ctx") or {}).items():
            text = str(value)
            if key not in _PYDANTIC_TYPE_CONTEXT and len(text) > GOT_LENGTH:
                message = message.replace(text, cut(text))
        if message.startswith("Input should be "):
            message = message[len("Input should be ") :]
    return (path, message, said)


def checker(adapter: Any, where: str) -> Checker:
    """The leaf of a type pydantic checks through ``adapter`` (its ``TypeAdapter``); ``where`` names the parameter
    in the log line of a validator's refusal."""
    import pydantic  # noqa: PLC0415 (imported already: the adapter is pydantic's)

    validate_json = adapter.validate_json
    validate = adapter.validate_python
    validation_error = pydantic.ValidationError

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
                raise Invalid([((), _TOO_DEEP, got(value))]) from None
            raise Invalid([_from_pydantic(error, where) for error in errors]) from None

    return check

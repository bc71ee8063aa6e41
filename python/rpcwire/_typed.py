"""Typed handlers: ``methods()`` checks a function's arguments against its parameters' annotations.

``compile_function(function, signature)`` runs once, when the function is registered: it resolves the
annotations (strings too, ``from __future__ import annotations``) and builds one checker per annotated
parameter. A checker takes a value decoded from JSON and gives back the value the function receives (the
same object, or a converted one: a dataclass instance, a tuple, an enum member, a pydantic model), or raises
``_Invalid`` with its errors. A function with no annotation at all gets no :class:`Typed` and is called as
before (``methods()``' fast path).

Built in, with no dependency: ``int`` (not ``bool``), ``float`` (an ``int`` is accepted and passed as given:
JSON has one number type), ``str``, ``bool``, ``None``, ``Any``/``object``, ``list[X]`` (and ``Sequence[X]``),
``tuple[X, Y]``/``tuple[X, ...]`` (a tuple), ``set[X]``/``frozenset[X]``, ``dict[str, X]`` (and
``Mapping``), ``X | Y``/``Optional``/``Union`` (the first alternative that accepts), ``Literal``, ``TypedDict``
(required and optional keys; other keys pass as they came), dataclasses (a JSON object becomes the instance,
nested; an unknown member is refused), ``Enum`` (by value), ``NewType`` and ``Annotated`` (its base type,
unless its metadata are pydantic's or annotated-types' constraints).

Anything else (a pydantic model, ``datetime``, ``Annotated[int, Field(gt=0)]``, ``conint(...)``): pydantic's
``TypeAdapter(...).validate_python`` when pydantic imports, in its default (lax) mode; without pydantic, or a
type pydantic cannot build a schema for, the value is passed unchecked and one warning says so on the
``rpcwire`` logger when the function is registered. The checking of a parameter is the same whether pydantic
is installed or not whenever the built-in checker handles its type.

A failure is :class:`InvalidParams` (-32602) whose ``data`` is a list (at most :data:`MAX_ERRORS`) of
``{"path": [...], "expected": "...", "got": "..."}``: ``path`` starts with the parameter's name (then list
indexes and member names, each name or key cut to :data:`GOT_LENGTH` characters), ``expected`` describes the
type (pydantic's message without its leading "Input should be "; ``"a valid value"`` for a validator's own
message, logged at DEBUG instead), ``got`` is ``"missing"``, a short ``repr`` of a scalar (at most
:data:`GOT_LENGTH` characters) or the type's name of anything else (``"list"``, ``"dict"``): never the input
echoed back whole. The checking stops once :data:`MAX_ERRORS` errors are found.

Return annotations are not checked; they only say how a result is converted for the encoder (dataclasses to
dicts without a deep copy, pydantic models by ``model_dump(mode="json")``, enums to their values, tuples and
sets to lists): walked through when the annotation names a dataclass, a model, an enum, a tuple or a set (or
a type the checker does not know); when it is absent or ``Any``, only a dataclass or model returned at the
top is converted; when it names JSON types only, the result goes to the encoder as it is.
"""

from __future__ import annotations

import asyncio
import collections.abc
import dataclasses
import enum
import functools
import inspect
import itertools
import logging
import types
import typing
from collections.abc import Callable, Iterable
from typing import Any

from rpcwire._types import InvalidParams

__all__ = ["GOT_LENGTH", "MAX_ERRORS", "Typed", "compile_function"]

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


class _Invalid(Exception):
    """A checker's refusal: its errors' paths are relative to the value it was given."""

    def __init__(self, errors: list[dict[str, Any]]) -> None:
        super().__init__()
        self.errors = errors


def _cut(text: str) -> str:
    return text if len(text) <= GOT_LENGTH else text[: GOT_LENGTH - 1] + "…"


def _got(value: Any) -> str:
    if value is None or type(value) in (bool, int, float, str):
        return _cut(repr(value))
    return type(value).__name__


def _segment(key: Any) -> Any:
    """A path's segment: a name or a key (from the input: cut as ``got`` is), or an index."""
    return _cut(key) if type(key) is str else key


def _refuse(expected: str, value: Any) -> _Invalid:
    return _Invalid([{"path": [], "expected": expected, "got": _got(value)}])


def _under(segments: tuple[Any, ...], exc: _Invalid, errors: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """``exc``'s errors moved under ``segments`` (a path), added to ``errors``."""
    segments = tuple(map(_segment, segments))
    for error in exc.errors:
        error["path"][0:0] = segments
    if errors is None:
        return exc.errors
    errors.extend(exc.errors)
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
    if origin is typing.Literal:
        return " | ".join(repr(arg) for arg in args)
    if origin is typing.Annotated:
        return describe(args[0])
    if origin is not None and args:
        return f"{getattr(origin, '__name__', repr(origin))}[{', '.join(describe(arg) for arg in args)}]"
    if isinstance(tp, type):
        return tp.__name__
    return repr(tp).replace("typing.", "")


class _Compiler:
    """Builds the checkers of one function (``globalns`` resolves the strings among its annotations)."""

    def __init__(self, globalns: dict[str, Any], where: str, localns: dict[str, Any] | None = None) -> None:
        self.globalns = globalns
        self.localns = localns
        self.where = where
        self.notes: list[str] = []
        self.done: dict[Any, Checker | None] = {}  # dataclasses and TypedDicts met, for recursive types

    def resolve(self, tp: Any) -> Any:
        if isinstance(tp, typing.ForwardRef):
            tp = tp.__forward_arg__
        if isinstance(tp, str):
            tp = eval(tp, self.globalns, self.localns)
        return tp

    def checker(self, tp: Any) -> Checker | None:
        """The checker of ``tp``, or ``None`` when every value is accepted as it is."""
        try:
            tp = self.resolve(tp)
        except Exception as exc:
            self.notes.append(f"{self.where}: the annotation {tp!r} does not resolve ({exc!r}); not checked")
            return None
        try:
            hash(tp)
        except TypeError:  # an Annotated whose metadata do not hash, a Literal of a list...
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
        if origin is typing.Annotated:
            if any(type(meta).__module__.partition(".")[0] in _CONSTRAINT_MODULES for meta in tp.__metadata__):
                return self.pydantic(tp, f"the constraints of {describe(tp)}")
            return self.checker(args[0])
        if origin is typing.Union or origin is types.UnionType:
            return self.union(tp, args)
        if origin is typing.Literal:
            return _literal(tp, args)
        if tp in _SEQUENCES or origin in _SEQUENCES:
            return _list(tp, self.checker(args[0]) if args else None)
        if tp is tuple or origin is tuple:
            return self.tuple_of(tp, args)
        if tp in _SETS or origin in _SETS:
            return _set(tp, _SETS[origin or tp], self.checker(args[0]) if args else None)
        if tp in _MAPPINGS or origin in _MAPPINGS:
            if args and self.resolve(args[0]) is not str:
                return self.pydantic(tp, f"the keys of {describe(tp)}")
            return _dict(tp, self.checker(args[1]) if args else None)
        supertype = getattr(tp, "__supertype__", None)  # NewType
        if supertype is not None:
            return self.checker(supertype)
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

    def pydantic(self, tp: Any, what: str) -> Checker | None:
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
        validate = adapter.validate_python
        validation_error = pydantic.ValidationError
        where = self.where

        def check(value: Any) -> Any:
            try:
                return validate(value)
            except validation_error as exc:
                raise _Invalid(
                    [_from_pydantic(error, where) for error in exc.errors(include_url=False)[:MAX_ERRORS]]
                ) from None

        return check

    def fallback(self, tp: Any) -> Checker | None:
        """Without pydantic: the base type of an ``Annotated`` (or a dict's values), nothing for a class."""
        origin = typing.get_origin(tp)
        if origin is typing.Annotated:
            return self.checker(typing.get_args(tp)[0])
        if origin in _MAPPINGS:
            return _dict(tp, self.checker(typing.get_args(tp)[1]), keys=False)
        return None

    def union(self, tp: Any, args: tuple[Any, ...]) -> Checker | None:
        found = [self.checker(arg) for arg in args]
        checkers = [checker for checker in found if checker is not None]
        if len(checkers) < len(found):  # Any among them
            return None
        others = [checker for checker in checkers if checker is not _none]
        if len(others) == 1 and len(checkers) == 2:  # Optional[X]: X's own errors (their paths) when not None
            other = others[0]

            def optional(value: Any) -> Any:
                return None if value is None else other(value)

            return optional
        expected = describe(tp)

        def union(value: Any) -> Any:
            for checker in checkers:
                try:
                    return checker(value)
                except _Invalid:
                    pass
            raise _refuse(expected, value)

        return union

    def tuple_of(self, tp: Any, args: tuple[Any, ...]) -> Checker:
        expected = describe(tp)
        if not args or (len(args) == 2 and args[1] is Ellipsis):
            items = _list(tp, self.checker(args[0]) if args else None)

            def variable(value: Any) -> Any:
                return tuple(items(value))

            return variable
        if args == ((),):  # tuple[()]
            args = ()
        checkers = [self.checker(arg) for arg in args]
        length = len(checkers)

        def fixed(value: Any) -> Any:
            if not isinstance(value, (list, tuple)) or len(value) != length:
                raise _refuse(expected, value)
            out = list(value)
            errors = None
            for index, checker in enumerate(checkers):
                if checker is not None:
                    try:
                        out[index] = checker(out[index])
                    except _Invalid as exc:
                        errors = _under((index,), exc, errors)
            if errors:
                raise _Invalid(errors)
            return tuple(out)

        return fixed

    def dataclass(self, tp: type) -> Checker:
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

    def typed_dict(self, tp: type) -> Checker:
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

    def members(self, tp: type, members: list[tuple[str, Any, bool]], build: type | None) -> Checker:
        """The checker of a dataclass or a TypedDict of ``members`` (name, annotation, required)."""
        cell: list[Checker] = []
        self.done[tp] = _forward(cell)  # a member of the class's own type
        fields: dict[str, Checker | None] = {}
        required: list[tuple[str, str]] = []
        saved, self.where = self.where, f"{self.where} ({tp.__name__})"
        for key, annotation, is_required in members:
            fields[key] = self.checker(annotation)
            if is_required:
                required.append((key, describe(self.safe(annotation))))
        self.where = saved
        check = _object(tp, fields, required, build)
        cell.append(check)
        self.done[tp] = check
        return check

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


def _forward(cell: list[Checker]) -> Checker:
    """The checker that ``cell`` will hold once built (a recursive type)."""

    def forward(value: Any) -> Any:
        return cell[0](value)

    return forward


def _key_qualifier(annotation: Any) -> str | None:
    """``"Required"``, ``"NotRequired"`` or ``"ReadOnly"`` for a TypedDict key's qualifier, else ``None``. By
    name: ``typing``'s (3.11+) and ``typing_extensions``' (what 3.10 has) are different objects."""
    name = getattr(typing.get_origin(annotation), "_name", None)
    return name if name in ("Required", "NotRequired", "ReadOnly") else None


def _int(value: Any) -> Any:
    if type(value) is int or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise _refuse("int", value)


def _float(value: Any) -> Any:
    if type(value) is float or type(value) is int or (isinstance(value, (int, float)) and not isinstance(value, bool)):
        return value
    raise _refuse("float", value)


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


def _literal(tp: Any, args: tuple[Any, ...]) -> Checker:
    allowed = {(type(arg), arg) for arg in args}  # True is not 1
    expected = describe(tp)

    def check(value: Any) -> Any:
        try:
            if (type(value), value) in allowed:
                return value
        except TypeError:  # unhashable: a list or a dict
            pass
        raise _refuse(expected, value)

    return check


def _enum(tp: type[enum.Enum]) -> Checker:
    expected = f"{tp.__name__} ({' | '.join(repr(member.value) for member in tp)})"

    def check(value: Any) -> Any:
        if isinstance(value, tp):
            return value
        if not isinstance(value, bool):  # True would find the member of value 1
            try:
                return tp(value)
            except (ValueError, TypeError):
                pass
        raise _refuse(expected, value)

    return check


def _list(tp: Any, item: Checker | None) -> Checker:
    expected = describe(tp)

    def check(value: Any) -> Any:
        if not isinstance(value, list):
            raise _refuse(expected, value)
        return value if item is None else _elements(value, enumerate(value), item, list)

    return check


def _elements(value: Any, pairs: Any, item: Checker, copy: Callable[[Any], Any]) -> Any:
    """A list's or a dict's elements (``pairs``: index or key, element) checked; ``copy`` of it made only when
    an element was converted."""
    out = value
    errors = None
    for key, element in pairs:
        try:
            checked = item(element)
        except _Invalid as exc:
            errors = _under((key,), exc, errors)
            if len(errors) >= MAX_ERRORS:
                break
            continue
        if checked is not element:
            if out is value:
                out = copy(value)
            out[key] = checked
    if errors:
        raise _Invalid(errors)
    return out


def _set(tp: Any, kind: type, item: Checker | None) -> Checker:
    items = _list(tp, item)
    expected = describe(tp)

    def check(value: Any) -> Any:
        checked = items(value)
        try:
            return kind(checked)
        except TypeError:  # an unhashable element
            raise _refuse(expected, value) from None

    return check


def _dict(tp: Any, item: Checker | None, *, keys: bool = True) -> Checker:
    expected = describe(tp) if keys else "dict"

    def check(value: Any) -> Any:
        if not isinstance(value, dict) or (keys and not all(type(key) is str for key in value)):
            raise _refuse(expected, value)
        return value if item is None else _elements(value, value.items(), item, dict)

    return check


def _object(
    tp: type, fields: dict[str, Checker | None], required: list[tuple[str, str]], build: type | None
) -> Checker:
    """A JSON object's members checked by name: a TypedDict (``build`` None: the dict, other keys kept) or a
    dataclass (``build``: its instance, an unknown member refused)."""
    expected = describe(tp)

    def check(value: Any) -> Any:
        if build is not None and isinstance(value, build):
            return value
        if not isinstance(value, dict):
            raise _refuse(expected, value)
        out = value if build is None else {}
        errors: list[dict[str, Any]] = []
        for key, element in value.items():
            if key not in fields:
                if build is not None:
                    errors.append({"path": [_segment(key)], "expected": "no such member", "got": _got(element)})
                    if len(errors) >= MAX_ERRORS:
                        break  # no more are sent: the rest is not looked at
                continue
            checker = fields[key]
            checked = element
            if checker is not None:
                try:
                    checked = checker(element)
                except _Invalid as exc:
                    _under((key,), exc, errors)
                    if len(errors) >= MAX_ERRORS:
                        break
                    continue
            if build is not None:
                out[key] = checked
            elif checked is not element:
                if out is value:
                    out = dict(value)
                out[key] = checked
        for key, description in required:
            if len(errors) >= MAX_ERRORS:
                break
            if key not in value:
                errors.append({"path": [_segment(key)], "expected": description, "got": "missing"})
        if errors:
            raise _Invalid(errors[:MAX_ERRORS])
        return out if build is None else build(**out)

    return check


@functools.cache
def _pydantic_own_errors() -> frozenset[str]:
    """The types of pydantic's own errors whose messages it writes itself (``greater than 0``): not
    ``value_error``/``assertion_error`` (a validator's exception text) nor a ``PydanticCustomError``'s type."""
    from pydantic_core.core_schema import ErrorType  # noqa: PLC0415 (pydantic imports: it checked the value)

    return frozenset(typing.get_args(ErrorType)) - {"value_error", "assertion_error"}


def _from_pydantic(error: Any, where: str) -> dict[str, Any]:
    kind = error.get("type")
    message = str(error.get("msg", ""))
    path = [_segment(segment) for segment in error.get("loc", ())]
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
        _log.debug("methods(): %s: at %s, a validator refused the value: %s", where, path, message)
        message = "a valid value"
    elif message.startswith("Input should be "):
        message = message[len("Input should be ") :]
    return {"path": path, "expected": message, "got": got}


# --- results ---------------------------------------------------------------------------------------


def dump(value: Any) -> Any:
    """``value`` with its dataclasses, pydantic models, enums, tuples and sets turned into what JSON holds
    (the same object where nothing changed: no deep copy)."""
    kind = type(value)
    if kind in _PLAIN:
        if kind is list or kind is dict:
            out = value  # copied (list or dict alike) at the first element that changes
            for key, element in enumerate(value) if kind is list else value.items():
                converted = dump(element)
                if converted is not element:
                    if out is value:
                        out = kind(value)
                    out[key] = converted
            return out
        return value
    model_dump = getattr(value, "model_dump", None)
    if model_dump is not None and hasattr(kind, "__pydantic_validator__"):
        return model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {field.name: dump(getattr(value, field.name)) for field in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return dump(value.value)
    if isinstance(value, (tuple, set, frozenset)):
        return [dump(element) for element in value]
    return dump(dict(value)) if isinstance(value, dict) else value


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

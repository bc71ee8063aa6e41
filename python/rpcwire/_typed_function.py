"""Typed handlers' functions: what ``methods()`` compiles from one function's annotations, and what a call of it
does.

``compile_function(function, signature, name)`` runs once, when the function is registered: it resolves the
annotations and builds one checker per annotated parameter (``rpcwire._typed_compile``). A function with no
annotation at all gets no :class:`Typed` and is called as before (``methods()``' fast path).

A call's arguments are checked before the function runs; a failure is ``rpcwire.InvalidParams`` (-32602)
whose ``data`` lists every error found (``rpcwire._typed``: at most ``MAX_ERRORS``). Params that do not fit the
function are errors of the same list (:func:`binding_errors`): an argument past the last parameter (``path`` its
index), a name no parameter takes (``no such parameter``), a parameter left out (``got`` ``missing``).

Return annotations are not checked; they only say how a result is converted for the encoder (dataclasses to
dicts without a deep copy, pydantic models by ``model_dump(mode="json")``, enums to their values, tuples and
sets to lists: ``rpcwire._typed.dump``): walked through when the annotation names a dataclass, a model, an enum,
a tuple or a set (or a type the checker does not know); when it is absent or ``Any``, only a dataclass or model
returned at the top is converted; when it names JSON types only, the result goes to the encoder as it is.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import inspect
import itertools
import logging
import types
import typing
from collections.abc import Callable, Iterable
from typing import Any

from rpcwire._typed import MAX_ERRORS, PLAIN, Checker, Invalid, describe, dump, got, segment, under
from rpcwire._typed_compile import MAPPINGS, SEQUENCES, Compiler
from rpcwire._typed_leaves import EXACT
from rpcwire._types import InvalidParams

__all__ = ["Typed", "binding_errors", "compile_function"]

_log = logging.getLogger("rpcwire")

_EMPTY = inspect.Parameter.empty


def _dump_top(value: Any) -> Any:
    """Without a return annotation: only a dataclass or a model at the top is converted."""
    if type(value) in PLAIN:
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
            tp = Compiler(globalns, "").resolve(tp)
        except Exception:
            return True
    if id(tp) in seen:
        return False
    seen.add(id(tp))
    if tp is None or tp is type(None) or tp in PLAIN or tp is Any or tp is object:
        return False
    if tp in SEQUENCES or tp in MAPPINGS:
        return False
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Literal:
        return any(isinstance(arg, enum.Enum) for arg in args)
    if origin is typing.Annotated:
        return _needs_dump(args[0], globalns, seen)
    if origin is typing.Union or origin is types.UnionType or origin in SEQUENCES or origin in MAPPINGS:
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
        compiler = Compiler(globalns, where, localns)
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
            [EXACT.get(checker) for _, checker in self.positional] if len(parameters) == len(self.positional) else []
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
                except Invalid as exc:
                    errors = under(path, exc, errors)
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
                except Invalid as exc:
                    errors = under((key,), exc, errors)
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
            errors.append({"path": [index], "expected": "no such parameter", "got": got(args[index])})
    reported: set[str] = set()
    for key, value in kwargs.items():
        if len(errors) >= MAX_ERRORS:
            break
        if key in by_name:
            position = by_name[key]
            if position is not None and position < len(args):  # by position too (methods() passes one or the other)
                errors.append({"path": [segment(key)], "expected": "one value", "got": got(value)})
            continue
        if var_named:
            continue
        if any(parameter.name == key for parameter in positional):
            expected = "given by position"
            reported.add(key)
        else:
            expected = "no such parameter"
        errors.append({"path": [segment(key)], "expected": expected, "got": got(value)})
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

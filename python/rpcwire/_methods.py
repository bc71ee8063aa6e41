"""``methods()``: a handler built from plain functions, shared by both implementations.

``methods({"add": add})`` or ``registry = methods()`` with ``@registry.method`` (the function's name) and
``@registry.method("name")``. The registry is itself the handler ``(method, params)``: array params are
passed positionally, object params by name (the members the engine reads, MCP's ``_meta`` and LSP's
``workDoneToken``, only to a function that takes them, by name or ``**kwargs``), absent params as no
arguments. Whether the params fit the function is checked (``inspect.signature(...).bind``; for a sync function
only once its call raised ``TypeError``: params that do not fit raise it before the function's body runs): when
they do not, the answer is -32602 whose ``data`` lists what does not fit, as a typed function's errors are
listed (``rpcwire._typed_function.binding_errors``: ``{"path": ["b"], "expected": "int", "got": "missing"}``); an
exception raised inside the function is answered as any handler's (a ``TypeError`` there is -32603, never
-32602). An unknown method is -32601.

``async def`` functions: once the registry holds one, it is an async handler (``rpcwire_async``, which the
engine reads, as ``inspect.iscoroutinefunction`` cannot be told so before Python 3.12): ``serve`` runs it on
an event loop and every call returns an awaitable, an ``async def`` function's coroutine, or for a plain
function ``asyncio.to_thread`` of it (never run on the loop).

The registry describes itself from its functions (``_schema.py``): ``openrpc()`` (with ``discover=True`` also
the answer to ``rpc.discover``) and ``mcp_tools()``.

Annotations (``rpcwire._typed_function``): a function with any annotation has its arguments checked against them before
it is called (-32602 with the errors in ``data``) and receives them converted (dataclasses, tuples, enums,
pydantic models); its result is converted for the encoder (dataclasses, pydantic models). Compiled once in
``add()``; a function without annotations is called exactly as before. Missing or extra arguments are checked
as above, after the types, and listed after their errors in the same answer.
"""

from __future__ import annotations

import asyncio
import inspect
import sys
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, overload

from rpcwire._schema import mcp_tool, openrpc_document
from rpcwire._typed import cut
from rpcwire._typed_function import Typed, binding_errors, compile_function
from rpcwire._types import InvalidParams, MethodNotFound

__all__ = ["Methods", "methods"]

F = TypeVar("F", bound=Callable[..., Any])

# The members the engine reads (MCP's _meta, LSP's progress token): not every function declares them.
_RESERVED = frozenset({"_meta", "workDoneToken"})


class Methods:
    """A handler calling the function registered under the request's method name (see :func:`methods`)."""

    __slots__ = (
        "_calls",
        "_discover_info",
        "_discovered",
        "_dropped",
        "_functions",
        "_signatures",
        "_typed",
        "rpcwire_async",
    )

    rpcwire_async: bool
    """Whether any function is ``async def``: the engine then treats the registry as an async handler."""

    def __init__(
        self, functions: Mapping[str, Callable[..., Any]] | None = None, *, discover: bool | Mapping[str, Any] = False
    ) -> None:
        self._functions: dict[str, Callable[..., Any]] = {}
        self._signatures: dict[str, inspect.Signature | None] = {}
        self._dropped: dict[str, frozenset[str]] = {}  # the reserved members a function does not take
        # A function's annotations compiled (None without any); its signature has them resolved.
        self._typed: dict[str, Typed | None] = {}
        self._calls: dict[str, Callable[..., Any]] = {}  # what a sync call calls: the function or its checker
        self.rpcwire_async = False
        # rpc.discover's document info (discover=True: openrpc()'s defaults; a mapping: the Info Object).
        self._discover_info: dict[str, Any] | None = None
        self._discovered: dict[str, Any] | None = None  # rpc.discover's answer, until a function is added
        if discover:
            self._discover_info = dict(discover) if isinstance(discover, Mapping) else {}
            self.add(self._rpc_discover, "rpc.discover")
        for name, function in (functions or {}).items():
            self.add(function, name)

    def add(self, function: Callable[..., Any], name: str | None = None) -> None:
        """Register ``function`` under ``name`` (default: its ``__name__``); a name registered again is replaced."""
        if not callable(function):
            raise TypeError(f"{function!r} is not callable")
        self._discovered = None
        name = function.__name__ if name is None else name
        if not isinstance(name, str):
            raise TypeError(f"a method name is a str, not {type(name).__name__}")
        try:
            signature: inspect.Signature | None = inspect.signature(function)
        except (TypeError, ValueError):  # some builtins have none: called as given, unchecked
            signature = None
        typed = compile_function(function, signature, name, _caller_locals())
        self._functions[name] = function
        self._signatures[name] = signature
        self._typed[name] = typed
        self._calls[name] = function if typed is None or not typed.active else typed.wrap(function)
        takes_any = signature is None or any(
            parameter.kind is inspect.Parameter.VAR_KEYWORD for parameter in signature.parameters.values()
        )
        self._dropped[name] = frozenset() if takes_any or signature is None else _RESERVED - set(signature.parameters)
        self.rpcwire_async = any(inspect.iscoroutinefunction(f) for f in self._functions.values())

    @overload
    def method(self, name_or_function: F) -> F: ...
    @overload
    def method(self, name_or_function: str) -> Callable[[F], F]: ...
    def method(self, name_or_function: Any) -> Any:
        """Decorator: ``@registry.method`` registers under the function's name, ``@registry.method("x")`` as ``x``."""
        if isinstance(name_or_function, str):
            name = name_or_function

            def register(function: F) -> F:
                self.add(function, name)
                return function

            return register
        self.add(name_or_function)
        return name_or_function

    def __contains__(self, name: object) -> bool:
        return name in self._functions

    def __repr__(self) -> str:
        return f"methods({sorted(self._functions)!r})"

    def __call__(self, method: str, params: Any) -> Any:
        function = self._calls.get(method)
        if function is None:
            raise MethodNotFound()
        args: tuple[Any, ...] = tuple(params) if isinstance(params, list) else ()
        kwargs: dict[str, Any] = params if isinstance(params, dict) else {}
        dropped = self._dropped[method]
        if kwargs and not dropped.isdisjoint(kwargs):
            kwargs = {name: value for name, value in kwargs.items() if name not in dropped}
        signature = self._signatures[method]
        if self.rpcwire_async:
            function = self._functions[method]
            typed = self._typed[method]
            if typed is not None and typed.active:
                args, kwargs = typed.check(args, kwargs)
            if signature is not None:  # before the call: a coroutine (or a thread) runs the body later
                _bind(signature if typed is None else typed.signature, args, kwargs)
            if typed is not None and typed.dump is not None:
                return typed.later(function, args, kwargs)
            if inspect.iscoroutinefunction(function):
                return function(*args, **kwargs)
            return asyncio.to_thread(function, *args, **kwargs)
        # A sync function is called first, the binding checked only when the call raises TypeError: arguments
        # that do not bind raise it before the function's body runs (a decorator's wrapper runs first; its
        # function then raises it). signature.bind would be most of methods()' cost on every call; a TypeError
        # from inside the function binds, and is raised again as it is (-32603).
        try:
            return function(*args, **kwargs)
        except TypeError:
            if signature is not None:
                typed = self._typed[method]
                _bind(signature if typed is None else typed.signature, args, kwargs)
            raise

    def openrpc(self, *, title: str | None = None, version: str | None = None, **info: Any) -> dict[str, Any]:
        """This registry as an OpenRPC 1.3 document (a dict, ready for ``json.dumps``).

        One Method Object per function, in the order registered: params from its parameters (their schemas
        from the annotations, ``required`` when without default), ``result`` from the return annotation,
        ``summary``/``description`` and the params' descriptions from the docstring, ``paramStructure``
        (``by-position`` for positional-only parameters, ``by-name`` for keyword-only ones, else ``either``),
        and -32602 in ``errors`` for a method with params. Classes' schemas are in ``components.schemas``.
        ``title``, ``version`` and any other member of OpenRPC's Info Object (``description``, ``contact``...)
        make ``info``; by default those given as ``discover=``, else "JSON-RPC service" and "0.0.0".
        """
        given = {"title": title, "version": version, **info}
        merged = {"title": "JSON-RPC service", "version": "0.0.0", **(self._discover_info or {})}
        merged.update({key: value for key, value in given.items() if value is not None})
        return openrpc_document(self._functions.items(), merged, discover=self._rpc_discover)

    def mcp_tools(self) -> list[dict[str, Any]]:
        """The functions as MCP tools, as ``tools/list`` lists them (see ``rpcwire.mcp.tools``)."""
        # rpc.* names are JSON-RPC's system extensions (rpc.discover), not tools.
        return [mcp_tool(name, function) for name, function in self._functions.items() if not name.startswith("rpc.")]

    def _rpc_discover(self) -> dict[str, Any]:
        # rpc.discover (discover=True): the OpenRPC document, built once per set of functions (any caller may ask,
        # and building it makes a schema of every annotation); nothing writes to it once built.
        if self._discovered is None:
            self._discovered = self.openrpc()
        return self._discovered


def _caller_locals() -> dict[str, Any] | None:
    """The local names of the code that registers a function (outside this module): a class defined in a
    function and named in a string annotation resolves, as pydantic resolves its models' annotations."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__") == __name__:
        frame = frame.f_back  # type: ignore[assignment]
    return None if frame is None or frame.f_locals is frame.f_globals else dict(frame.f_locals)


def _bind(signature: inspect.Signature, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    try:
        signature.bind(*args, **kwargs)
    except TypeError as exc:
        # The params that do not fit, as a typed function's errors are listed (a name from the input cut as in
        # their paths); a case binding_errors does not see (none with params of one kind) in the same shape.
        errors = binding_errors(signature, args, kwargs) or [
            {"path": [], "expected": "params that fit the function", "got": cut(str(exc))}
        ]
        raise InvalidParams(data=errors) from None


def methods(
    functions: Mapping[str, Callable[..., Any]] | None = None, *, discover: bool | Mapping[str, Any] = False
) -> Methods:
    """A handler from ``{"name": function}`` (or empty, to fill with ``@registry.method``).

    ``discover=True`` also answers OpenRPC's ``rpc.discover`` with ``registry.openrpc()``; a mapping instead
    gives that document's ``info`` (``{"title": "calculator", "version": "1.2.0"}``).
    """
    return Methods(functions, discover=discover)

"""The call the sequential ``serve`` is making, for ``current_request()``: the twin of ``src/current.rs``.

The native loop notes only where a call's pieces are and makes its ``RequestContext`` the first time a handler
asks (``rpcwire._context``). The pure core's sequential loop (the engine's) makes each call's context before
it calls the handler, and ``current_request()`` finds it there (``rpcwire._context.running_request``): no call
is ever pending without its context, so these name none.
"""

from __future__ import annotations

from typing import Any

from rpcwire._types import Request

__all__ = ["current_call", "current_context", "set_current_context"]


def current_call() -> tuple[Request, Any] | None:
    """The call the sequential ``serve`` is making on this thread whose context is not made yet: never one."""
    return None


def current_context() -> Any:
    """The ``RequestContext`` kept for the call in progress: none is kept here (see the module's doc)."""
    return None


def set_current_context(context: Any) -> None:
    """Keep ``context`` for the rest of the call in progress: the context is already where it is looked for."""

"""What the pure core calls above itself, handed to it once by ``_bind`` (the twin of ``src/bound.rs``).

The core lies below the engine: it imports none of the modules above it (``rpcwire._engine``, the clients,
the public faces). ``StdioTransport.serve`` and its sequential loop are the engine's, so the face that makes
the core public (``rpcwire``'s fallback, ``rpcwire.pure``) hands them over here at import, as ``rpcwire``
hands the native module ``rpcwire.serve``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["bind", "serve", "serve_sequential"]

_UNBOUND = "rpcwire._pure is not bound: import rpcwire or rpcwire.pure, which hand it the engine (_bind)"


def _unbound(*args: Any, **kwargs: Any) -> None:
    raise RuntimeError(_UNBOUND)


serve: Callable[..., None] = _unbound
"""``rpcwire.serve``: the engine's choice of the mode (``StdioTransport.serve``)."""
serve_sequential: Callable[..., None] = _unbound
"""The engine's sequential loop, one message at a time on the calling thread (``StdioTransport._serve_sequential``)."""


def bind(*, serve: Callable[..., None], serve_sequential: Callable[..., None]) -> None:
    """Keep the engine's ``serve`` and sequential loop for the core to call (each face binds; binding again
    with the same objects changes nothing)."""
    globals().update(serve=serve, serve_sequential=serve_sequential)

"""``flask_view``: a :class:`~rpcwire.http.WSGIApp` as a Flask view (Flask imported only when the view runs)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rpcwire.http._responses import Headers
from rpcwire.http._wsgi import WSGIApp

__all__ = ["flask_view"]


def flask_view(handler: Callable[[str, Any], Any], **options: Any) -> Callable[[], Any]:
    """A Flask view answering JSON-RPC with a :class:`WSGIApp` (``options`` are its keywords)::

    app.add_url_rule("/rpc", view_func=flask_view(handler), methods=["POST"])
    """
    wsgi_app = WSGIApp(handler, **options)

    def rpcwire_view() -> Any:
        from flask import Response, request  # noqa: PLC0415  (Flask only when the view is used)

        started: list[tuple[str, Headers]] = []
        chunks = wsgi_app(request.environ, lambda status, headers, exc_info=None: started.append((status, headers)))
        status, headers = started[0]
        return Response(chunks, status=int(status.split()[0]), headers=headers)  # events go out as they come

    return rpcwire_view

"""JSON-RPC over HTTP: a WSGI and an ASGI application, plain callables with no framework dependency.

One POST carries one JSON text (a request, a notification or a batch) answered by :func:`rpcwire.dispatch`:

- POST with ``application/json`` (or ``application/json-rpc``, ``application/jsonrequest``; parameters such
  as ``; charset=utf-8`` allowed): 200 ``application/json`` with the answer (JSON-RPC errors too);
- only notifications: 204, no body;
- a ``Host`` the server is not known by: 421 (``allowed_hosts``; default: a request that came over loopback
  must name a loopback host, the DNS-rebinding defence);
- another method: 405 with ``Allow: POST``;
- an ``Origin`` header that is not allowed: 403 (default: only the server's own host and port);
- another content type, or a ``charset`` other than UTF-8: 415;
- a body over ``max_body_bytes``: 413, the body not read whole (``Content-Length`` first, else counted);
- WSGI, no ``Content-Length`` and a server that does not end the input (``wsgi.input_terminated``): 411.
- ``Accept: text/event-stream`` and the handler writes a notification (``current_request().progress()``,
  ``.notify()``) before its answer: 200 ``text/event-stream``, each notification a ``message`` event sent as it
  is written, the answer the last event. Without a notification first, the plain answer as above, from the plain
  path at its cost (MCP's clients send that ``Accept`` with every POST): the stream starts at the first one.

- A client that goes away mid-stream: the requests still running are cancelled (``current_request().cancelled``).

The checks run in that order (421, 405, 403, 415, 413/411), then ``authenticate`` if the app has one (still
before the body is read: a :class:`Refusal` it raises, ``Unauthorized`` 401 or ``Forbidden`` 403, or ``False``
it returns, refuses the request; what else it returns is ``current_request().http.user``). A refused body with
at most 1 MiB left is then read and dropped, never decoded (the connection stays in step); a longer one is left
unread, and the refusal says ``Connection: close``. Every handler call has a request context
(``current_request()``), whose ``traceparent`` is the ``traceparent`` header's when it is valid, else
``params._meta``'s, and whose ``http`` is the request (``rpcwire.HTTPRequestInfo``, built when read).
Mounting: ``WSGIApp`` is a WSGI application (gunicorn, granian, ``wsgiref``; in Flask, :func:`flask_view`),
``ASGIApp`` an ASGI one (uvicorn, granian; Starlette and FastAPI ``app.mount("/rpc", ASGIApp(handler))``);
where a sync handler runs under ASGI: ``run_sync_inline``.
See docs/guides/http.md (the guide) and docs/semantics.md, "HTTP" (every rule).

The hot path (a small request, a sync handler, no events) is kept close to a constant reply (``make bench-http``
measures both in process): only the headers used are read, the refusals are made once, the answer goes out
with no response object in between.
"""

from __future__ import annotations

# One concern a module, each importing only those above it in this list: _responses (the responses that are not
# a streamed answer; the shared refusals, made once), _hosts (allowed_hosts), _auth (authenticate and its
# refusals), _policy (what is refused before the body is read, in that order), _endpoint (the body answered:
# plain, with a context per request, async), _events (server-sent events, bridged from the worker to the server's
# stream), _wsgi, _asgi (ASGI's lifespan and WebSocket routing), _flask.
from rpcwire.http._asgi import ASGIApp
from rpcwire.http._auth import Authenticate as Authenticate  # not in __all__: a type (authenticate=), as before
from rpcwire.http._auth import Forbidden, Refusal, Unauthorized
from rpcwire.http._flask import flask_view
from rpcwire.http._policy import DEFAULT_MAX_BODY_BYTES, JSON_CONTENT_TYPES
from rpcwire.http._wsgi import WSGIApp

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "JSON_CONTENT_TYPES",
    "ASGIApp",
    "Forbidden",
    "Refusal",
    "Unauthorized",
    "WSGIApp",
    "flask_view",
]

# Public under the path users import them from (pickling, reprs, tracebacks), as when this was one module.
for _public in (ASGIApp, Forbidden, Refusal, Unauthorized, WSGIApp, flask_view):
    _public.__module__ = __name__
del _public

r"""JSON-RPC over HTTP with Flask: one ``/rpc`` POST route, the methods ``add`` and ``subtract`` from a dict.

    python examples/flask_server.py [PORT]                             # Flask's development server, port 5000
    gunicorn --chdir examples --bind 127.0.0.1:5000 flask_server:app   # a production WSGI server

then ``python examples/http_client.py``, or

    curl -s -H 'Content-Type: application/json' -d '{"jsonrpc":"2.0","method":"add","params":[10,15],"id":1}' \
        http://127.0.0.1:5000/rpc

which prints ``{"jsonrpc":"2.0","id":1,"result":25}``.

On 127.0.0.1 only requests naming ``localhost``, ``127.0.0.1`` or ``[::1]`` are answered (the DNS-rebinding
defence); served under a domain name, name it: ``flask_view(handler, allowed_hosts=["rpc.example.com"])``.
A handler's exception is answered -32603 without its text and logged here (``expose_errors=True`` sends it).
"""

from __future__ import annotations

import sys

from flask import Flask
from rpcwire import methods
from rpcwire.http import flask_view


def add(a: int, b: int) -> int:
    return a + b


def subtract(minuend: int, subtrahend: int) -> int:
    return minuend - subtrahend


app = Flask(__name__)
app.add_url_rule("/rpc", view_func=flask_view(methods({"add": add, "subtract": subtract})), methods=["POST"])

if __name__ == "__main__":
    app.run(host="127.0.0.1", port=int(sys.argv[1]) if len(sys.argv) > 1 else 5000)

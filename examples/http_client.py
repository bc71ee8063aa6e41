"""Call the JSON-RPC server of ``flask_server.py`` over HTTP with ``rpcwire.HttpClient``.

    python examples/http_client.py [URL]      # default http://127.0.0.1:5000/rpc

prints

    add(10, 15) = 25
    subtract(minuend=10, subtrahend=15) = -5
    batch: [3, 2]
    divide: -32601 Method not found

Each call is one POST on a keep-alive connection; a JSON-RPC error comes back as an exception
(``MethodNotFound`` here), an HTTP status other than 200/202/204 as ``rpcwire.HttpError``.
"""

from __future__ import annotations

import sys

from rpcwire import HttpClient, MethodNotFound

url = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:5000/rpc"
with HttpClient(url, timeout=10) as client:
    print("add(10, 15) =", client.call("add", [10, 15]))
    print("subtract(minuend=10, subtrahend=15) =", client.call("subtract", {"minuend": 10, "subtrahend": 15}))
    print("batch:", client.batch([("add", [1, 2]), ("subtract", [5, 3])]))
    try:
        client.call("divide", [1, 0])
    except MethodNotFound as error:
        print("divide:", error.code, error.message)

"""Call the JSON-RPC server of ``flask_server.py`` with ``requests``.

    python examples/http_client.py [URL]      # default http://127.0.0.1:5000/rpc

prints ``Status: 200`` and the answer as ``response.json()`` gives it. rpcwire writes the answer's members
in the order ``jsonrpc``, ``id``, ``result``, so the dict prints as
``{'jsonrpc': '2.0', 'id': 1, 'result': 25}`` (equal, as a dict, to ``{'jsonrpc': '2.0', 'result': 25, 'id': 1}``).
"""

from __future__ import annotations

import sys

import requests

url = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:5000/rpc"
payload = {"jsonrpc": "2.0", "method": "add", "params": [10, 15], "id": 1}
response = requests.post(url, json=payload, timeout=10)
print(f"Status: {response.status_code}")
print(f"Response: {response.json()}")

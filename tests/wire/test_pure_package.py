"""``rpcwire.pure`` as a package (issue 19, issue 30): the face over the pure core ``rpcwire._pure``, which imports
without the clients; the clients are made on first use, are the same classes each time and are bound to the core;
and one routine counts a text's nesting for everyone."""

from __future__ import annotations

import subprocess
import sys

import rpcwire
import rpcwire.pure
from rpcwire import _async_client, _client, _http_client, _ws_client
from rpcwire._pure.codec import nests_deeper

# In a fresh interpreter: the core and its face made again while importing the clients is impossible.
_WITHOUT_CLIENTS = """
import sys
import rpcwire
for name in [name for name in sys.modules if name.startswith(("rpcwire.pure", "rpcwire._pure"))]:
    del sys.modules[name]
vars(rpcwire).pop("pure", None)
vars(rpcwire).pop("_pure", None)
for name in ("_client", "_http_client"):
    sys.modules["rpcwire." + name] = None  # an import of it now raises ImportError
    vars(rpcwire).pop(name)
import rpcwire._pure.framing, rpcwire._pure.codec
import rpcwire.pure
assert rpcwire.pure.dispatch(b'{"jsonrpc":"2.0","method":"m","id":1}', lambda m, p: 7).endswith(b'"result":7}')
try:
    rpcwire.pure.Client
except ImportError:
    print("lazy")
"""


def test_the_package_imports_without_the_clients() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT_CLIENTS], check=False, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "lazy"


def test_the_clients_are_made_once_and_bound_to_the_pure_core() -> None:
    pairs = {
        "Client": _client.Client,
        "AsyncClient": _async_client.AsyncClient,
        "HttpClient": _http_client.HttpClient,
        "AsyncHttpClient": _http_client.AsyncHttpClient,
        "AsyncWebSocketClient": _ws_client.AsyncWebSocketClient,
    }
    for name, base in pairs.items():
        cls = getattr(rpcwire.pure, name)
        assert cls is getattr(rpcwire.pure, name)
        assert issubclass(cls, base) and cls is not base
        assert cls._core is rpcwire._pure
        assert (cls.__module__, cls.__qualname__, cls.__doc__) == ("rpcwire.pure", name, base.__doc__)
    assert rpcwire.pure.HttpError is rpcwire.HttpError


def test_dir_lists_every_public_name() -> None:
    assert set(rpcwire.pure.__all__) <= set(dir(rpcwire.pure))
    assert dir(rpcwire.pure) == sorted(dir(rpcwire.pure))


def test_the_core_contract_is_in_the_package() -> None:
    for name in ("FrameDecoder", "StdioTransport", "dispatch", "parse_request", "_read_text"):
        assert callable(getattr(rpcwire.pure, name)), name
    for name in ("_encode_request", "_parse_incoming"):
        assert callable(getattr(rpcwire.pure, name)), name
    for member in ("_has_buffered_message", "_read_available", "_write_line", "_write_lines", "_serve_sequential"):
        assert callable(getattr(rpcwire.pure.StdioTransport, member)), member


def test_nests_deeper_counts_the_envelope_and_not_the_strings() -> None:
    assert not nests_deeper(b'{"a":[[1]]}', 3)
    assert nests_deeper(b'{"a":[[[1]]]}', 3)
    assert not nests_deeper(b'{"a":"[[[[[[","b":[]}', 3)  # brackets in a string are text
    assert not nests_deeper(b'["\\"[[[[", [], [], [], []]', 2)  # an escaped quote does not end the string
    assert nests_deeper(b"[" * 2001 + b"]" * 2001, 2000)
    assert not nests_deeper(b"[]" * 5000, 1)  # many brackets, shallow

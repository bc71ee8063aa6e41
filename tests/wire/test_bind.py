"""The native module's ``_bind``: the Python objects it calls back are handed to it once, at ``import rpcwire``."""

from __future__ import annotations

import io
import logging
import subprocess
import sys

import pytest
import rpcwire
import rpcwire._answer
import rpcwire._contract
import rpcwire._types

native = pytest.mark.skipif(not rpcwire.NATIVE, reason="the native module is not built")


@native
def test_bind_again_keeps_the_first_binding() -> None:
    """A package imported again (``importlib.reload``, ``sys.modules`` cleared) binds again: no error, and the
    objects of the first import stay in use (an extension module is initialised once per process)."""

    def other_serve(*args: object, **kwargs: object) -> None:
        raise AssertionError("the second binding was used")

    rpcwire._core._bind(
        serve=other_serve,
        request=rpcwire.Request,
        response=rpcwire.Response,
        json_rpc_error=rpcwire.JsonRpcError,
        refused=rpcwire._types.Refused,
        log_failure=rpcwire._answer.log_failure,
        meta_traceparent=rpcwire._answer.meta_traceparent,
        lone_outcomes=(
            rpcwire._contract.Unsent,
            rpcwire._contract.ErrorAnswer,
            rpcwire._contract.ReadOn,
            rpcwire._contract.ReadFailed,
        ),
    )
    out = io.BytesIO()
    rpcwire._core.StdioTransport(io.BytesIO(b'{"jsonrpc":"2.0","method":"m","id":1}\n'), out).serve(lambda m, p: 7)
    assert out.getvalue() == b'{"jsonrpc":"2.0","id":1,"result":7}\n'
    with pytest.raises(TypeError):
        rpcwire._core._bind(rpcwire.serve)  # keyword-only


@native
def test_the_package_imports_again_in_a_fresh_interpreter_state() -> None:
    """``sys.modules`` cleared of the package, then imported again (what autoreloaders do): it serves."""
    script = """
import importlib, io, sys
import rpcwire
for name in [name for name in sys.modules if name.startswith("rpcwire") and name != "rpcwire._rpcwire"]:
    del sys.modules[name]
import rpcwire
importlib.reload(rpcwire)
out = io.BytesIO()
rpcwire.serve(lambda m, p: 1, rpcwire.StdioTransport(io.BytesIO(b'{"jsonrpc":"2.0","method":"m","id":1}\\n'), out))
print(out.getvalue().decode().strip())
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == '{"jsonrpc":"2.0","id":1,"result":1}'


@native
def test_the_bound_objects_are_the_ones_the_native_code_uses(caplog: pytest.LogCaptureFixture) -> None:
    def handler(method: str, params: object) -> object:
        raise ValueError("boom")

    traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    line = b'{"jsonrpc":"2.0","method":"m","params":{"_meta":{"traceparent":"%s"}},"id":1}\n' % traceparent.encode()
    transport = rpcwire._core.StdioTransport(io.BytesIO(line), io.BytesIO())
    assert type(transport._read_message()) is rpcwire.Request
    with caplog.at_level(logging.ERROR, logger="rpcwire"):
        assert rpcwire._core.dispatch(line, handler) is not None
    (record,) = caplog.records
    assert record.traceparent == traceparent  # meta_traceparent
    assert record.method == "m"  # log_failure's record
    decoder = rpcwire._core.FrameDecoder(max_message_bytes=1)
    decoder.feed(b"xx\n")
    assert type(decoder.next()) is rpcwire._types.Refused

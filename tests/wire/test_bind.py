"""The native module's ``_bind``: the Python objects it calls back are handed to it once, at ``import rpcwire``."""

from __future__ import annotations

import io
import logging

import pytest
import rpcwire
import rpcwire._answer
import rpcwire._types

native = pytest.mark.skipif(not rpcwire.NATIVE, reason="the native module is not built")


@native
def test_bind_is_done_once_at_import_and_refused_again() -> None:
    with pytest.raises(RuntimeError, match="already bound"):
        rpcwire._core._bind(
            serve=rpcwire.serve,
            request=rpcwire.Request,
            response=rpcwire.Response,
            json_rpc_error=rpcwire.JsonRpcError,
            refused=rpcwire._types.Refused,
            log_failure=rpcwire._answer.log_failure,
            meta_traceparent=rpcwire._answer.meta_traceparent,
        )
    with pytest.raises(TypeError):
        rpcwire._core._bind(rpcwire.serve)  # keyword-only


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

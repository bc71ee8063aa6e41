"""The pure-Python core: the twin of the native module ``rpcwire._rpcwire``, the same names, the same bytes.

It lies below the engine, as the native module does: it imports none of the modules above it (the engine, the
clients, ``rpcwire.methods``, the public faces), and what it calls above itself is handed to it once by
:func:`_bind` (:mod:`~rpcwire._pure.bound`). The public pure-Python API is :mod:`rpcwire.pure`, a face over
this core that nothing below it imports (``tests/engine/test_import_graph.py`` keeps it so).

A message's way through it, one module each: :mod:`~rpcwire._pure.transport` reads the stream,
:mod:`~rpcwire._pure.framing` cuts it into messages, :mod:`~rpcwire._pure.codec` decodes each,
:mod:`~rpcwire._pure.envelope` says what it is and builds its answer, which the transport frames and writes;
:mod:`~rpcwire._pure.client_pipe` is the threaded client's reading of a spawned server's pipe.
"""

from __future__ import annotations

# Imported, not assigned (mypy matches a module against rpcwire._contract.Core by its imported names and
# functions, not by aliases).
from rpcwire._pure.bound import bind as _bind
from rpcwire._pure.client_pipe import ClientPipe as _ClientPipe
from rpcwire._pure.codec import nests_deeper as _nests_deeper
from rpcwire._pure.current import current_call as _current_call
from rpcwire._pure.current import current_context as _current_context
from rpcwire._pure.current import set_current_context as _set_current_context
from rpcwire._pure.envelope import dispatch, parse_request
from rpcwire._pure.envelope import encode_request as _encode_request
from rpcwire._pure.envelope import parse_incoming as _parse_incoming
from rpcwire._pure.envelope import read_text as _read_text
from rpcwire._pure.framing import FrameDecoder
from rpcwire._pure.framing import encode_frame as _encode_frame
from rpcwire._pure.transport import StdioTransport

# The native module's names (rpcwire/_rpcwire.pyi), in its order.
__all__ = [
    "FrameDecoder",
    "StdioTransport",
    "_ClientPipe",
    "_bind",
    "_current_call",
    "_current_context",
    "_encode_frame",
    "_encode_request",
    "_nests_deeper",
    "_parse_incoming",
    "_read_text",
    "_set_current_context",
    "dispatch",
    "parse_request",
]

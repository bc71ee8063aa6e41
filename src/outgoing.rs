//! The messages rpcwire starts, as opposed to the answers it gives (`answer`): a client's requests and
//! notifications (`_encode_request`) and a server's notifications (`StdioTransport.write_notification`);
//! and what the clients (and `rpcwire.lsp`) do to a message before they send it: its `Content-Length`
//! frame (`_encode_frame`) and the check of its nesting against the server's `max_depth`
//! (`_nests_deeper`), the protocol crate's own rules bound here so that importing `rpcwire` needs no
//! module of `rpcwire.pure`.
//!
//! Each is `json.dumps(..., separators=(",", ":"))` of the same dict, member by member, as
//! `rpcwire.pure` writes it; what cannot be encoded is the encoder's error, and the buffer is left as it
//! was.

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use rpcwire_protocol::framing::Framing;
use rpcwire_protocol::nesting;

use crate::answer::{whole, RESPONSE_END, RESPONSE_START};
use crate::codec;

/// The start of a notification; the method name follows.
const NOTIFICATION_START: &[u8] = br#"{"jsonrpc":"2.0","method":"#;
/// After the id of a request; the method follows.
const METHOD_MEMBER: &[u8] = br#","method":"#;
const PARAMS_MEMBER: &[u8] = br#","params":"#;

/// The line of a request (`id` given) or a notification (`id` is `None`), without `\n`; no
/// `params` member when `params` is `None`.
#[pyfunction]
#[pyo3(signature = (method, params=None, id=None))]
pub(crate) fn _encode_request<'py>(
    py: Python<'py>,
    method: &Bound<'py, PyAny>,
    params: Option<&Bound<'py, PyAny>>,
    id: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyBytes>> {
    let mut line = Vec::new();
    call(&mut line, method, params, id.filter(|id| !id.is_none()))?;
    Ok(PyBytes::new(py, &line))
}

/// Append a notification (no `id`); the `params` member is left out when `params` is `None`. If
/// something cannot be encoded, the encoder's error is returned (what `write_notification` raises)
/// and `out` is left as it was.
pub(crate) fn notification(
    out: &mut Vec<u8>,
    method: &Bound<'_, PyAny>,
    params: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    call(out, method, params, None)
}

/// Append a request when `id` is given (a client's call: `{"jsonrpc":"2.0","id":…,"method":…}`),
/// else a notification; as [`notification`] for `params` and for what cannot be encoded.
pub(crate) fn call(
    out: &mut Vec<u8>,
    method: &Bound<'_, PyAny>,
    params: Option<&Bound<'_, PyAny>>,
    id: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    whole(out, |out| {
        if let Some(id) = id {
            out.extend_from_slice(RESPONSE_START);
            codec::encode(out, id)?;
            out.extend_from_slice(METHOD_MEMBER);
        } else {
            out.extend_from_slice(NOTIFICATION_START);
        }
        codec::encode(out, method)?;
        if let Some(params) = params.filter(|params| !params.is_none()) {
            out.extend_from_slice(PARAMS_MEMBER);
            codec::encode(out, params)?;
        }
        out.extend_from_slice(RESPONSE_END);
        Ok(())
    })
}

/// One `Content-Length` frame: the header (`Content-Length: N\r\n\r\n`, `N` counting bytes) and `body`,
/// as the transport frames what it writes.
#[pyfunction]
pub(crate) fn _encode_frame<'py>(py: Python<'py>, body: &[u8]) -> Bound<'py, PyBytes> {
    let mut frame = Vec::with_capacity(body.len() + 32);
    Framing::ContentLength.frame_into(body, &mut frame);
    PyBytes::new(py, &frame)
}

/// Whether arrays and objects nest deeper than `max_depth` in the JSON text `line` (its strings'
/// brackets not counted), as a server counts them: the envelope and a batch's array included.
#[pyfunction]
pub(crate) fn _nests_deeper(line: &[u8], max_depth: i64) -> bool {
    nesting::nests_deeper(line, max_depth)
}

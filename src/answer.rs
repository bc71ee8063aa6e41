//! Every answer rpcwire writes, built in one place: success answers, error answers (the transport's
//! own -32700 and -32600 for what it refuses, logged at DEBUG here; a handler's `JsonRpcError`; -32603
//! for any other exception or a result that cannot be encoded), and `parse_request`'s error answer as a
//! dict. The messages rpcwire starts (requests, notifications) are built in `outgoing`.
//!
//! A -32603 names the exception in its `data` (class name and `str`) when `expose` is true (stdio's
//! default); with `expose` false (HTTP's default) it is "Internal error" alone, so that no exception
//! text reaches a remote client. A -32603 made here because an answer could not be built (a result or
//! `data` that cannot be encoded, a `JsonRpcError` that cannot be read) is logged at ERROR with the
//! exception, whatever `expose` is; a handler's own exception is logged by the caller, which knows the
//! method (`dispatch`, `rpcwire._answer`).
//!
//! An answer's id is an [`Id`]: the one a request was parsed with on the hot path (echoed from the
//! line's text, never through Python), or `Id::Json`, text already encoded (the `id_json` of a
//! `Request`, or an id a `write_*` caller gave, encoded first). Every builder appends to the
//! caller's buffer, so `serve` gathers answers without a copy. The shape of each line, member by
//! member, is `json.dumps(..., separators=(",", ":"))` of the same dict, as `rpcwire.pure` writes it.

use pyo3::exceptions::{PyBaseException, PyException};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyInt, PyString};

use rpcwire_protocol::envelope::Id;
use rpcwire_protocol::framing::Dropped;
use rpcwire_protocol::json::write_escaped_str;

use crate::bound;
use crate::codec;
use crate::log;

/// The errors the transport itself answers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StandardError {
    Parse,
    InvalidRequest,
    Internal,
}

impl StandardError {
    pub(crate) fn code(self) -> i64 {
        match self {
            StandardError::Parse => -32700,
            StandardError::InvalidRequest => -32600,
            StandardError::Internal => -32603,
        }
    }

    pub(crate) fn message(self) -> &'static str {
        match self {
            StandardError::Parse => "Parse error",
            StandardError::InvalidRequest => "Invalid Request",
            StandardError::Internal => "Internal error",
        }
    }
}

/// The start of every answer (and of a client's request: `outgoing`); the id follows.
pub(crate) const RESPONSE_START: &[u8] = br#"{"jsonrpc":"2.0","id":"#;
/// After the id of a success answer; the result follows, then [`RESPONSE_END`].
const RESULT_MEMBER: &[u8] = br#","result":"#;
/// After the id of an error answer; the code follows, then [`MESSAGE_MEMBER`].
const ERROR_MEMBER: &[u8] = br#","error":{"code":"#;
const MESSAGE_MEMBER: &[u8] = br#","message":"#;
/// Optional, after the message; the data follows.
const DATA_MEMBER: &[u8] = br#","data":"#;
pub(crate) const RESPONSE_END: &[u8] = b"}";
const ERROR_END: &[u8] = b"}}";

fn start(out: &mut Vec<u8>, id: &Id<'_>) {
    out.extend_from_slice(RESPONSE_START);
    id.write_json(out);
}

/// Append an error answer of the transport's own (no `data`); `None` is `id: null`.
pub(crate) fn standard_error(out: &mut Vec<u8>, id: Option<&Id<'_>>, error: StandardError) {
    start(out, id.unwrap_or(&Id::Null));
    standard_error_member(out, error);
    out.extend_from_slice(ERROR_END);
}

/// Append -32700 `id: null` for a text that is not JSON (not UTF-8, nested too deep...), and log
/// `detail` at DEBUG.
pub(crate) fn parse_error(py: Python<'_>, detail: impl std::fmt::Display, out: &mut Vec<u8>) -> PyResult<()> {
    log::debug(py, "parse error", detail)?;
    standard_error(out, None, StandardError::Parse);
    Ok(())
}

/// Append -32600 for an invalid message (`id` is its id, if that was valid), and log `reason` at DEBUG.
pub(crate) fn invalid_request(py: Python<'_>, id: Option<&Id<'_>>, reason: &str, out: &mut Vec<u8>) -> PyResult<()> {
    log::debug(py, "invalid request", reason)?;
    standard_error(out, id, StandardError::InvalidRequest);
    Ok(())
}

/// Append the answer to a message the framing dropped (or a body over `max_message_bytes`), and log
/// why: -32600 for one that began as a message does (an object or an array) and for a `Content-Length`
/// over the limit (a message, too large to accept); -32700 for one that did not look like JSON at all
/// and for a frame that cannot be read.
pub(crate) fn dropped(py: Python<'_>, dropped: Dropped, max_message_bytes: usize, out: &mut Vec<u8>) -> PyResult<()> {
    let reason = dropped.reason(max_message_bytes);
    match dropped {
        Dropped::TooLong { looks_like_json: true } | Dropped::Oversized { .. } => {
            invalid_request(py, None, &reason, out)
        }
        Dropped::TooLong { looks_like_json: false } | Dropped::BadFrame(_) => parse_error(py, reason, out),
    }
}

/// One of the transport's own errors as a dict (`parse_request`'s error answer), `id` as given.
pub(crate) fn error_object<'py>(
    py: Python<'py>,
    id: Bound<'py, PyAny>,
    error: StandardError,
) -> PyResult<Bound<'py, PyAny>> {
    let body = PyDict::new(py);
    body.set_item("code", error.code())?;
    body.set_item("message", error.message())?;
    let response = PyDict::new(py);
    response.set_item("jsonrpc", "2.0")?;
    response.set_item("id", id)?;
    response.set_item("error", body)?;
    Ok(response.into_any())
}

/// `,"error":{"code":…,"message":…`, for one of the transport's own errors.
fn standard_error_member(out: &mut Vec<u8>, error: StandardError) {
    out.extend_from_slice(ERROR_MEMBER);
    out.extend_from_slice(itoa::Buffer::new().format(error.code()).as_bytes());
    out.extend_from_slice(MESSAGE_MEMBER);
    write_escaped_str(out, error.message().as_bytes());
}

/// Append a success answer; if `result` cannot be encoded, `out` is left as it was and the
/// encoder's error is returned (what `write_response` raises).
pub(crate) fn success(out: &mut Vec<u8>, id: &Id<'_>, result: &Bound<'_, PyAny>) -> PyResult<()> {
    whole(out, |out| {
        start(out, id);
        out.extend_from_slice(RESULT_MEMBER);
        codec::encode(out, result)?;
        out.extend_from_slice(RESPONSE_END);
        Ok(())
    })
}

/// Run `write`, and if it fails, take back what it appended.
pub(crate) fn whole(out: &mut Vec<u8>, write: impl FnOnce(&mut Vec<u8>) -> PyResult<()>) -> PyResult<()> {
    let mark = out.len();
    let written = write(out);
    if written.is_err() {
        out.truncate(mark);
    }
    written
}

/// Append the answer to a handler that returned `result`: a success answer, or -32603 if it
/// cannot be encoded (a `BaseException` that is not an `Exception` is returned as `Err`).
pub(crate) fn result(out: &mut Vec<u8>, id: &Id<'_>, result: &Bound<'_, PyAny>, expose: bool) -> PyResult<()> {
    let mark = out.len();
    start(out, id);
    out.extend_from_slice(RESULT_MEMBER);
    if let Err(error) = codec::encode(out, result) {
        out.truncate(mark);
        return encode_failure(out, id, error, result.py(), "the result could not be encoded", expose);
    }
    out.extend_from_slice(RESPONSE_END);
    Ok(())
}

/// Append an error answer; the `data` member is left out when `data` is `None`. If something
/// cannot be encoded, `out` is left as it was and the encoder's error is returned (what
/// `write_error` raises).
pub(crate) fn error(
    out: &mut Vec<u8>,
    id: &Id<'_>,
    code: &Bound<'_, PyAny>,
    message: &Bound<'_, PyAny>,
    data: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    whole(out, |out| {
        start(out, id);
        out.extend_from_slice(ERROR_MEMBER);
        codec::encode(out, code)?;
        out.extend_from_slice(MESSAGE_MEMBER);
        codec::encode(out, message)?;
        if let Some(data) = data.filter(|data| !data.is_none()) {
            out.extend_from_slice(DATA_MEMBER);
            codec::encode(out, data)?;
        }
        out.extend_from_slice(ERROR_END);
        Ok(())
    })
}

/// Append the answer to a handler that raised `exception`: a `JsonRpcError`'s own code, message
/// and data; -32603 for anything else, for a `JsonRpcError` that cannot be read, and for data that
/// cannot be encoded (with the exception's class name and text when `expose` is true).
pub(crate) fn exception(
    out: &mut Vec<u8>,
    id: &Id<'_>,
    exception: &Bound<'_, PyBaseException>,
    expose: bool,
) -> PyResult<()> {
    match application_error(id, exception)? {
        Some((code, message, data)) => error(out, id, &code, &message, data.as_ref()).or_else(|error| {
            encode_failure(out, id, error, exception.py(), "the error's data could not be encoded", expose)
        }),
        None => internal_error(out, id, exception, expose),
    }
}

/// -32603 for an answer whose result or data failed to encode with `error` (`what` says which),
/// logged; an error that is not an `Exception` (`KeyboardInterrupt` in a list subclass's
/// `__iter__`) is returned instead.
fn encode_failure(
    out: &mut Vec<u8>,
    id: &Id<'_>,
    error: PyErr,
    py: Python<'_>,
    what: &str,
    expose: bool,
) -> PyResult<()> {
    if !error.is_instance_of::<PyException>(py) {
        return Err(error);
    }
    log_failure(py, what, id, &error)?;
    internal_error(out, id, error.value(py), expose)
}

/// Log at ERROR, with `error` and its traceback, why the answer to `id` is a -32603.
fn log_failure(py: Python<'_>, what: &str, id: &Id<'_>, error: &PyErr) -> PyResult<()> {
    let mut id_json = Vec::new();
    id.write_json(&mut id_json);
    let args = ("%s (id %s); answered -32603 Internal error", what, String::from_utf8_lossy(&id_json));
    log::error(py, args, error)
}

/// A `JsonRpcError`'s `code`, `message` and `data` (if any).
type ApplicationError<'py> = (Bound<'py, PyAny>, Bound<'py, PyAny>, Option<Bound<'py, PyAny>>);

/// The `code`, `message` and `data` of a `JsonRpcError`, if it is one with an `int` code and a
/// `str` message; any other exception is answered as an internal error, and so is one whose
/// `code`, `message` or `data` cannot be read (a property that raises: logged).
fn application_error<'py>(
    id: &Id<'_>,
    exception: &Bound<'py, PyBaseException>,
) -> PyResult<Option<ApplicationError<'py>>> {
    let py = exception.py();
    if !exception.is_instance(bound::json_rpc_error(py)?)? {
        return Ok(None);
    }
    let read = || -> PyResult<Option<ApplicationError<'py>>> {
        let code = exception.getattr_opt(intern!(py, "code"))?;
        let message = exception.getattr_opt(intern!(py, "message"))?;
        match (code, message) {
            (Some(code), Some(message))
                if code.is_instance_of::<PyInt>()
                    && !code.is_instance_of::<PyBool>()
                    && message.is_instance_of::<PyString>() =>
            {
                let data = exception.getattr_opt(intern!(py, "data"))?;
                Ok(Some((code, message, data)))
            }
            _ => Ok(None),
        }
    };
    match read() {
        Err(error) if error.is_instance_of::<PyException>(py) => {
            log_failure(py, "an error's code, message or data could not be read", id, &error)?;
            Ok(None)
        }
        other => other,
    }
}

/// Append -32603 "Internal error" with `data: {"exception": <class name>, "detail": str(exception)}`
/// when `expose` is true, without `data` when it is false.
fn internal_error(
    out: &mut Vec<u8>,
    id: &Id<'_>,
    exception: &Bound<'_, PyBaseException>,
    expose: bool,
) -> PyResult<()> {
    if !expose {
        standard_error(out, Some(id), StandardError::Internal);
        return Ok(());
    }
    let py = exception.py();
    let name = exception.get_type().name()?;
    let detail = match exception.str() {
        Ok(detail) => detail,
        Err(error) if error.is_instance_of::<PyException>(py) => {
            PyString::new(py, &format!("<unprintable {name} object>"))
        }
        Err(error) => return Err(error),
    };
    start(out, id);
    standard_error_member(out, StandardError::Internal);
    out.extend_from_slice(DATA_MEMBER);
    out.extend_from_slice(br#"{"exception":"#);
    codec::encode_str(out, &name)?;
    out.extend_from_slice(br#","detail":"#);
    codec::encode_str(out, &detail)?;
    out.extend_from_slice(b"}}}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{standard_error, StandardError};
    use rpcwire_protocol::envelope::Id;
    use rpcwire_protocol::json::JsonStr;

    #[test]
    fn standard_errors_have_no_data() {
        let mut out = Vec::new();
        standard_error(
            &mut out,
            Some(&Id::String(JsonStr { raw: "x", escaped: false })),
            StandardError::InvalidRequest,
        );
        assert_eq!(out, br#"{"jsonrpc":"2.0","id":"x","error":{"code":-32600,"message":"Invalid Request"}}"#);
        out.clear();
        standard_error(&mut out, None, StandardError::Parse);
        assert_eq!(out, br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#);
    }

    #[test]
    fn an_encoded_id_is_written_as_is() {
        let mut out = Vec::new();
        standard_error(&mut out, Some(&Id::Json(b"1e3")), StandardError::Internal);
        assert_eq!(out, br#"{"jsonrpc":"2.0","id":1e3,"error":{"code":-32603,"message":"Internal error"}}"#);
    }
}

//! Dispatch: one line in, the bytes of its answer out.
//!
//! Checks the envelope, calls `handler(method, params)` for each request (one by one, in order,
//! for a batch), maps what the handler raised to the specification's error codes and encodes the
//! result. A `BaseException` that is not an `Exception` (`KeyboardInterrupt`, `SystemExit`) is
//! returned as `Err` so that `serve` stops with it; everything else becomes an answer.
//!
//! Just before each handler call, the caller's `before_call` runs: `serve` writes out the answers
//! it has gathered there, so that no finished answer ever waits for a later handler.

use pyo3::exceptions::PyBaseException;
use pyo3::exceptions::PyException;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{IntoPyDict, PyBool, PyByteArray, PyBytes, PyDict, PyInt, PyString, PyType};

use crate::codec;
use crate::envelope::{self, Entry, Id, Limits, Message, StandardError};
use crate::errors::Error;
use crate::json::{write_escaped_str, Scanner};
use crate::strings::StringCache;

static LOGGER: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static JSON_RPC_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static REQUEST: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// The `rpcwire` logger (stdout is the wire: nothing is ever printed).
pub(crate) fn logger(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    LOGGER
        .get_or_try_init(py, || Ok::<_, PyErr>(py.import("logging")?.call_method1("getLogger", ("rpcwire",))?.unbind()))
        .map(|logger| logger.bind(py))
}

fn log_debug(py: Python<'_>, what: &str, detail: impl std::fmt::Display) -> PyResult<()> {
    // `Logger.debug` checks the level itself; asking `isEnabledFor` first would only add a call.
    logger(py)?.call_method1(intern!(py, "debug"), ("%s: %s", what, detail.to_string()))?;
    Ok(())
}

/// What runs just before each handler call.
pub(crate) type BeforeCall<'a> = &'a mut dyn FnMut() -> PyResult<()>;

/// Answer one line into `out`; `Ok(false)` if it needs no answer (notifications only).
pub(crate) fn answer_line(
    py: Python<'_>,
    line: &[u8],
    handler: &Bound<'_, PyAny>,
    limits: Limits,
    strings: &mut StringCache,
    before_call: BeforeCall<'_>,
    out: &mut Vec<u8>,
) -> PyResult<bool> {
    let parsed = match std::str::from_utf8(line) {
        Ok(text) => {
            let read_params = |scanner: &mut Scanner<'_>| codec::decode_value(py, scanner, Some(&mut *strings));
            match envelope::parse_message_with(text, limits, read_params) {
                Err(Error::Python(error)) => return Err(error),
                Err(Error::Syntax(error)) => Err(error.to_string()),
                Ok(parsed) => Ok(parsed),
            }
        }
        Err(error) => Err(format!("invalid UTF-8: {error}")),
    };
    let parsed = match parsed {
        Ok(parsed) if codec::exceeds_int_digit_limit(py, parsed.longest_integer)? => {
            Err(format!("an integer with {} digits exceeds sys.get_int_max_str_digits()", parsed.longest_integer))
        }
        other => other,
    };
    let message = match parsed {
        Ok(parsed) => parsed.message,
        Err(detail) => {
            log_debug(py, "parse error", detail)?;
            envelope::write_standard_error(out, None, StandardError::Parse);
            return Ok(true);
        }
    };
    let entries = match message {
        Message::Single(entry) => return answer_entry(py, entry, handler, strings, before_call, out),
        Message::Batch(entries) if entries.is_empty() => {
            log_debug(py, "invalid request", "empty batch")?;
            envelope::write_standard_error(out, None, StandardError::InvalidRequest);
            return Ok(true);
        }
        Message::BatchOverLimit => {
            let max_batch = limits.max_batch.unwrap_or_default();
            log_debug(py, "invalid request", format_args!("a batch of more than max_batch ({max_batch}) entries"))?;
            envelope::write_standard_error(out, None, StandardError::InvalidRequest);
            return Ok(true);
        }
        Message::Batch(entries) => entries,
    };
    out.push(b'[');
    let first = out.len();
    for entry in entries {
        let mark = out.len();
        if mark > first {
            out.push(b',');
        }
        if !answer_entry(py, entry, handler, strings, before_call, out)? {
            out.truncate(mark);
        }
    }
    if out.len() == first {
        out.truncate(first - 1);
        return Ok(false);
    }
    out.push(b']');
    Ok(true)
}

/// Answer a line longer than `max_message_bytes`, already discarded: -32600 if it opened an object
/// or an array (a message, too large to accept), -32700 if it did not look like JSON at all.
pub(crate) fn answer_too_long(
    py: Python<'_>,
    looks_like_json: bool,
    max_message_bytes: usize,
    out: &mut Vec<u8>,
) -> PyResult<()> {
    let (error, what) = if looks_like_json {
        (StandardError::InvalidRequest, "invalid request")
    } else {
        (StandardError::Parse, "parse error")
    };
    log_debug(py, what, format_args!("a line longer than max_message_bytes ({max_message_bytes})"))?;
    envelope::write_standard_error(out, None, error);
    Ok(())
}

/// Serve one message; `Ok(false)` if it needs no answer (a notification).
fn answer_entry<'py>(
    py: Python<'py>,
    entry: Entry<'_, Bound<'py, PyAny>>,
    handler: &Bound<'py, PyAny>,
    strings: &mut StringCache,
    before_call: BeforeCall<'_>,
    out: &mut Vec<u8>,
) -> PyResult<bool> {
    let call = match entry {
        Entry::Invalid { id, reason } => {
            log_debug(py, "invalid request", reason)?;
            envelope::write_standard_error(out, id.as_ref(), StandardError::InvalidRequest);
            return Ok(true);
        }
        Entry::Call(call) => call,
    };
    let method = codec::decode_str(py, call.method, Some(strings))?;
    let params = call.params.unwrap_or_else(|| py.None().into_bound(py));
    before_call()?;
    let outcome = handler.call1((&method, params));
    let Some(id) = &call.id else {
        if let Err(error) = outcome {
            log_notification_failure(py, &method, error)?;
        }
        return Ok(false);
    };
    match outcome {
        Ok(result) => write_result(out, id, &result)?,
        Err(error) if error.is_instance_of::<PyException>(py) => {
            let answered = write_exception(out, id, error.value(py));
            forget_traceback(py, &error);
            answered?;
        }
        Err(error) => return Err(error),
    }
    Ok(true)
}

/// Drop the traceback an answered exception holds. A handler may raise one instance again and again,
/// and since Python 3.12 each raise adds its frames to the traceback kept on the instance itself:
/// without this it grows, holding every frame (and all they refer to), for as long as we serve.
fn forget_traceback(py: Python<'_>, error: &PyErr) {
    // A failure here would change nothing on the wire: it is not reported.
    let _ = error.value(py).setattr(intern!(py, "__traceback__"), py.None());
}

fn log_notification_failure(py: Python<'_>, method: &Bound<'_, PyString>, error: PyErr) -> PyResult<()> {
    if !error.is_instance_of::<PyException>(py) {
        return Err(error);
    }
    let logged = log_handled_notification_failure(py, method, &error);
    forget_traceback(py, &error);
    logged
}

fn log_handled_notification_failure(py: Python<'_>, method: &Bound<'_, PyString>, error: &PyErr) -> PyResult<()> {
    let logger = logger(py)?;
    let exception = error.value(py);
    if exception.is_instance(json_rpc_error(py)?)? {
        logger.call_method1(intern!(py, "debug"), ("notification %r answered nothing: %s", method, exception))?;
    } else {
        let kwargs = [(intern!(py, "exc_info"), exception)].into_py_dict(py)?;
        logger.call_method(intern!(py, "error"), ("notification %r failed", method), Some(&kwargs))?;
    }
    Ok(())
}

fn json_rpc_error(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    JSON_RPC_ERROR.import(py, "rpcwire._types", "JsonRpcError")
}

/// Append a success answer; a result that cannot be encoded makes it a -32603 instead.
pub(crate) fn write_result(out: &mut Vec<u8>, id: &Id<'_>, result: &Bound<'_, PyAny>) -> PyResult<()> {
    let mark = out.len();
    out.extend_from_slice(envelope::RESPONSE_START);
    id.write_json(out);
    out.extend_from_slice(envelope::RESULT_MEMBER);
    if let Err(error) = codec::encode(out, result) {
        out.truncate(mark);
        return write_encode_failure(out, id, error, result.py());
    }
    out.extend_from_slice(envelope::RESPONSE_END);
    Ok(())
}

fn write_encode_failure(out: &mut Vec<u8>, id: &Id<'_>, error: PyErr, py: Python<'_>) -> PyResult<()> {
    if !error.is_instance_of::<PyException>(py) {
        return Err(error);
    }
    write_internal_error(out, id, error.value(py))
}

/// Append the answer to a handler that raised `exception` (an `Exception`).
fn write_exception(out: &mut Vec<u8>, id: &Id<'_>, exception: &Bound<'_, PyBaseException>) -> PyResult<()> {
    let Some((code, message, data)) = application_error(exception)? else {
        return write_internal_error(out, id, exception);
    };
    let mark = out.len();
    out.extend_from_slice(envelope::RESPONSE_START);
    id.write_json(out);
    if let Err(error) = write_error_member(out, &code, &message, data.as_ref()) {
        out.truncate(mark);
        return write_encode_failure(out, id, error, exception.py());
    }
    Ok(())
}

/// A `JsonRpcError`'s `code`, `message` and `data` (if any).
type ApplicationError<'py> = (Bound<'py, PyAny>, Bound<'py, PyAny>, Option<Bound<'py, PyAny>>);

/// The `code`, `message` and `data` of a `JsonRpcError`, if it is one with an `int` code and a
/// `str` message; any other exception is answered as an internal error, and so is one whose
/// `code`, `message` or `data` cannot be read (a property that raises).
fn application_error<'py>(exception: &Bound<'py, PyBaseException>) -> PyResult<Option<ApplicationError<'py>>> {
    let py = exception.py();
    if !exception.is_instance(json_rpc_error(py)?)? {
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
            log_debug(py, "an error's code, message or data could not be read", error.value(py))?;
            Ok(None)
        }
        other => other,
    }
}

/// Append `,"error":{"code":…,"message":…[,"data":…]}}`, the part of an error answer after its id;
/// `data` is left out when it is `None`.
pub(crate) fn write_error_member(
    out: &mut Vec<u8>,
    code: &Bound<'_, PyAny>,
    message: &Bound<'_, PyAny>,
    data: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    out.extend_from_slice(envelope::ERROR_MEMBER);
    codec::encode(out, code)?;
    out.extend_from_slice(envelope::MESSAGE_MEMBER);
    codec::encode(out, message)?;
    if let Some(data) = data.filter(|data| !data.is_none()) {
        out.extend_from_slice(envelope::DATA_MEMBER);
        codec::encode(out, data)?;
    }
    out.extend_from_slice(envelope::ERROR_END);
    Ok(())
}

/// Append -32603 "Internal error" with `data: {"exception": <class name>, "detail": str(exception)}`.
fn write_internal_error(out: &mut Vec<u8>, id: &Id<'_>, exception: &Bound<'_, PyBaseException>) -> PyResult<()> {
    let py = exception.py();
    let name = exception.get_type().name()?;
    let detail = match exception.str() {
        Ok(detail) => detail,
        Err(error) if error.is_instance_of::<PyException>(py) => {
            PyString::new(py, &format!("<unprintable {name} object>"))
        }
        Err(error) => return Err(error),
    };
    out.extend_from_slice(envelope::RESPONSE_START);
    id.write_json(out);
    out.extend_from_slice(envelope::ERROR_MEMBER);
    out.extend_from_slice(itoa::Buffer::new().format(StandardError::Internal.code()).as_bytes());
    out.extend_from_slice(envelope::MESSAGE_MEMBER);
    write_escaped_str(out, StandardError::Internal.message().as_bytes());
    out.extend_from_slice(envelope::DATA_MEMBER);
    out.extend_from_slice(br#"{"exception":"#);
    codec::encode_str(out, &name)?;
    out.extend_from_slice(br#","detail":"#);
    codec::encode_str(out, &detail)?;
    out.extend_from_slice(b"}}}");
    Ok(())
}

/// Parse one JSON-RPC message (not a batch): `(Request, None)`, or `(None, error_response)` where
/// the error response is the answer as a dict, ready to write.
#[pyfunction]
pub(crate) fn parse_request<'py>(
    py: Python<'py>,
    raw: &Bound<'py, PyAny>,
) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
    let none = || py.None().into_bound(py);
    let bytes = if let Ok(text) = raw.cast::<PyString>() {
        // A `str` holding lone surrogates has no UTF-8 form: it is not a JSON text on any wire.
        text.to_str().map(|text| text.as_bytes().to_vec()).ok()
    } else if let Ok(bytes) = raw.cast::<PyBytes>() {
        Some(bytes.as_bytes().to_vec())
    } else if let Ok(array) = raw.cast::<PyByteArray>() {
        Some(array.to_vec())
    } else {
        return Err(pyo3::exceptions::PyTypeError::new_err("parse_request takes str or bytes"));
    };
    let parsed = bytes
        .as_deref()
        .and_then(|bytes| std::str::from_utf8(bytes).ok())
        .and_then(|text| envelope::parse_message(text, Limits { max_batch: None, ..Limits::default() }).ok());
    let parsed = match parsed {
        Some(parsed) if !codec::exceeds_int_digit_limit(py, parsed.longest_integer)? => parsed,
        _ => return Ok((none(), error_response(py, none(), StandardError::Parse)?)),
    };
    let entry = match parsed.message {
        Message::Single(entry) => entry,
        Message::Batch(_) | Message::BatchOverLimit => {
            return Ok((none(), error_response(py, none(), StandardError::InvalidRequest)?))
        }
    };
    match entry {
        Entry::Invalid { id, reason } => {
            log_debug(py, "invalid request", reason)?;
            let id = id.as_ref().map_or_else(|| Ok(none()), |id| id_to_python(py, id))?;
            Ok((none(), error_response(py, id, StandardError::InvalidRequest)?))
        }
        Entry::Call(call) => {
            let params = match call.params {
                Some(text) => codec::decode(py, text, usize::from(envelope::DEFAULT_MAX_DEPTH), None)?,
                None => none(),
            };
            let id = call.id.as_ref().map_or_else(|| Ok(none()), |id| id_to_python(py, id))?;
            let kwargs = [
                ("method", codec::decode_str(py, call.method, None)?.into_any()),
                ("params", params),
                ("id", id),
                ("is_notification", PyBool::new(py, call.id.is_none()).to_owned().into_any()),
            ]
            .into_py_dict(py)?;
            let request = REQUEST.import(py, "rpcwire._types", "Request")?.call((), Some(&kwargs))?;
            Ok((request, none()))
        }
    }
}

fn id_to_python<'py>(py: Python<'py>, id: &Id<'_>) -> PyResult<Bound<'py, PyAny>> {
    Ok(match id {
        Id::Null => py.None().into_bound(py),
        Id::Number(text) if text.contains(['.', 'e', 'E']) => codec::float_from_json(py, text)?,
        Id::Number(digits) => codec::int_from_json(py, digits)?,
        Id::String(text) => codec::decode_str(py, *text, None)?.into_any(),
    })
}

fn error_response<'py>(py: Python<'py>, id: Bound<'py, PyAny>, error: StandardError) -> PyResult<Bound<'py, PyAny>> {
    let body = PyDict::new(py);
    body.set_item("code", error.code())?;
    body.set_item("message", error.message())?;
    let response = PyDict::new(py);
    response.set_item("jsonrpc", "2.0")?;
    response.set_item("id", id)?;
    response.set_item("error", body)?;
    Ok(response.into_any())
}

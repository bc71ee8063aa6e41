//! Dispatch: one line in, the bytes of its answer out (the sequential `serve`, and `rpcwire.dispatch`
//! for one whole JSON text such as an HTTP body).
//!
//! Reads the line (`request`), calls `handler(method, params)` for each request (one by one, in
//! order, for a batch) and has `answer` build what it answers: the result, or what the handler
//! raised mapped to the specification's error codes. A `BaseException` that is not an `Exception`
//! (`KeyboardInterrupt`, `SystemExit`) is returned as `Err` so that `serve` stops with it;
//! everything else becomes an answer. A handler's exception answered -32603 (anything but a
//! `JsonRpcError`) is logged at ERROR with its traceback, its request's id, method and trace context,
//! by the engine's own function (`rpcwire._answer.log_failure`), so that every mode logs the same
//! record; with `expose_errors=False` (`dispatch` over HTTP) its answer carries no exception text.
//!
//! Just before each handler call, the caller's `before_call` runs: `serve` writes out the answers
//! it has gathered there, so that no finished answer ever waits for a later handler.

use pyo3::exceptions::{PyException, PyTypeError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyString, PyTypeMethods};

use rpcwire_protocol::envelope::{Entry, Id, Limits, DEFAULT_MAX_BATCH, DEFAULT_MAX_DEPTH, DEFAULT_MAX_MESSAGE_BYTES};

use crate::answer;
use crate::bound;
use crate::codec;
use crate::current;
use crate::log;
use crate::request::{self, PyEntry, Read};
use crate::strings::StringCache;

/// `rpcwire.dispatch(body, handler)`: one whole JSON text (newlines are JSON whitespace here, not
/// frames) answered as `serve` answers a line, the answer's bytes without `\n`; `None` when nothing is
/// answered (notifications only). An empty or whitespace-only body is -32600 `id: null`, where `serve`
/// skips a blank line; a body over `max_message_bytes` is answered as an over-long line. No string
/// cache: one body holds too few repeated keys to pay for the cache's 1,024 slots.
/// `expose_errors=False`: a -32603 is "Internal error" alone, without the exception's name and text.
#[pyfunction]
#[pyo3(signature = (
    body,
    handler,
    *,
    max_message_bytes=DEFAULT_MAX_MESSAGE_BYTES,
    max_depth=i64::from(DEFAULT_MAX_DEPTH),
    max_batch=Some(i64::from(DEFAULT_MAX_BATCH)),
    expose_errors=true,
), text_signature = "(body, handler, *, max_message_bytes=67108864, max_depth=128, max_batch=1000, expose_errors=True)")]
pub(crate) fn dispatch<'py>(
    py: Python<'py>,
    body: &Bound<'py, PyAny>,
    handler: &Bound<'py, PyAny>,
    max_message_bytes: i64,
    max_depth: i64,
    max_batch: Option<i64>,
    expose_errors: bool,
) -> PyResult<Option<Bound<'py, PyBytes>>> {
    let (max_message_bytes, limits) = request::checked_limits(max_message_bytes, max_depth, max_batch)?;
    let copied;
    let body: &[u8] = if let Ok(text) = body.cast::<PyString>() {
        let Ok(text) = text.to_str() else {
            // A `str` holding lone surrogates has no UTF-8 form: it is not a JSON text on any wire.
            let mut out = Vec::new();
            answer::parse_error(py, "a str with lone surrogates (no UTF-8 form)", &mut out)?;
            return Ok(Some(PyBytes::new(py, &out)));
        };
        text.as_bytes()
    } else if let Ok(bytes) = body.cast::<PyBytes>() {
        bytes.as_bytes()
    } else if let Ok(array) = body.cast::<PyByteArray>() {
        copied = array.to_vec();
        &copied
    } else {
        return Err(PyTypeError::new_err(format!("dispatch takes str or bytes, not {}", body.get_type().name()?)));
    };
    let mut out = Vec::new();
    let read = request::read_text(py, body, max_message_bytes, limits, None, &mut out)?;
    let mut caller = Caller { transport: None, handler, before_call: &mut || Ok(()), expose_errors };
    if !answer_read(py, read, &mut caller, None, &mut out)? {
        return Ok(None);
    }
    Ok(Some(PyBytes::new(py, &out)))
}

/// What runs just before each handler call.
pub(crate) type BeforeCall<'a> = &'a mut dyn FnMut() -> PyResult<()>;

/// Who answers: the handler, the transport it is called for (`current_request()` finds it), and
/// what runs before each call.
pub(crate) struct Caller<'a, 'py> {
    /// `None` for `dispatch` (no stream to write a progress notification to); with the serving thread's
    /// notes, where `current_request()` finds the call.
    pub(crate) transport: Option<(&'a Bound<'py, PyAny>, current::ThisThread)>,
    pub(crate) handler: &'a Bound<'py, PyAny>,
    pub(crate) before_call: BeforeCall<'a>,
    /// Whether a -32603 names the exception (class and text) in its `data`.
    pub(crate) expose_errors: bool,
}

/// Answer one line (not blank) into `out`; `Ok(false)` if it needs no answer (notifications only).
pub(crate) fn answer_line<'py>(
    py: Python<'py>,
    line: &[u8],
    caller: &mut Caller<'_, 'py>,
    limits: Limits,
    mut strings: Option<&mut StringCache>,
    out: &mut Vec<u8>,
) -> PyResult<bool> {
    // A single message (nearly every line) is answered where it was read; the rest through `answer_read`.
    let answer_single = |entry: PyEntry<'_, 'py>, strings: Option<&mut StringCache>, out: &mut Vec<u8>| {
        answer_entry(py, &entry, caller, strings, out)
    };
    match request::read_line_with(py, line, limits, strings.as_deref_mut(), out, answer_single)? {
        Ok(answered) => Ok(answered),
        Err(read) => answer_read(py, read, caller, strings, out),
    }
}

/// Answer what was read into `out` (where the transport's own answer already is, when it is
/// `Answered`); `Ok(false)` if it needs no answer (notifications only).
fn answer_read<'py>(
    py: Python<'py>,
    read: Read<'_, 'py>,
    caller: &mut Caller<'_, 'py>,
    mut strings: Option<&mut StringCache>,
    out: &mut Vec<u8>,
) -> PyResult<bool> {
    let entries = match read {
        Read::Answered => return Ok(true),
        Read::Single(entry) => return answer_entry(py, &entry, caller, strings, out),
        Read::Batch(entries) => entries,
    };
    out.push(b'[');
    let first = out.len();
    for entry in &entries {
        let mark = out.len();
        if mark > first {
            out.push(b',');
        }
        if !answer_entry(py, entry, caller, strings.as_deref_mut(), out)? {
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

/// Serve one message; `Ok(false)` if it needs no answer (a notification). The entry is borrowed where
/// it was read (a move of it costs more than the few fields used).
fn answer_entry<'py>(
    py: Python<'py>,
    entry: &PyEntry<'_, 'py>,
    caller: &mut Caller<'_, '_>,
    strings: Option<&mut StringCache>,
    out: &mut Vec<u8>,
) -> PyResult<bool> {
    let call = match entry {
        Entry::Invalid { id, reason } => {
            answer::invalid_request(py, id.as_ref(), reason, out)?;
            return Ok(true);
        }
        Entry::Call(call) => call,
    };
    let method = codec::decode_str(py, call.method, strings)?;
    let none;
    let params = if let Some(params) = &call.params {
        params
    } else {
        none = py.None().into_bound(py);
        &none
    };
    (caller.before_call)()?;
    // `current_request()` finds the call here, and its context is finished before the answer.
    let calling = caller
        .transport
        .map(|(transport, thread)| current::Calling::enter(thread, &method, params, call.id.as_ref(), transport));
    let outcome = caller.handler.call1((&method, params));
    if let Some(calling) = calling {
        calling.finish(py)?;
    }
    let Some(id) = &call.id else {
        if let Err(error) = outcome {
            log_notification_failure(py, &method, error)?;
        }
        return Ok(false);
    };
    match outcome {
        Ok(result) => answer::result(out, id, &result, caller.expose_errors)?,
        Err(error) if error.is_instance_of::<PyException>(py) => {
            // Logged before its traceback is dropped.
            let answered = log_failure(py, id, &method, params, &error)
                .and_then(|()| answer::exception(out, id, error.value(py), caller.expose_errors));
            forget_traceback(py, &error);
            answered?;
        }
        Err(error) => return Err(error),
    }
    Ok(true)
}

/// Log a handler's exception answered -32603 (one that is not a `JsonRpcError`: that one the handler
/// meant for its client) with `rpcwire._answer.log_failure`, as the engine logs it.
fn log_failure(
    py: Python<'_>,
    id: &Id<'_>,
    method: &Bound<'_, PyString>,
    params: &Bound<'_, PyAny>,
    error: &PyErr,
) -> PyResult<()> {
    if error.value(py).is_instance(bound::json_rpc_error(py)?)? {
        return Ok(());
    }
    let exception = log::with_traceback(py, error);
    let traceparent = bound::meta_traceparent(py)?.call1((params,))?;
    let id = request::id_to_python(py, id)?;
    bound::log_failure(py)?.call1((id, method, traceparent, exception))?;
    Ok(())
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
    let exception = error.value(py);
    if exception.is_instance(bound::json_rpc_error(py)?)? {
        let logger = log::logger(py)?;
        logger.call_method1(intern!(py, "debug"), ("notification %r answered nothing: %s", method, exception))?;
        return Ok(());
    }
    log::error(py, ("notification %r failed", method), error)
}

//! The client's side of the wire: what it reads back — responses, and the server's own requests and
//! notifications — classified by the same envelope check `serve` uses (`envelope::parse_incoming_with`),
//! with every value decoded in that pass. The requests a client writes are built in `outgoing`.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyInt, PyList, PyString};

use rpcwire_protocol::envelope::{self, ClientEntry, ClientMessage, Id, Outcome, DEFAULT_MAX_DEPTH};
use rpcwire_protocol::json::Scanner;

use crate::answer::StandardError;
use crate::bound;
use crate::codec;
use crate::errors::Error;
use crate::request;
use crate::strings::StringCache;

/// One message a client read (a line, or an HTTP body): a `Response`, a `Request` (the server's
/// own request or notification), a `list` of these for a batch, or a `str` saying why the message
/// (or a batch entry) is neither, for the client to log and drop. Nesting deeper than `max_depth`
/// (a transport's limit, checked as `StdioTransport` checks it) is a parse error.
#[pyfunction]
#[pyo3(signature = (data, max_depth=i64::from(DEFAULT_MAX_DEPTH)), text_signature = "(data, max_depth=128)")]
pub(crate) fn _parse_incoming<'py>(py: Python<'py>, data: &[u8], max_depth: i64) -> PyResult<Bound<'py, PyAny>> {
    let (_, limits) = request::checked_limits(1, max_depth, None)?;
    match incoming_object(py, data, limits.max_depth, None)? {
        Incoming::Message(message) => Ok(message),
        Incoming::Unreadable(reason) => Ok(PyString::new(py, &reason).into_any()),
    }
}

/// What a client read: a message (or why a message is neither a response nor a request, as a
/// `str`), or a text that could not be decoded at all, with why.
pub(crate) enum Incoming<'py> {
    Message(Bound<'py, PyAny>),
    /// Not JSON, not UTF-8, nested deeper than `max_depth`, an integer `int()` refuses: the client
    /// may still look for the id it names in the bytes (`rpcwire._peer`).
    Unreadable(String),
}

/// As [`_parse_incoming`]; object keys come from `strings` when it is given (a transport's cache).
pub(crate) fn incoming_object<'py>(
    py: Python<'py>,
    data: &[u8],
    max_depth: usize,
    mut strings: Option<&mut StringCache>,
) -> PyResult<Incoming<'py>> {
    let Ok(text) = std::str::from_utf8(data) else { return Ok(unreadable_utf8()) };
    match parse(py, text, max_depth, strings.as_deref_mut())? {
        Ok(message) => Ok(Incoming::Message(message_object(py, message, strings)?)),
        Err(unreadable) => Ok(unreadable),
    }
}

/// What a caller waiting for the answer to its call reads.
pub(crate) enum Read<'py> {
    /// The `result` of the answer to its call (a lone successful response whose id is the call's): no
    /// `Response` is made for it.
    Result(Bound<'py, PyAny>),
    /// Anything else, as [`incoming_object`] gives it.
    Incoming(Incoming<'py>),
}

/// As [`incoming_object`], but the successful answer to the call `own` (a response alone on its line whose
/// id is that integer, as `json.loads` and `==` would match it) is its bare result.
pub(crate) fn read<'py>(
    py: Python<'py>,
    data: &[u8],
    max_depth: usize,
    mut strings: Option<&mut StringCache>,
    own: i64,
) -> PyResult<Read<'py>> {
    let Ok(text) = std::str::from_utf8(data) else { return Ok(Read::Incoming(unreadable_utf8())) };
    if let Some(result) = own_result(py, text, max_depth, strings.as_deref_mut(), own)? {
        return Ok(Read::Result(result));
    }
    let message = match parse(py, text, max_depth, strings.as_deref_mut())? {
        // (An integer id in the int range: its digits are what `int()` reads; a fraction or exponent, a float.)
        Ok(ClientMessage::Single(ClientEntry::Response {
            id: Id::Number(digits),
            outcome: Outcome::Result(result),
        })) if digits.parse::<i64>() == Ok(own) => return Ok(Read::Result(result)),
        Ok(message) => message,
        Err(unreadable) => return Ok(Read::Incoming(unreadable)),
    };
    Ok(Read::Incoming(Incoming::Message(message_object(py, message, strings)?)))
}

fn unreadable_utf8() -> Incoming<'static> {
    Incoming::Unreadable("parse error: invalid UTF-8".to_owned())
}

/// The envelope of `text` with every value decoded, or why it is unreadable.
fn parse<'a, 'py>(
    py: Python<'py>,
    text: &'a str,
    max_depth: usize,
    mut strings: Option<&mut StringCache>,
) -> PyResult<Result<ClientMessage<'a, Bound<'py, PyAny>>, Incoming<'py>>> {
    let read_value = |scanner: &mut Scanner<'a>| codec::decode_value(py, scanner, strings.as_deref_mut());
    match envelope::parse_incoming_with(text, max_depth, read_value) {
        Ok(parsed) if codec::exceeds_int_digit_limit(py, parsed.longest_integer)? => {
            Ok(Err(Incoming::Unreadable("parse error: an integer longer than int() accepts".to_owned())))
        }
        Ok(parsed) => Ok(Ok(parsed.message)),
        Err(Error::Python(error)) => Err(error),
        Err(Error::Syntax(error)) => Ok(Err(Incoming::Unreadable(format!("parse error: {error}")))),
    }
}

/// A message read: a `Response` or a `Request`, a `list` of these for a batch, or a `str` saying why it is
/// neither.
fn message_object<'py>(
    py: Python<'py>,
    message: ClientMessage<'_, Bound<'py, PyAny>>,
    mut strings: Option<&mut StringCache>,
) -> PyResult<Bound<'py, PyAny>> {
    match message {
        ClientMessage::Single(entry) => entry_object(py, entry, strings),
        ClientMessage::Batch(entries) if entries.is_empty() => Ok(PyString::new(py, "an empty batch").into_any()),
        ClientMessage::Batch(entries) => {
            let items = entries
                .into_iter()
                .map(|entry| entry_object(py, entry, strings.as_deref_mut()))
                .collect::<PyResult<Vec<_>>>()?;
            Ok(PyList::new(py, items)?.into_any())
        }
    }
}

/// The result of the answer to the call `own` when the line is that answer as rpcwire's servers write it
/// (`{"jsonrpc":"2.0","id":<own>,"result":<value>}`, nothing else): read without the envelope's members
/// gathered. `None` for any other line (then it is read the general way, which gives that line the same).
fn own_result<'py>(
    py: Python<'py>,
    text: &str,
    max_depth: usize,
    strings: Option<&mut StringCache>,
    own: i64,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    const HEAD: &str = r#"{"jsonrpc":"2.0","id":"#;
    const RESULT: &str = r#","result":"#;
    let Some(rest) = text.strip_prefix(HEAD) else { return Ok(None) };
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    // (A leading zero is no JSON number: the general way says so.)
    let number_ok = digits == 1 || (digits > 1 && !rest.starts_with('0'));
    if max_depth == 0 || !number_ok || rest[..digits].parse::<i64>() != Ok(own) || !rest[digits..].starts_with(RESULT) {
        return Ok(None);
    }
    // The envelope is one level: the result may nest one less.
    let mut scanner = Scanner::new(text, max_depth - 1);
    scanner.eat(&text.as_bytes()[..HEAD.len() + digits + RESULT.len()]);
    let result = match codec::decode_value(py, &mut scanner, strings) {
        Ok(result) => result,
        Err(Error::Python(error)) => return Err(error),
        Err(Error::Syntax(_)) => return Ok(None),
    };
    if !scanner.eat(b"}") || scanner.finish().is_err() || codec::exceeds_int_digit_limit(py, scanner.longest_integer)? {
        return Ok(None);
    }
    Ok(Some(result))
}

fn entry_object<'py>(
    py: Python<'py>,
    entry: ClientEntry<'_, Bound<'py, PyAny>>,
    strings: Option<&mut StringCache>,
) -> PyResult<Bound<'py, PyAny>> {
    match entry {
        ClientEntry::Call(call) => request::request_object(py, call, strings),
        ClientEntry::Response { id, outcome: Outcome::Result(result) } => response_object(py, &id, &result, None),
        ClientEntry::Response { id, outcome: Outcome::Error(error) } => {
            if is_error_object(&error)? {
                response_object(py, &id, &py.None().into_bound(py), Some(&error))
            } else {
                invalid_response(py, &id, "error has no integer code or no string message")
            }
        }
        ClientEntry::Response { id, outcome: Outcome::Invalid(reason) } => invalid_response(py, &id, reason),
        ClientEntry::Invalid { reason, .. } => Ok(PyString::new(py, reason).into_any()),
    }
}

/// A response that names a valid id but is no valid response: a `Response` whose error is -32603
/// "Invalid response" with the reason as `data`, so that the call it names fails instead of waiting
/// for an answer that will not come.
fn invalid_response<'py>(py: Python<'py>, id: &Id<'_>, reason: &str) -> PyResult<Bound<'py, PyAny>> {
    let error = PyDict::new(py);
    error.set_item("code", StandardError::Internal.code())?;
    error.set_item("message", "Invalid response")?;
    error.set_item("data", reason)?;
    response_object(py, id, &py.None().into_bound(py), Some(error.as_any()))
}

/// Whether a decoded `error` member is what the specification requires: an integer `code` and a
/// string `message` (`data` is anything).
fn is_error_object(error: &Bound<'_, PyAny>) -> PyResult<bool> {
    let Ok(error) = error.cast::<PyDict>() else { return Ok(false) };
    let code_ok = error.get_item("code")?.is_some_and(|code| code.is_exact_instance_of::<PyInt>());
    let message_ok = error.get_item("message")?.is_some_and(|message| message.is_instance_of::<PyString>());
    Ok(code_ok && message_ok)
}

/// A `rpcwire.Response`: the id as `json.loads` gives it, the result, the error object or `None`.
fn response_object<'py>(
    py: Python<'py>,
    id: &Id<'_>,
    result: &Bound<'py, PyAny>,
    error: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let id = request::id_to_python(py, id)?;
    let error = error.map_or_else(|| py.None().into_bound(py), Clone::clone);
    let class = bound::response(py)?;
    // `Response` is a slots dataclass whose `__init__` only stores its three fields (rpcwire._types): it is
    // made as `object.__new__` makes it, and the fields stored, without the Python frame of `__init__` that
    // every answer a client reads would otherwise pay. (A `__post_init__` there would have to be called here.)
    #[cfg(not(any(PyPy, GraalPy, Py_LIMITED_API)))]
    {
        // SAFETY: `class` is a type object; its `tp_alloc` (set for every type that `PyType_Ready` readied)
        // returns a new reference to a zeroed instance, or NULL with an exception set.
        let object = unsafe {
            let class_ptr = class.as_type_ptr();
            let alloc = (*class_ptr).tp_alloc.unwrap_or(pyo3::ffi::PyType_GenericAlloc);
            Bound::from_owned_ptr_or_err(py, alloc(class_ptr, 0))?
        };
        object.setattr(pyo3::intern!(py, "id"), id)?;
        object.setattr(pyo3::intern!(py, "result"), result)?;
        object.setattr(pyo3::intern!(py, "error"), error)?;
        Ok(object)
    }
    #[cfg(any(PyPy, GraalPy, Py_LIMITED_API))]
    class.call1((id, result, error))
}

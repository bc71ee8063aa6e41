//! Requests as Python receives them: one line read into the answer the transport gives itself or
//! the requests it holds (shared by `serve`'s dispatch and `StdioTransport._read_message`), the
//! `Request` objects `_read_message` and `parse_request` return, and `parse_request`.
//!
//! A line is checked and its `params` decoded in one pass (`envelope::parse_message_with` with the
//! codec's reader). What the transport answers without a handler (-32700, an empty batch, a batch
//! over `max_batch`, an invalid message or batch entry, a body over `max_message_bytes`) is decided
//! here and built by `answer` (which logs its detail at DEBUG), so that both paths write the same
//! bytes and log the same.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyByteArray, PyBytes, PyList, PyString};

use rpcwire_protocol::envelope::{self, Call, Entry, Id, Limits, Message, MAX_MAX_DEPTH};
use rpcwire_protocol::framing::{self, Dropped};
use rpcwire_protocol::json::Scanner;

use crate::answer::{self, StandardError};
use crate::bound;
use crate::codec;
use crate::errors::{Error, SyntaxError};
use crate::log;
use crate::strings::StringCache;

/// One message or batch entry, its `params` decoded.
pub(crate) type PyEntry<'a, 'py> = Entry<'a, Bound<'py, PyAny>>;

/// A line, read.
pub(crate) enum Read<'a, 'py> {
    /// Answered by the transport itself (a parse error, an empty batch, a batch over `max_batch`):
    /// the answer was appended to `out`.
    Answered,
    Single(PyEntry<'a, 'py>),
    /// A batch of at least one entry.
    Batch(Vec<PyEntry<'a, 'py>>),
}

/// Read one line (not blank): check it, decode its `params` (object keys from `strings` when it
/// is given), and answer it into `out` if the transport answers it as a whole.
pub(crate) fn read_line<'a, 'py>(
    py: Python<'py>,
    line: &'a [u8],
    limits: Limits,
    strings: Option<&mut StringCache>,
    out: &mut Vec<u8>,
) -> PyResult<Read<'a, 'py>> {
    let read = read_line_with(py, line, limits, strings, out, |entry, _, _| Ok(Read::Single(entry)))?;
    Ok(read.unwrap_or_else(|read| read))
}

/// As [`read_line`], a single message handed to `single` (with `strings` and `out`) where it was read:
/// `Ok(Ok(what single returned))`, or `Ok(Err(read))` for anything else. The sequential loop answers
/// nearly every line there, without the moves of the entry out of this function and back into a call.
#[inline]
pub(crate) fn read_line_with<'a, 'py, 's, R>(
    py: Python<'py>,
    line: &'a [u8],
    limits: Limits,
    mut strings: Option<&'s mut StringCache>,
    out: &mut Vec<u8>,
    single: impl FnOnce(PyEntry<'a, 'py>, Option<&'s mut StringCache>, &mut Vec<u8>) -> PyResult<R>,
) -> PyResult<Result<R, Read<'a, 'py>>> {
    // Each way out to a -32700 returns at once, through a function out of line: the entry is moved
    // once, from the envelope's pass to `single`, rather than through a `Result` of its own first.
    let text = match utf8(line) {
        Ok(text) => text,
        Err(error) => return not_json(py, NotJson::Utf8(error), out).map(Err),
    };
    let read_params = |scanner: &mut Scanner<'a>| codec::decode_value(py, scanner, strings.as_deref_mut());
    let parsed = match envelope::parse_message_with(text, limits, read_params) {
        Ok(parsed) => parsed,
        Err(Error::Python(error)) => return Err(error),
        Err(Error::Syntax(error)) => return not_json(py, NotJson::Syntax(error), out).map(Err),
    };
    // No interpreter accepts fewer than 640 digits: asked only past them (one comparison a line).
    if parsed.longest_integer > 640 && codec::exceeds_int_digit_limit(py, parsed.longest_integer)? {
        return not_json(py, NotJson::LongInteger(parsed.longest_integer), out).map(Err);
    }
    match parsed.message {
        Message::Single(entry) => single(entry, strings, out).map(Ok),
        message => batch(py, message, limits, out).map(Err),
    }
}

/// A line that holds a batch (`message` is no single message), read.
#[inline(never)]
fn batch<'a, 'py>(
    py: Python<'py>,
    message: Message<'a, Bound<'py, PyAny>>,
    limits: Limits,
    out: &mut Vec<u8>,
) -> PyResult<Read<'a, 'py>> {
    match message {
        Message::Single(entry) => Ok(Read::Single(entry)),
        Message::Batch(entries) if entries.is_empty() => {
            answer::invalid_request(py, None, "empty batch", out)?;
            Ok(Read::Answered)
        }
        Message::Batch(entries) => Ok(Read::Batch(entries)),
        Message::BatchOverLimit => {
            let max_batch = limits.max_batch.unwrap_or_default();
            let reason = format!("a batch of more than max_batch ({max_batch}) entries");
            answer::invalid_request(py, None, &reason, out)?;
            Ok(Read::Answered)
        }
    }
}

/// The -32700 answer to a line that is no JSON text (or holds an integer longer than Python reads).
#[cold]
#[inline(never)]
fn not_json<'a, 'py>(py: Python<'py>, detail: NotJson, out: &mut Vec<u8>) -> PyResult<Read<'a, 'py>> {
    answer::parse_error(py, detail, out)?;
    Ok(Read::Answered)
}

/// `line` as text. Most lines are ASCII, which a word-at-a-time check tells apart sooner than a
/// validation of UTF-8 walks it.
fn utf8(line: &[u8]) -> Result<&str, std::str::Utf8Error> {
    if is_ascii(line) {
        // SAFETY: ASCII is UTF-8.
        return Ok(unsafe { std::str::from_utf8_unchecked(line) });
    }
    std::str::from_utf8(line)
}

/// Whether every byte of `bytes` is ASCII: `[u8]::is_ascii`'s answer, in whole words to the end.
/// The standard one checks a line of 64 to 127 bytes (a usual request) in one block of 64 and then
/// byte by byte; here the blocks are of 32 bytes, then 8, and the last word overlaps the one before
/// it, so that no byte is looked at alone (bench/README.md: the figure).
#[inline]
fn is_ascii(bytes: &[u8]) -> bool {
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let word = |chunk: &[u8]| u64::from_le_bytes(chunk.try_into().unwrap_or_default());
    if bytes.len() < 8 {
        return bytes.is_ascii();
    }
    let mut seen = 0;
    let mut blocks = bytes.chunks_exact(32);
    for block in &mut blocks {
        seen |= word(&block[..8]) | word(&block[8..16]) | word(&block[16..24]) | word(&block[24..]);
    }
    let mut words = blocks.remainder().chunks_exact(8);
    for chunk in &mut words {
        seen |= word(chunk);
    }
    // The last 8 bytes of the line (at least 8 long), whatever the words before them covered.
    seen |= word(&bytes[bytes.len() - 8..]);
    seen & HIGH == 0
}

/// Why a line is answered -32700: the detail logged at DEBUG, formatted only if the record is made.
enum NotJson {
    Utf8(std::str::Utf8Error),
    Syntax(SyntaxError),
    /// An integer literal of this many digits, more than Python converts.
    LongInteger(usize),
}

impl std::fmt::Display for NotJson {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Utf8(error) => write!(f, "invalid UTF-8: {error}"),
            Self::Syntax(error) => error.fmt(f),
            Self::LongInteger(digits) => {
                write!(f, "an integer with {digits} digits exceeds sys.get_int_max_str_digits()")
            }
        }
    }
}

/// Read one whole text (an HTTP body: newlines are JSON whitespace here, not frames) as a line is read:
/// a text over `max_message_bytes` is answered unread, as an over-long line is; an empty or blank one
/// is -32600 `id: null` (where a reader of lines skips a blank line: a body said a message was there).
pub(crate) fn read_text<'a, 'py>(
    py: Python<'py>,
    text: &'a [u8],
    max_message_bytes: usize,
    limits: Limits,
    strings: Option<&mut StringCache>,
    out: &mut Vec<u8>,
) -> PyResult<Read<'a, 'py>> {
    let first_significant = framing::first_significant(text);
    if text.len() > max_message_bytes {
        answer::dropped(
            py,
            Dropped::TooLong { looks_like_json: framing::opens_json(first_significant) },
            max_message_bytes,
            out,
        )?;
        return Ok(Read::Answered);
    }
    if first_significant.is_none() {
        answer::invalid_request(py, None, "an empty body", out)?;
        return Ok(Read::Answered);
    }
    read_line(py, text, limits, strings, out)
}

/// `_read_text(body, max_message_bytes, max_depth, max_batch)`: what `dispatch` reads before it calls the
/// handler, as `StdioTransport._read_message` returns it (see [`read_text`] and [`message_object`]).
#[pyfunction]
#[pyo3(name = "_read_text")]
pub(crate) fn read_text_object<'py>(
    py: Python<'py>,
    body: &Bound<'py, PyAny>,
    max_message_bytes: i64,
    max_depth: i64,
    max_batch: Option<i64>,
) -> PyResult<Bound<'py, PyAny>> {
    let (max_message_bytes, limits) = checked_limits(max_message_bytes, max_depth, max_batch)?;
    crate::stream::with_bytes(body, |body| {
        let mut answer = Vec::new();
        let read = read_text(py, body, max_message_bytes, limits, None, &mut answer)?;
        message_from(py, read, &answer, body.len(), None)
    })?
}

/// The limits given as `StdioTransport`'s and `dispatch`'s keyword arguments, checked:
/// `(max_message_bytes, limits)`, or a `ValueError` naming the first one out of range.
pub(crate) fn checked_limits(
    max_message_bytes: i64,
    max_depth: i64,
    max_batch: Option<i64>,
) -> PyResult<(usize, Limits)> {
    let max_message_bytes = checked_max_message_bytes(max_message_bytes)?;
    let limits = Limits {
        max_depth: positive("max_depth", max_depth, MAX_MAX_DEPTH)?,
        max_batch: max_batch.map(|max_batch| positive("max_batch", max_batch, usize::MAX)).transpose()?,
    };
    Ok((max_message_bytes, limits))
}

/// `max_message_bytes` as given to `FrameDecoder`, checked as [`checked_limits`] checks it.
pub(crate) fn checked_max_message_bytes(max_message_bytes: i64) -> PyResult<usize> {
    positive("max_message_bytes", max_message_bytes, usize::MAX)
}

/// `value` if it is at least 1 (and at most `most`), else a `ValueError` naming it.
fn positive(name: &str, value: i64, most: usize) -> PyResult<usize> {
    match usize::try_from(value) {
        Ok(value) if (1..=most).contains(&value) => Ok(value),
        _ if most == usize::MAX => Err(PyValueError::new_err(format!("{name} must be at least 1, not {value}"))),
        _ => Err(PyValueError::new_err(format!("{name} must be between 1 and {most}, not {value}"))),
    }
}

/// What `StdioTransport._read_message` returns for a line (not blank): the transport's own answer
/// as `bytes`, a `Request`, or for a batch a `list` of a `Request` per valid entry and the answer's
/// `bytes` per invalid one, in order.
pub(crate) fn message_object<'py>(
    py: Python<'py>,
    line: &[u8],
    limits: Limits,
    mut strings: Option<&mut StringCache>,
) -> PyResult<Bound<'py, PyAny>> {
    let mut answer = Vec::new();
    let read = read_line(py, line, limits, strings.as_deref_mut(), &mut answer)?;
    message_from(py, read, &answer, line.len(), strings)
}

/// As [`message_object`], for what was read from `size` bytes; `answer` holds the transport's own answer
/// when it is `Answered`. Each `Request` carries its size (`_wire_size`, see [`set_wire_size`]).
fn message_from<'py>(
    py: Python<'py>,
    read: Read<'_, 'py>,
    answer: &[u8],
    size: usize,
    mut strings: Option<&mut StringCache>,
) -> PyResult<Bound<'py, PyAny>> {
    let mut out = Vec::new();
    let mut entry_object = |entry: PyEntry<'_, 'py>, strings: Option<&mut StringCache>, size: usize| match entry {
        Entry::Call(call) => {
            let request = request_object(py, call, strings)?;
            set_wire_size(&request, size)?;
            Ok(request)
        }
        Entry::Invalid { id, reason } => {
            out.clear();
            answer::invalid_request(py, id.as_ref(), reason, &mut out)?;
            Ok(PyBytes::new(py, &out).into_any())
        }
    };
    match read {
        Read::Answered => Ok(PyBytes::new(py, answer).into_any()),
        Read::Single(entry) => entry_object(entry, strings, size),
        Read::Batch(entries) => {
            let share = (size / entries.len()).max(1);
            let items = entries
                .into_iter()
                .map(|entry| entry_object(entry, strings.as_deref_mut(), share))
                .collect::<PyResult<Vec<_>>>()?;
            Ok(PyList::new(py, items)?.into_any())
        }
    }
}

/// A read `Request`'s `_wire_size`: the bytes of the message it was read from (a batch entry: its share of
/// the batch's), what the serving session counts a held request as (rpcwire._session). Free here, where a
/// measure of it after the fact would encode its params again. Stored as `object.__setattr__` stores the
/// frozen dataclass's own fields, past its `__setattr__` (which refuses); not a field: no `__init__`
/// argument, no part in comparisons or the `repr`.
fn set_wire_size(request: &Bound<'_, PyAny>, size: usize) -> PyResult<()> {
    let py = request.py();
    store(request, pyo3::intern!(py, "_wire_size"), size.into_pyobject(py)?.as_any())
}

/// A `Request` for a valid message: the method from `strings` when it is given, the id as
/// `json.loads` gives it and as an answer writes it (`id_json`).
pub(crate) fn request_object<'py>(
    py: Python<'py>,
    call: Call<'_, Bound<'py, PyAny>>,
    strings: Option<&mut StringCache>,
) -> PyResult<Bound<'py, PyAny>> {
    let method = codec::decode_str(py, call.method, strings)?;
    let params = call.params.unwrap_or_else(|| py.None().into_bound(py));
    request_from_parts(py, method, params, call.id.as_ref())
}

/// A `Request` from its method, params and id (`None` for a notification).
// (`method` and `params` are consumed only where the class is called: PyPy, GraalPy, the limited API.)
#[cfg_attr(not(any(PyPy, GraalPy, Py_LIMITED_API)), allow(clippy::needless_pass_by_value))]
pub(crate) fn request_from_parts<'py>(
    py: Python<'py>,
    method: Bound<'py, PyString>,
    params: Bound<'py, PyAny>,
    id: Option<&Id<'_>>,
) -> PyResult<Bound<'py, PyAny>> {
    let (id_object, id_json) = match id {
        Some(id) => {
            let mut json = Vec::new();
            id.write_json(&mut json);
            (id_to_python(py, id)?, PyBytes::new(py, &json).into_any())
        }
        None => (py.None().into_bound(py), py.None().into_bound(py)),
    };
    let is_notification = PyBool::new(py, id.is_none()).to_owned().into_any();
    let class = bound::request(py)?;
    // `Request` is a frozen dataclass whose `__init__` only stores its five fields with `object.__setattr__`
    // (rpcwire._types): it is made as `object.__new__(Request)` makes it and the fields stored the same way, in
    // the same order, without the Python frame of `__init__` and its five calls, which every request read would
    // otherwise pay (the figure: docs/performance.md, "The concurrent engines' pipelined echo"). (A `__post_init__`
    // there would have to be called here.)
    #[cfg(not(any(PyPy, GraalPy, Py_LIMITED_API)))]
    {
        let empty = pyo3::types::PyTuple::empty(py);
        // SAFETY: `object.__new__`'s slot (`object_new`), called as `object.__new__(class)` calls it: a type object
        // and an empty tuple of arguments; it returns a new reference, or NULL with an exception set.
        let object = unsafe {
            let new = (*std::ptr::addr_of!(pyo3::ffi::PyBaseObject_Type)).tp_new;
            let new = new.ok_or_else(|| pyo3::exceptions::PyTypeError::new_err("object has no tp_new"))?;
            Bound::from_owned_ptr_or_err(py, new(class.as_type_ptr(), empty.as_ptr(), std::ptr::null_mut()))?
        };
        store(&object, pyo3::intern!(py, "method"), method.as_any())?;
        store(&object, pyo3::intern!(py, "params"), &params)?;
        store(&object, pyo3::intern!(py, "id"), &id_object)?;
        store(&object, pyo3::intern!(py, "is_notification"), &is_notification)?;
        store(&object, pyo3::intern!(py, "id_json"), &id_json)?;
        Ok(object)
    }
    // Positional, in the order of the dataclass's fields: no keyword dict to build.
    #[cfg(any(PyPy, GraalPy, Py_LIMITED_API))]
    class.call1((method, params, id_object, is_notification, id_json))
}

/// `object.__setattr__(object, name, value)`: past a frozen dataclass's own `__setattr__` (which refuses), as
/// its `__init__` stores its fields.
fn store(object: &Bound<'_, PyAny>, name: &Bound<'_, PyString>, value: &Bound<'_, PyAny>) -> PyResult<()> {
    // SAFETY: three valid object pointers, borrowed for the call; -1 means an exception is set.
    let done = unsafe { pyo3::ffi::PyObject_GenericSetAttr(object.as_ptr(), name.as_ptr(), value.as_ptr()) };
    if done == 0 {
        Ok(())
    } else {
        Err(PyErr::fetch(object.py()))
    }
}

/// A request's id as `json.loads` would give it (`1e3` is `1000.0`).
pub(crate) fn id_to_python<'py>(py: Python<'py>, id: &Id<'_>) -> PyResult<Bound<'py, PyAny>> {
    Ok(match id {
        Id::Null => py.None().into_bound(py),
        Id::Number(text) if text.contains(['.', 'e', 'E']) => codec::float_from_json(py, text)?,
        Id::Number(digits) => codec::int_from_json(py, digits)?,
        Id::String(text) => codec::decode_str(py, *text, None)?.into_any(),
        Id::Json(json) => codec::decode(py, &String::from_utf8_lossy(json), 1, None)?,
    })
}

/// Parse one JSON-RPC message (not a batch): `(Request, None)`, or `(None, error_response)` where
/// the error response is the answer as a dict, ready to write.
#[pyfunction]
pub(crate) fn parse_request<'py>(
    py: Python<'py>,
    raw: &Bound<'py, PyAny>,
) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
    let none = || py.None().into_bound(py);
    // `str` and `bytes` are read where they are (a `str`'s UTF-8 form is the one it keeps); a
    // `bytearray` can change while Python code runs, so it is copied.
    let copied;
    let bytes = if let Ok(text) = raw.cast::<PyString>() {
        // A `str` holding lone surrogates has no UTF-8 form: it is not a JSON text on any wire.
        text.to_str().map(str::as_bytes).ok()
    } else if let Ok(bytes) = raw.cast::<PyBytes>() {
        Some(bytes.as_bytes())
    } else if let Ok(array) = raw.cast::<PyByteArray>() {
        copied = array.to_vec();
        Some(copied.as_slice())
    } else {
        return Err(pyo3::exceptions::PyTypeError::new_err("parse_request takes str or bytes"));
    };
    // The params are decoded in the envelope's pass (one walk over the text): a syntax error
    // anywhere is a parse error, as when they were decoded after the check.
    let limits = Limits { max_batch: None, ..Limits::default() };
    let parsed = bytes.and_then(|bytes| std::str::from_utf8(bytes).ok()).map(|text| {
        envelope::parse_message_with(text, limits, |scanner: &mut Scanner<'_>| codec::decode_value(py, scanner, None))
    });
    let parsed = match parsed {
        Some(Err(Error::Python(error))) => return Err(error),
        Some(Ok(parsed)) if !codec::exceeds_int_digit_limit(py, parsed.longest_integer)? => parsed,
        _ => return Ok((none(), answer::error_object(py, none(), StandardError::Parse)?)),
    };
    let entry = match parsed.message {
        Message::Single(entry) => entry,
        Message::Batch(_) | Message::BatchOverLimit => {
            return Ok((none(), answer::error_object(py, none(), StandardError::InvalidRequest)?))
        }
    };
    match entry {
        Entry::Invalid { id, reason } => {
            log::debug(py, "invalid request", reason)?;
            let id = id.as_ref().map_or_else(|| Ok(none()), |id| id_to_python(py, id))?;
            Ok((none(), answer::error_object(py, id, StandardError::InvalidRequest)?))
        }
        Entry::Call(call) => Ok((request_object(py, call, None)?, none())),
    }
}

#[cfg(test)]
mod tests {
    use super::is_ascii;

    #[test]
    fn is_ascii_agrees_with_the_standard_check_at_every_length_and_position() {
        for length in 0..100 {
            let ascii = vec![b'a'; length];
            assert!(is_ascii(&ascii), "{length}");
            for position in 0..length {
                for high in [0x80, 0xc3, 0xff] {
                    let mut bytes = ascii.clone();
                    bytes[position] = high;
                    assert_eq!(is_ascii(&bytes), bytes.is_ascii(), "{length} {position}");
                    assert!(!is_ascii(&bytes), "{length} {position}");
                }
            }
        }
    }
}

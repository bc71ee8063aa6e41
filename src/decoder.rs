//! `FrameDecoder`: the framing of [`rpcwire_protocol::framing::Decoder`] handed to Python, without I/O.
//!
//! Every Python reader of a stream that the native transport does not read itself (the asyncio client,
//! the MCP reader, `rpcwire.lsp`, `--listen`) feeds the bytes it read into one of these and takes
//! messages out, so that the framing rules, the `max_message_bytes` limit and the answers to dropped
//! messages exist once: here, and in the transport's reader, which is the same Rust `Decoder`.
//!
//! It hands out what `StdioTransport._read_message` and `_read_incoming` read: blank lines skipped
//! (newline framing; `skip_blank=False` hands them out, as `read_line` does), and a dropped message as
//! `rpcwire._types.Refused(reason, answer)`, with the reason `_read_incoming` gives and the answer
//! `_read_message` gives (logged at DEBUG as `_read_message` logs it, when it is handed out).
//!
//! One decoder may be shared by threads: its methods take turns on a lock (`StreamLock`, waited for
//! with the GIL released, as a transport's streams are), so that on a free-threaded interpreter too
//! each message is handed out once, whole, to one caller.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes};

use rpcwire_protocol::envelope::DEFAULT_MAX_MESSAGE_BYTES;
use rpcwire_protocol::framing::{Decoded, Decoder, Framing};

use crate::answer;
use crate::bound;
use crate::request;
use crate::stream::with_bytes;
use crate::stream_lock::StreamLock;

const REENTRANT: &str = "reentrant call: the FrameDecoder was called again from within one of its own calls";

/// The framing a name stands for, or the `ValueError` `StdioTransport` and `FrameDecoder` raise.
pub(crate) fn framing(name: &str) -> PyResult<Framing> {
    Framing::from_name(name)
        .ok_or_else(|| PyValueError::new_err(format!("framing must be 'newline' or 'content-length', not {name:?}")))
}

/// Framing without I/O: `feed(data)` the bytes read, `next()` the messages (`bytes`), the dropped ones
/// (`Refused`), or `None` when more input is needed; `close()` at the end of input.
///
/// The rules are `StdioTransport`'s (docs/semantics.md, "Framing"): `"newline"`, a message per line
/// ending at `\n` (a `\r` before it dropped), blank lines (spaces, tabs, `\r`) skipped, a last line
/// without `\n` handed out after `close()`; `"content-length"`, LSP's header block and body, an empty
/// body handed out as `b""` (it is not skipped), a bad frame dropped up to the next `Content-Length`.
/// `skip_blank=False` hands blank lines out instead, as `read_line` does (a reader that must see each
/// one: the MCP reader); it changes nothing for `"content-length"`, whose bodies are never skipped and
/// whose blank lines between frames are not messages. It is a `bool` (anything else: `TypeError`).
/// A message over `max_message_bytes` is dropped as it arrives (never held whole). A dropped message is
/// a `Refused` whose `reason` is what `StdioTransport._read_incoming` returns for it and whose `answer`
/// is the answer line `_read_message` returns (-32700, or -32600 for an over-long message that began as
/// JSON does, and for a `Content-Length` over the limit), logged at DEBUG as the transport logs it.
///
/// Threads may share one: each call takes the decoder's lock, so that a message is handed out once, to
/// one caller (which of the threads reading gets which message is theirs to arrange).
#[pyclass(frozen, module = "rpcwire._rpcwire")]
pub(crate) struct FrameDecoder {
    decoder: StreamLock<Decoder>,
    max_message_bytes: usize,
    /// Whether `next` skips blank lines (newline framing) or hands them out.
    skip_blank: bool,
}

/// `FrameDecoder`'s `skip_blank`: a `bool` and nothing else (a truthy `"no"` or a falsy `[]` would quietly mean
/// the opposite of what it says), refused in `rpcwire.pure`'s words.
#[derive(Clone, Copy)]
struct SkipBlank(bool);

impl<'a, 'py> FromPyObject<'a, 'py> for SkipBlank {
    type Error = PyErr;

    fn extract(value: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        match value.cast::<PyBool>() {
            Ok(flag) => Ok(Self(flag.is_true())),
            Err(_) => Err(PyTypeError::new_err(format!("skip_blank must be a bool, not {}", value.get_type().name()?))),
        }
    }
}

#[pymethods]
impl FrameDecoder {
    #[new]
    #[pyo3(
        signature = (framing="newline", *, max_message_bytes=DEFAULT_MAX_MESSAGE_BYTES, skip_blank=SkipBlank(true)),
        text_signature = "(framing='newline', *, max_message_bytes=67108864, skip_blank=True)"
    )]
    fn new(framing: &str, max_message_bytes: i64, skip_blank: SkipBlank) -> PyResult<Self> {
        let framing = self::framing(framing)?;
        let max_message_bytes = request::checked_max_message_bytes(max_message_bytes)?;
        Ok(Self {
            decoder: StreamLock::new(Decoder::new(framing, max_message_bytes), REENTRANT),
            max_message_bytes,
            skip_blank: skip_blank.0,
        })
    }

    /// Add bytes read from the stream (`b""` is not the end of input: see `close`). `ValueError` after
    /// `close()`.
    fn feed(&self, data: &Bound<'_, PyAny>) -> PyResult<()> {
        // The bytes first (a buffer's are copied, which may run Python code), then the lock.
        with_bytes(data, |bytes| {
            let mut decoder = self.decoder.lock(data.py())?;
            if decoder.is_closed() {
                return Err(PyValueError::new_err("feed() after close(): the input has ended"));
            }
            decoder.feed(bytes);
            Ok(())
        })?
    }

    /// The end of input: `next()` then hands out what is left (a last line without `\n` is a message,
    /// an unfinished frame a `Refused`) and `None` after it. Closing twice changes nothing.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.decoder.lock(py)?.close();
        Ok(())
    }

    /// The next message's bytes, a `Refused` for one that was dropped, or `None` when more input is
    /// needed (after `close()`: when nothing is left). A blank line is skipped, or handed out (as `b""`
    /// or its spaces, tabs and `\r`s) with `skip_blank=False`.
    fn next<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let mut decoder = self.decoder.lock(py)?;
        let dropped = match decoder.next(self.skip_blank) {
            None => return Ok(None),
            Some(Decoded::Message(message)) => return Ok(Some(PyBytes::new(py, message).into_any())),
            Some(Decoded::Dropped(dropped)) => dropped,
        };
        // The lock is not held while the `Refused` is made and logged (Python code).
        drop(decoder);
        let mut answer = Vec::new();
        answer::dropped(py, dropped, self.max_message_bytes, &mut answer)?;
        let reason = dropped.reason(self.max_message_bytes);
        Ok(Some(bound::refused(py)?.call1((reason, PyBytes::new(py, &answer)))?))
    }
}

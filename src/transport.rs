//! Transport: the `StdioTransport` class and the `serve` loop.
//!
//! I/O model: one thread runs `serve`, which reads, dispatches and writes in turn; any thread may
//! call the `write_*` methods (a handler's progress notifications, for instance). Reading feeds a
//! framing [`Decoder`] with whatever one read returns: `readinto1` (or `read1`) on buffered streams gives
//! up to 64 KiB of what is already there and never waits for more than one line needs; streams
//! without them are read with `readline`.
//!
//! Answers are coalesced only where no handler stands between them: `serve` gathers answers and
//! writes and flushes them in one `write` just before it calls the next handler, and before the
//! next read that could block. So a finished answer is out before any later handler runs (a slow
//! or process-ending handler cannot hold it back), while a run of answers that need no handler
//! (-32700s, -32600s, over-long lines) goes out in one write. `write_*` calls go out at once.
//! Each stream is used under a [`StreamLock`]: writers never interleave, a waiting thread still
//! runs signal handlers, and a stream that calls back into its own transport gets an error.
//!
//! Framing is the transport's: `framing="newline"` (the default: one message per line) or
//! `framing="content-length"` (LSP's base protocol: `Content-Length: N\r\n\r\n` and N bytes of
//! body). Everything above reads and writes *messages* (`read_line`, `_read_message`,
//! `_write_line`...), whatever the framing; only the [`Decoder`] and [`Framing::frame`] differ. The
//! decoder is the one `rpcwire._rpcwire.FrameDecoder` gives Python readers, so they see what this one does.
//!
//! Reads go through the stream's own `readinto1`, which releases the GIL during the system call
//! and runs signal handlers when one interrupts it. Reading a pipe's file descriptor directly was
//! weighed and left out: on the pipe ping-pong benchmark a whole round trip costs 4.0 µs (p50)
//! against 3.2 µs for a Python echo loop of `os.read`/`os.write`, so the `readinto1` call is a
//! small part of the 0.8 µs that parsing, dispatch and encoding also take, and a direct read would
//! have to drain the Python buffer first and redo its signal handling.

use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;
use pyo3::exceptions::{PyBaseException, PyBlockingIOError, PyOSError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyByteArray, PyBytes, PyDict, PyInt, PyString, PyType};

use crate::answer;
use crate::bound;
use crate::codec;
use crate::decoder;
use crate::dispatch;
use crate::envelope::{Id, Limits, DEFAULT_MAX_BATCH, DEFAULT_MAX_DEPTH, DEFAULT_MAX_MESSAGE_BYTES};
use crate::framing::{Decoded, Decoder, Dropped, Framing};
use crate::reply;
use crate::request;
use crate::stream_lock::StreamLock;
use crate::strings::StringCache;

/// How much one `readinto1`/`read1`/`readline` call may return.
const READ_CHUNK: usize = 64 * 1024;

/// Gathered answers are written once they reach this size, even if more lines are buffered.
const COALESCE_LIMIT: usize = 64 * 1024;

const REENTRANT_READ: &str = "reentrant read: the input stream called back into the transport it belongs to";
const REENTRANT_WRITE: &str = "reentrant write: the output stream called back into the transport it belongs to";

static TEXT_IO_BASE: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static RAW_IO_BASE: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static UNSUPPORTED_OPERATION: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// Which method of the input stream fills the buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ReadMethod {
    /// Buffered streams: at most one raw read, into a reused `bytearray`.
    ReadInto1,
    /// Buffered streams without `readinto1`: at most one raw read, as new `bytes`.
    Read1,
    /// Raw (unbuffered) streams: one system call, into a reused `bytearray`.
    ReadInto,
    /// Anything else with a `readline`.
    Readline,
}

impl ReadMethod {
    fn name(self) -> &'static str {
        match self {
            Self::ReadInto1 => "readinto1",
            Self::Read1 => "read1",
            Self::ReadInto => "readinto",
            Self::Readline => "readline",
        }
    }
}

/// What `Reader::next_line` found.
enum Next {
    /// A line (or a frame's body), copied into the caller's buffer.
    Line,
    /// A message the framing dropped (over `max_message_bytes`, or a frame that cannot be read).
    Dropped(Dropped),
    End,
}

struct Reader {
    stream: Py<PyAny>,
    method: ReadMethod,
    /// The stream's bound method for `method`, looked up once rather than on every read.
    read: Py<PyAny>,
    chunk: Py<PyByteArray>,
    /// The bytes read and not yet handed out, split by the transport's framing.
    decoder: Decoder,
}

impl Reader {
    /// Copy the next line (without `\n`/`\r\n`), or the next frame's body, into `line`; `skip_blank`:
    /// as [`Decoder::next`].
    fn next_line(&mut self, py: Python<'_>, line: &mut Vec<u8>, skip_blank: bool) -> PyResult<Next> {
        loop {
            match self.decoder.next(skip_blank) {
                Some(Decoded::Message(message)) => {
                    line.clear();
                    line.extend_from_slice(message);
                    return Ok(Next::Line);
                }
                Some(Decoded::Dropped(dropped)) => return Ok(Next::Dropped(dropped)),
                None => {}
            }
            if self.decoder.is_closed() {
                return Ok(Next::End);
            }
            if !self.fill(py)? {
                self.decoder.close();
            }
        }
    }

    /// Whether `next_line` with the same `skip_blank` can return without reading.
    fn has_line(&mut self, skip_blank: bool) -> bool {
        self.decoder.has_message(skip_blank)
    }

    /// One read from the stream into the buffer; `Ok(false)` at end of input.
    fn fill(&mut self, py: Python<'_>) -> PyResult<bool> {
        // A signal that arrived since the interpreter last looked (SIGINT while the previous line was
        // being answered) would not interrupt the read about to block: its handler runs first.
        py.check_signals()?;
        match self.read_once(py) {
            Err(error) if self.method != ReadMethod::Readline && error.is_instance(py, unsupported_operation(py)?) => {
                // An `io.BufferedIOBase` subclass inherits `readinto1`/`read1` that it does not implement.
                self.method = ReadMethod::Readline;
                self.read = self.stream.bind(py).getattr(ReadMethod::Readline.name())?.unbind();
                self.read_once(py)
            }
            other => other,
        }
    }

    fn read_once(&mut self, py: Python<'_>) -> PyResult<bool> {
        let read = self.read.bind(py);
        match self.method {
            ReadMethod::ReadInto1 | ReadMethod::ReadInto => {
                let chunk = self.chunk.bind(py);
                let count = read.call1((chunk,))?;
                if count.is_none() {
                    return Err(PyBlockingIOError::new_err(
                        "stdin is non-blocking and had no data; pass a blocking stream",
                    ));
                }
                let count = checked_count(&count, self.method.name(), chunk.len())?;
                // SAFETY: no Python code runs while the slice is alive, so the bytearray cannot change.
                let filled = &mut unsafe { chunk.as_bytes_mut() }[..count];
                self.decoder.feed(filled);
                // Zeroed once copied: a stream that claims more than it filled gets zeros (a
                // -32700), never the bytes of an earlier read served again.
                filled.fill(0);
                Ok(count > 0)
            }
            // `readline` is bounded too, so that an endless line is never held whole.
            ReadMethod::Read1 | ReadMethod::Readline => self.extend_with(&read.call1((READ_CHUNK,))?),
        }
    }

    fn extend_with(&mut self, data: &Bound<'_, PyAny>) -> PyResult<bool> {
        if let Ok(bytes) = data.cast::<PyBytes>() {
            self.decoder.feed(bytes.as_bytes());
        } else if let Ok(array) = data.cast::<PyByteArray>() {
            self.decoder.feed(&array.to_vec());
        } else {
            return Err(PyTypeError::new_err("stdin must return bytes; pass a binary file-like object"));
        }
        Ok(data.len()? > 0)
    }
}

/// The count a stream method returned, if it is within `0..=most`; else `OSError`, in the words
/// `io.BufferedReader` and `io.BufferedWriter` use for the same fault of a raw stream.
fn checked_count(count: &Bound<'_, PyAny>, method: &str, most: usize) -> PyResult<usize> {
    let int = count.cast::<PyInt>()?;
    match int.extract::<usize>() {
        Ok(count) if count <= most => Ok(count),
        _ => Err(PyOSError::new_err(format!(
            "{method}() returned invalid length {int} (should have been between 0 and {most})"
        ))),
    }
}

struct Writer {
    /// The stream, and its bound `write` and `flush`, looked up once.
    stream: Py<PyAny>,
    write: Py<PyAny>,
    flush: Option<Py<PyAny>>,
}

impl Writer {
    /// A writer of `stream` (a binary stream: see [`binary_stream`]), whose `flush` is callable or absent.
    fn new(py: Python<'_>, stream: Bound<'_, PyAny>) -> PyResult<Self> {
        let flush = match stream.getattr_opt("flush")? {
            Some(flush) if !flush.is_callable() => {
                return Err(PyTypeError::new_err("stdout.flush must be callable (or absent)"));
            }
            flush => flush.map(Bound::unbind),
        };
        Ok(Self { write: stream.getattr(intern!(py, "write"))?.unbind(), flush, stream: stream.unbind() })
    }

    /// One `write` of `data` (more only if a raw stream takes part of it), then `flush`.
    fn write_all(&self, py: Python<'_>, data: &[u8]) -> PyResult<()> {
        let write = self.write.bind(py);
        let mut offset = 0;
        while offset < data.len() {
            let rest = data.len() - offset;
            let written = write.call1((PyBytes::new(py, &data[offset..]),))?;
            // Buffered streams take everything; a raw stream may take only part of it.
            offset += if written.is_none() { rest } else { checked_count(&written, "write", rest)? };
            if offset < data.len() {
                // A write to a pipe that a signal interrupts returns what it wrote so far, not
                // EINTR, so the signal's handler (SIGINT's KeyboardInterrupt) runs here or never.
                py.check_signals()?;
            }
        }
        if let Some(flush) = &self.flush {
            flush.call0(py)?;
        }
        Ok(())
    }
}

fn unsupported_operation(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    UNSUPPORTED_OPERATION.import(py, "io", "UnsupportedOperation")
}

/// `stream`, or its `.buffer` if it is a text stream; it must have a callable `needs` method.
fn binary_stream<'py>(
    py: Python<'py>,
    stream: Option<Bound<'py, PyAny>>,
    name: &str,
    needs: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let mut stream = match stream {
        Some(stream) if !stream.is_none() => stream,
        _ => py.import("sys")?.getattr(name)?,
    };
    if stream.is_instance(TEXT_IO_BASE.import(py, "io", "TextIOBase")?)? {
        stream = match stream.getattr_opt("buffer")? {
            Some(buffer) if !buffer.is_none() => buffer,
            _ => {
                return Err(PyTypeError::new_err(format!(
                    "{name} is a text stream without a binary .buffer; pass a binary file-like object"
                )))
            }
        };
    }
    if !stream.getattr_opt(needs)?.is_some_and(|method| method.is_callable()) {
        return Err(PyTypeError::new_err(format!("{name} must be a binary file-like object with a {needs}() method")));
    }
    Ok(stream)
}

fn read_method(py: Python<'_>, stream: &Bound<'_, PyAny>) -> PyResult<ReadMethod> {
    let has = |name: &str| -> PyResult<bool> { Ok(stream.getattr_opt(name)?.is_some_and(|m| m.is_callable())) };
    Ok(if has("readinto1")? {
        ReadMethod::ReadInto1
    } else if has("read1")? {
        ReadMethod::Read1
    } else if has("readinto")? && stream.is_instance(RAW_IO_BASE.import(py, "io", "RawIOBase")?)? {
        ReadMethod::ReadInto
    } else {
        ReadMethod::Readline
    })
}

/// JSON-RPC 2.0 over a pair of binary streams, one message per line or per `Content-Length` frame.
///
/// `stdin` and `stdout` default to `sys.stdin.buffer` and `sys.stdout.buffer`; a text stream is
/// replaced by its `.buffer`. Writes from several threads never interleave.
#[pyclass(frozen, module = "rpcwire._rpcwire")]
pub(crate) struct StdioTransport {
    reader: StreamLock<Reader>,
    writer: StreamLock<Writer>,
    framing: Framing,
    max_message_bytes: usize,
    limits: Limits,
    /// `_read_message`'s cache of short strings (`serve` has its own, per call). Taken with
    /// `try_lock`: a thread that finds it in use decodes without it.
    strings: Mutex<StringCache>,
    /// Whether a `serve` (this loop, or the engine's) runs over this transport: a second one is
    /// refused, since two readers would share the input and an answer could wait behind the other's
    /// read until more input came.
    serving: AtomicBool,
}

const ALREADY_SERVING: &str =
    "this transport is already serving: serve() was called on it again before the first call returned";

/// `serve`'s own loop running over a transport, from `_start_serving` until it is dropped (however
/// `serve` returns).
struct Serving<'a>(&'a StdioTransport);

impl<'a> Serving<'a> {
    fn start(transport: &'a StdioTransport) -> PyResult<Self> {
        transport.start_serving()?;
        Ok(Self(transport))
    }
}

impl Drop for Serving<'_> {
    fn drop(&mut self) {
        self.0.stop_serving();
    }
}

/// `serve`'s `max_concurrency`: absent (1), or what was given, for `rpcwire.serve`'s rule to check.
enum MaxConcurrency<'py> {
    Absent,
    Given(Bound<'py, PyAny>),
}

impl<'a, 'py> FromPyObject<'a, 'py> for MaxConcurrency<'py> {
    type Error = PyErr;

    fn extract(value: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        Ok(Self::Given(value.to_owned()))
    }
}

impl StdioTransport {
    fn send(&self, py: Python<'_>, mut line: Vec<u8>) -> PyResult<()> {
        self.framing.frame(&mut line);
        self.writer.lock(py)?.write_all(py, &line)
    }

    /// The next message into `line`, blank lines skipped (newline framing): `Next::Line`, the end of
    /// input, or what was dropped. What `_read_message`, `_read_incoming` and `_read_value` read.
    fn next_message(&self, py: Python<'_>, line: &mut Vec<u8>) -> PyResult<Next> {
        self.reader.lock(py)?.next_line(py, line, true)
    }

    /// Write the answers `serve` gathered, in one `write`. They are dropped even if writing (or
    /// waiting to write) fails, so that nothing is ever written twice and an interrupt is final.
    fn write_gathered(&self, py: Python<'_>, gathered: &mut Vec<u8>) -> PyResult<()> {
        if gathered.is_empty() {
            return Ok(());
        }
        let written = self.writer.lock(py).and_then(|writer| writer.write_all(py, gathered));
        gathered.clear();
        written
    }

    /// The serve loop; answers gathered when it fails are left in `gathered` for `serve` to write.
    fn answer_all(
        &self,
        py: Python<'_>,
        this: &Bound<'_, PyAny>,
        handler: &Bound<'_, PyAny>,
        gathered: &mut Vec<u8>,
    ) -> PyResult<()> {
        let mut line = Vec::new();
        let mut answer = Vec::new();
        let mut strings = StringCache::default();
        loop {
            // With no complete line buffered, the next read may block: first write what was
            // gathered (without holding the reader, which other threads may ask for).
            let mut reader = self.reader.lock(py)?;
            if !reader.has_line(true) {
                drop(reader);
                self.write_gathered(py, gathered)?;
                reader = self.reader.lock(py)?;
            }
            let next = reader.next_line(py, &mut line, true)?;
            drop(reader);
            answer.clear();
            match next {
                Next::End => return Ok(()),
                Next::Line => {
                    // No finished answer waits for a handler: what was gathered goes out first.
                    let mut before_call = || self.write_gathered(py, gathered);
                    let mut caller = dispatch::Caller {
                        transport: Some(this),
                        handler,
                        before_call: &mut before_call,
                        expose_errors: true,
                    };
                    if !dispatch::answer_line(py, &line, &mut caller, self.limits, Some(&mut strings), &mut answer)? {
                        continue;
                    }
                }
                Next::Dropped(dropped) => request::answer_dropped(py, dropped, self.max_message_bytes, &mut answer)?,
            }
            self.framing.frame(&mut answer);
            if gathered.is_empty() && answer.len() >= COALESCE_LIMIT {
                // A large answer goes out as it is, without a copy.
                self.writer.lock(py)?.write_all(py, &answer)?;
            } else {
                gathered.extend_from_slice(&answer);
                if gathered.len() >= COALESCE_LIMIT {
                    self.write_gathered(py, gathered)?;
                }
            }
        }
    }
}

/// `id` as an answer writes it.
fn encoded(id: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    let mut json = Vec::new();
    codec::encode(&mut json, id)?;
    Ok(json)
}

#[pymethods]
impl StdioTransport {
    #[new]
    #[pyo3(signature = (
        stdin=None,
        stdout=None,
        *,
        max_message_bytes=DEFAULT_MAX_MESSAGE_BYTES,
        max_depth=i64::from(DEFAULT_MAX_DEPTH),
        max_batch=Some(i64::from(DEFAULT_MAX_BATCH)),
        framing="newline",
    ), text_signature = "(stdin=None, stdout=None, *, max_message_bytes=67108864, max_depth=128, max_batch=1000, framing='newline')")]
    fn new(
        py: Python<'_>,
        stdin: Option<Bound<'_, PyAny>>,
        stdout: Option<Bound<'_, PyAny>>,
        max_message_bytes: i64,
        max_depth: i64,
        max_batch: Option<i64>,
        framing: &str,
    ) -> PyResult<Self> {
        let framing = decoder::framing(framing)?;
        // An `i64` is at most `usize::MAX / 2` here, so `max_message_bytes + 1` cannot overflow.
        let (max_message_bytes, limits) = request::checked_limits(max_message_bytes, max_depth, max_batch)?;
        let stdin = binary_stream(py, stdin, "stdin", "readline")?;
        let stdout = binary_stream(py, stdout, "stdout", "write")?;
        let method = read_method(py, &stdin)?;
        let reader = Reader {
            method,
            read: stdin.getattr(method.name())?.unbind(),
            stream: stdin.unbind(),
            chunk: PyByteArray::new(py, &vec![0; READ_CHUNK]).unbind(),
            decoder: Decoder::new(framing, max_message_bytes),
        };
        let writer = Writer::new(py, stdout)?;
        Ok(Self {
            reader: StreamLock::new(reader, REENTRANT_READ),
            writer: StreamLock::new(writer, REENTRANT_WRITE),
            framing,
            max_message_bytes,
            limits,
            strings: Mutex::new(StringCache::default()),
            serving: AtomicBool::new(false),
        })
    }

    /// `"newline"` or `"content-length"`.
    #[getter]
    fn framing(&self) -> &'static str {
        self.framing.name()
    }

    /// The next line without its `\n` (or `\r\n`); `None` at end of input. A line longer than
    /// `max_message_bytes` is discarded and raises `ValueError`; the next call reads on after it.
    /// With `framing="content-length"`: the next frame's body; a frame that cannot be read (or is
    /// over the limit) raises `ValueError` and is dropped, and the next call reads on after it.
    fn read_line<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let mut line = Vec::new();
        match self.reader.lock(py)?.next_line(py, &mut line, false)? {
            Next::Line => Ok(Some(PyBytes::new(py, &line))),
            Next::End => Ok(None),
            Next::Dropped(dropped) => {
                Err(PyValueError::new_err(format!("{} was discarded", dropped.reason(self.max_message_bytes))))
            }
        }
    }

    /// The next message decoded as JSON (any value, as `json.loads` builds it); `None` at end of
    /// input. A message that cannot be read or is not JSON raises `ValueError` (the next call reads
    /// on after it). Blank lines are skipped (newline framing).
    #[pyo3(name = "_read_value")]
    fn read_value<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let mut line = Vec::new();
        match self.next_message(py, &mut line)? {
            Next::End => Ok(None),
            Next::Line => {
                let text = std::str::from_utf8(&line).map_err(|error| PyValueError::new_err(error.to_string()))?;
                let mut strings = self.strings.try_lock();
                Ok(Some(codec::decode(py, text, self.limits.max_depth, strings.as_deref_mut())?))
            }
            Next::Dropped(dropped) => {
                Err(PyValueError::new_err(format!("{} was discarded", dropped.reason(self.max_message_bytes))))
            }
        }
    }

    /// Encode `message` (any JSON value) as compact JSON and write it as one message.
    #[pyo3(name = "_write_message")]
    fn write_message(&self, py: Python<'_>, message: &Bound<'_, PyAny>) -> PyResult<()> {
        let mut line = Vec::new();
        codec::encode(&mut line, message)?;
        self.send(py, line)
    }

    /// Write a success answer `{"jsonrpc":"2.0","id":id,"result":result}`.
    fn write_response(&self, py: Python<'_>, id: &Bound<'_, PyAny>, result: &Bound<'_, PyAny>) -> PyResult<()> {
        let mut line = Vec::new();
        answer::success(&mut line, &Id::Json(&encoded(id)?), result)?;
        self.send(py, line)
    }

    /// Write an error answer; the `data` member is left out when `data` is `None`.
    #[pyo3(signature = (id, code, message, data=None))]
    fn write_error(
        &self,
        py: Python<'_>,
        id: &Bound<'_, PyAny>,
        code: &Bound<'_, PyAny>,
        message: &Bound<'_, PyAny>,
        data: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let mut line = Vec::new();
        answer::error(&mut line, &Id::Json(&encoded(id)?), code, message, data)?;
        self.send(py, line)
    }

    /// Write a notification (no `id`), e.g. a progress event while a request is in flight.
    #[pyo3(signature = (method, params=None))]
    fn write_notification(
        &self,
        py: Python<'_>,
        method: &Bound<'_, PyAny>,
        params: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let mut line = Vec::new();
        answer::notification(&mut line, method, params)?;
        self.send(py, line)
    }

    /// The next message, read and classified as `serve` reads it (blank lines skipped): `None` at
    /// end of input; `bytes`, the whole answer line (without `\n`) the transport gives itself (a
    /// parse error, an invalid message, an empty or over-long batch, a line over
    /// `max_message_bytes`); a `Request`; for a batch, a `list` of a `Request` per valid entry and
    /// the answer's `bytes` per invalid one, in order.
    #[pyo3(name = "_read_message")]
    fn read_message<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let mut line = Vec::new();
        match self.next_message(py, &mut line)? {
            Next::End => Ok(None),
            Next::Line => {
                let mut strings = self.strings.try_lock();
                request::message_object(py, &line, self.limits, strings.as_deref_mut()).map(Some)
            }
            Next::Dropped(dropped) => {
                let mut answer = Vec::new();
                request::answer_dropped(py, dropped, self.max_message_bytes, &mut answer)?;
                Ok(Some(PyBytes::new(py, &answer).into_any()))
            }
        }
    }

    /// Whether the next `_read_incoming` (or `read_line`) returns without reading the stream: a whole
    /// line, or the end of input, is already buffered.
    #[pyo3(name = "_has_buffered_message")]
    fn has_buffered_message(&self, py: Python<'_>) -> PyResult<bool> {
        Ok(self.reader.lock(py)?.has_line(false))
    }

    /// Read once from the stream (what one `readinto1` gives, which waits only when nothing is there)
    /// unless a whole message is already buffered; then `_has_buffered_message` tells whether one is.
    /// A client waiting with a timeout reads this way once `select` says the stream is readable, so that
    /// half a message never blocks it past its deadline.
    #[pyo3(name = "_read_available")]
    fn read_available(&self, py: Python<'_>) -> PyResult<()> {
        let mut reader = self.reader.lock(py)?;
        if !reader.has_line(false) && !reader.fill(py)? {
            reader.decoder.close();
        }
        Ok(())
    }

    /// The next message as a client reads it (blank lines skipped), nested at most `max_depth` deep:
    /// `None` at end of input; a `Response`; a `Request` (the server's own request or notification); a
    /// `list` of these for a batch; a `str` saying why a message (a line over `max_message_bytes`
    /// included) is neither; or, for a message that cannot be decoded, `(why, its bytes)`, so that the
    /// client can look for the call it names.
    #[pyo3(name = "_read_incoming")]
    fn read_incoming<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let mut line = Vec::new();
        match self.next_message(py, &mut line)? {
            Next::End => Ok(None),
            Next::Line => {
                let mut strings = self.strings.try_lock();
                match reply::incoming_object(py, &line, self.limits.max_depth, strings.as_deref_mut())? {
                    reply::Incoming::Message(message) => Ok(Some(message)),
                    reply::Incoming::Unreadable(reason) => {
                        let pair = (PyString::new(py, &reason), PyBytes::new(py, &line));
                        Ok(Some(pair.into_pyobject(py)?.into_any()))
                    }
                }
            }
            Next::Dropped(dropped) => Ok(Some(PyString::new(py, &dropped.reason(self.max_message_bytes)).into_any())),
        }
    }

    /// `(max_message_bytes, max_depth, max_batch)`, as given (`max_batch` `None` when unlimited): the
    /// limits a client checks its own messages against before it sends them.
    #[getter(_limits)]
    fn limits_given(&self) -> (usize, usize, Option<usize>) {
        (self.max_message_bytes, self.limits.max_depth, self.limits.max_batch)
    }

    /// The answer line (without `\n`) `serve` writes for a handler that returned `result` to the
    /// request whose `id_json` is given: a success answer, or -32603 if `result` cannot be encoded
    /// (logged; without the exception's name and text in `data` when `expose_errors` is false).
    #[pyo3(name = "_answer_result", signature = (id_json, result, *, expose_errors=true))]
    #[staticmethod] // reached through a transport or its class, as `rpcwire.pure`'s
    fn answer_result<'py>(
        py: Python<'py>,
        id_json: &[u8],
        result: &Bound<'py, PyAny>,
        expose_errors: bool,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let mut line = Vec::new();
        answer::result(&mut line, &Id::Json(id_json), result, expose_errors)?;
        Ok(PyBytes::new(py, &line))
    }

    /// The answer line (without `\n`) `serve` writes for a handler that raised `exception` to the
    /// request whose `id_json` is given (a -32603 without the exception's name and text in `data` when
    /// `expose_errors` is false). The handler's exception itself is not logged here: the caller knows
    /// the method.
    #[pyo3(name = "_answer_error", signature = (id_json, exception, *, expose_errors=true))]
    #[staticmethod] // reached through a transport or its class, as `rpcwire.pure`'s
    fn answer_error<'py>(
        py: Python<'py>,
        id_json: &[u8],
        exception: &Bound<'py, PyBaseException>,
        expose_errors: bool,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let mut line = Vec::new();
        answer::exception(&mut line, &Id::Json(id_json), exception, expose_errors)?;
        Ok(PyBytes::new(py, &line))
    }

    /// Write `line` as one message (`line` and `\n`, or a `Content-Length` frame around it, whatever it
    /// holds) in one `write`, then flush, under the writer lock (as `write_*` do).
    #[pyo3(name = "_write_line")]
    fn write_line(&self, py: Python<'_>, line: &[u8]) -> PyResult<()> {
        let mut data = Vec::with_capacity(line.len() + 32);
        self.framing.frame_into(line, &mut data);
        self.writer.lock(py)?.write_all(py, &data)
    }

    /// Write each of `lines` (bytes-like) as one message, all in one `write`, then flush, under the
    /// writer lock: answers gathered by the engine go out together. Nothing is written for no lines.
    #[pyo3(name = "_write_lines")]
    fn write_lines(&self, py: Python<'_>, lines: &Bound<'_, PyAny>) -> PyResult<()> {
        let mut data = Vec::new();
        for line in lines.try_iter()? {
            decoder::with_bytes(&line?, |line| self.framing.frame_into(line, &mut data))?;
        }
        if data.is_empty() {
            return Ok(());
        }
        self.writer.lock(py)?.write_all(py, &data)
    }

    /// Write to `stdout` from now on (a binary stream, or a text stream's `.buffer`), and return the
    /// stream written to until now. Swapped under the writer's lock: a write in progress ends on the
    /// old stream, every later one goes to the new. The engine's guard of the process's fd 1 uses it.
    #[pyo3(name = "_swap_output")]
    fn swap_output(&self, py: Python<'_>, stdout: Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let writer = Writer::new(py, binary_stream(py, Some(stdout), "stdout", "write")?)?;
        let previous = std::mem::replace(&mut *self.writer.lock(py)?, writer);
        Ok(previous.stream)
    }

    /// Answer every request with `handler(method, params)` until end of input: `rpcwire.serve(handler,
    /// self, max_concurrency=...)`, which chooses the mode, without its guard of the process's fd 1.
    #[pyo3(
        signature = (handler, *, max_concurrency=MaxConcurrency::Absent),
        text_signature = "($self, handler, *, max_concurrency=1)"
    )]
    fn serve(slf: &Bound<'_, Self>, handler: &Bound<'_, PyAny>, max_concurrency: MaxConcurrency<'_>) -> PyResult<()> {
        let py = slf.py();
        let kwargs = PyDict::new(py);
        if let MaxConcurrency::Given(value) = max_concurrency {
            kwargs.set_item(intern!(py, "max_concurrency"), value)?;
        }
        kwargs.set_item(intern!(py, "guard_stdout"), false)?;
        bound::serve(py)?.call((handler, slf), Some(&kwargs))?;
        Ok(())
    }

    /// The sequential loop (`rpcwire.serve` with `max_concurrency=1` and a sync handler): one message at a
    /// time, in order, on the calling thread, until end of input.
    ///
    /// Stops with the exception if reading or writing fails (a `BrokenPipeError` once the peer is
    /// gone) or if the handler raises a `BaseException` that is not an `Exception`. `RuntimeError` if
    /// a `serve` already runs over this transport.
    #[pyo3(name = "_serve_sequential")]
    fn serve_sequential(slf: &Bound<'_, Self>, handler: &Bound<'_, PyAny>) -> PyResult<()> {
        let py = slf.py();
        let transport = slf.get();
        let _serving = Serving::start(transport)?;
        let mut gathered = Vec::new();
        let served = transport.answer_all(py, slf.as_any(), handler, &mut gathered);
        // Answers gathered before a failure were accepted: write them (a second failure, when the
        // writer itself failed, is dropped in favour of the first).
        let written = transport.write_gathered(py, &mut gathered);
        served.and(written)
    }

    /// Mark this transport as served (every `serve` of the engine calls it first, and `serve`'s own
    /// loop): `RuntimeError` if a `serve` already runs over it. `_stop_serving` ends it.
    #[pyo3(name = "_start_serving")]
    fn start_serving(&self) -> PyResult<()> {
        self.serving
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .map(drop)
            .map_err(|_| PyRuntimeError::new_err(ALREADY_SERVING))
    }

    /// The end of what `_start_serving` began.
    #[pyo3(name = "_stop_serving")]
    fn stop_serving(&self) {
        self.serving.store(false, Ordering::Release);
    }
}

//! Transport: the `StdioTransport` class and the sequential loop (`_serve_sequential`).
//!
//! I/O model: one thread runs the loop, which reads, dispatches and writes in turn; any thread may
//! call the `write_*` methods (a handler's progress notifications, for instance). The streams are read
//! and written through the adapters of `stream` ([`Reader`], [`Writer`]).
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

use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;
use pyo3::exceptions::{PyBaseException, PyRuntimeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString};

use rpcwire_protocol::envelope::{Id, Limits, DEFAULT_MAX_BATCH, DEFAULT_MAX_DEPTH, DEFAULT_MAX_MESSAGE_BYTES};
use rpcwire_protocol::framing::{message_text, Decoder, Framing};

use crate::answer;
use crate::bound;
use crate::codec;
use crate::current;
use crate::decoder;
use crate::dispatch;
use crate::outgoing;
use crate::reply;
use crate::request;
use crate::stream::{binary_stream, with_bytes, Found, Next, Reader, Writer};
use crate::stream_lock::StreamLock;
use crate::strings::StringCache;

/// Gathered answers are written once they reach this size, even if more lines are buffered.
const COALESCE_LIMIT: usize = 64 * 1024;

const REENTRANT_READ: &str = "reentrant read: the input stream called back into the transport it belongs to";
const REENTRANT_WRITE: &str = "reentrant write: the output stream called back into the transport it belongs to";

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
        let thread = current::ThisThread::get();
        loop {
            // With no complete line buffered, the next read may block: first write what was
            // gathered (without holding the reader, which other threads may ask for).
            let buffered = self.reader.lock(py)?.buffered_line(&mut line, true);
            let next = if let Some(next) = buffered {
                next
            } else {
                self.write_gathered(py, gathered)?;
                self.reader.lock(py)?.next_line(py, &mut line, true)?
            };
            answer.clear();
            match next {
                Next::End => return Ok(()),
                Next::Line => {
                    // No finished answer waits for a handler: what was gathered goes out first.
                    let mut before_call = || self.write_gathered(py, gathered);
                    let mut caller = dispatch::Caller {
                        transport: Some((this, thread)),
                        handler,
                        before_call: &mut before_call,
                        expose_errors: true,
                    };
                    if !dispatch::answer_line(py, &line, &mut caller, self.limits, Some(&mut strings), &mut answer)? {
                        continue;
                    }
                }
                Next::Dropped(dropped) => answer::dropped(py, dropped, self.max_message_bytes, &mut answer)?,
            }
            match self.framing {
                Framing::Newline => answer.push(b'\n'), // inline: nearly every answer's frame
                framing @ Framing::ContentLength => framing.frame(&mut answer),
            }
            if gathered.is_empty() && answer.len() >= COALESCE_LIMIT {
                // A large answer goes out as it is, without a copy.
                self.writer.lock(py)?.write_all(py, &answer)?;
            } else if gathered.is_empty() {
                // Taken over rather than copied (the usual case: what was gathered went out before the
                // handler ran); `answer` gets the gathered buffer's room in exchange.
                std::mem::swap(gathered, &mut answer);
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
        let reader = Reader::new(py, stdin, Decoder::new(framing, max_message_bytes))?;
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
        let mut strings = self.strings.try_lock();
        // Decoded where it lies in the read buffer (no copy of a large body first).
        let decode = |message: &[u8]| -> PyResult<Bound<'py, PyAny>> {
            let text = message_text(message).map_err(|error| PyValueError::new_err(error.to_string()))?;
            Ok(codec::decode(py, text, self.limits.max_depth, strings.as_deref_mut())?)
        };
        match self.reader.lock(py)?.with_next_message(py, true, decode)? {
            Found::End => Ok(None),
            Found::Message(value) => value.map(Some),
            Found::Dropped(dropped) => {
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
        outgoing::notification(&mut line, method, params)?;
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
                answer::dropped(py, dropped, self.max_message_bytes, &mut answer)?;
                Ok(Some(PyBytes::new(py, &answer).into_any()))
            }
        }
    }

    /// Whether the next `_read_incoming` (or `_read_message`) returns without reading the stream: a whole
    /// message, or the end of input, is already buffered (blank lines before it are dropped: they are no
    /// message to those readers, and one alone must not make a timed client block on the stream).
    #[pyo3(name = "_has_buffered_message")]
    fn has_buffered_message(&self, py: Python<'_>) -> PyResult<bool> {
        Ok(self.reader.lock(py)?.has_line(true))
    }

    /// Read once from the stream (what one `readinto1` gives, which waits only when nothing is there)
    /// unless a whole message is already buffered; then `_has_buffered_message` tells whether one is.
    /// A client waiting with a timeout reads this way once `select` says the stream is readable, so that
    /// half a message never blocks it past its deadline.
    #[pyo3(name = "_read_available")]
    fn read_available(&self, py: Python<'_>) -> PyResult<()> {
        self.reader.lock(py)?.read_available(py)
    }

    /// The next message as a client reads it (blank lines skipped), nested at most `max_depth` deep:
    /// `None` at end of input; a `Response`; a `Request` (the server's own request or notification); a
    /// `list` of these for a batch; a `str` saying why a message (a line over `max_message_bytes`
    /// included) is neither; or, for a message that cannot be decoded, `(why, its bytes)`, so that the
    /// client can look for the call it names.
    #[pyo3(name = "_read_incoming")]
    fn read_incoming<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let mut line = Vec::new();
        // The client's reading thread: it waits for input outside the stream's code (`next_line_when_readable`).
        let next = self.reader.lock(py)?.next_line_when_readable(py, &mut line, true)?;
        match next {
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
            with_bytes(&line?, |line| self.framing.frame_into(line, &mut data))?;
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
        Ok(previous.into_stream())
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

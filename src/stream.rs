//! Stream adapters: the Python streams a transport reads and writes, as Rust sees them.
//!
//! [`Reader`] feeds a framing [`Decoder`] with whatever one read of the input stream returns:
//! `readinto1` (or `read1`) on buffered streams gives up to 64 KiB of what is already there and never
//! waits for more than one message needs; raw streams are read with one `readinto`; anything else
//! with `readline(65536)`. The `io` streams that fill every byte they count (`BytesIO`, `FileIO`, a
//! `BufferedReader` over a `FileIO`) read straight into the decoder's buffer, through a `memoryview`
//! released when the call returns; any other stream reads into a chunk of ours, copied and then zeroed,
//! so that one that counts more than it filled never serves earlier bytes again. Those that keep
//! nothing of their own (`BytesIO`, `FileIO`) are asked for exactly the rest of a frame's body, so
//! that a large body is read once and decoded where it was read (see `Decoder::feed_with`). [`Writer`] hands
//! bytes to the output stream in one `write` (repeated only when a raw stream takes part of them)
//! and flushes. [`binary_stream`] turns the streams a caller gives (or `sys.stdin`/`sys.stdout`)
//! into binary ones, and [`with_bytes`] reads a bytes-like object.
//!
//! Reads go through the stream's own `readinto1`, which releases the GIL during the system call
//! and runs signal handlers when one interrupts it. Reading a pipe's file descriptor directly was
//! weighed and left out: the `readinto1` call is a small part of a round trip (bench/README.md), and
//! a direct read would have to drain the Python buffer first and redo its signal handling. A client's
//! reading thread (`_read_incoming`) first waits for the stream's descriptor to be readable in our own
//! `py.detach`, where `PyO3` parks a thread that wakes while the interpreter finalizes, rather than inside
//! `readinto1`, whose wake-up `CPython` 3.10-3.13 would end by unwinding through our frames (an abort);
//! the servers' loops read without that wait.

use std::mem::MaybeUninit;

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::{PyBlockingIOError, PyOSError, PyTypeError};
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyByteArray, PyBytes, PyInt, PyString, PyType};

use rpcwire_protocol::framing::{Decoded, Decoder, Dropped};

/// How much one `readinto1`/`read1`/`readline` call may return.
pub(crate) const READ_CHUNK: usize = 64 * 1024;

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
pub(crate) enum Next {
    /// A line (or a frame's body), copied into the caller's buffer.
    Line,
    /// A message the framing dropped (over `max_message_bytes`, or a frame that cannot be read).
    Dropped(Dropped),
    End,
}

/// What `Reader::with_next_message` found.
pub(crate) enum Found<R> {
    /// What the caller made of a line (or a frame's body).
    Message(R),
    /// A message the framing dropped (over `max_message_bytes`, or a frame that cannot be read).
    Dropped(Dropped),
    End,
}

/// The input stream and the decoder its bytes go to.
pub(crate) struct Reader {
    stream: Py<PyAny>,
    method: ReadMethod,
    /// The stream's bound method for `method`, looked up once rather than on every read.
    read: Py<PyAny>,
    /// Whether `readinto1`/`readinto` write straight into the decoder's buffer (through a `memoryview`
    /// released as soon as the call returns): only for the `io` streams that fill every byte they
    /// count (see [`honest_reader`]). Other streams read into `chunk`, which is copied and zeroed.
    direct: bool,
    /// Whether the stream keeps nothing of its own between reads (a `BytesIO`, a `FileIO`), so that
    /// the rest of a frame's body can be asked for exactly (see `Decoder::feed_with`).
    exact: bool,
    /// Made at the first read that needs it.
    chunk: Option<Py<PyByteArray>>,
    /// The bytes read and not yet handed out, split by the transport's framing.
    decoder: Decoder,
    /// What [`next_line_when_readable`](Self::next_line_when_readable) waits on before it reads.
    wait: Wait,
}

/// Whether a reader can wait, outside the stream's own code, until its stream is readable: known at the
/// first read that would wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wait {
    /// Not looked at yet.
    Unknown,
    /// A stream with no descriptor to wait on (or no `poll` here): read as it is.
    Never,
    /// The descriptor under a `FileIO`, or under a `BufferedReader` over one; `kept_nothing`: the stream's
    /// own buffer is known empty (a `FileIO` has none; a `BufferedReader`'s, once a read of ours returned
    /// less than it asked for), so that nothing readable is hidden from `poll`.
    Fd { fd: i32, kept_nothing: bool },
}

impl Reader {
    /// A reader of `stream` (a binary stream: see [`binary_stream`]) into `decoder`.
    pub(crate) fn new(py: Python<'_>, stream: Bound<'_, PyAny>, decoder: Decoder) -> PyResult<Self> {
        let method = read_method(py, &stream)?;
        Ok(Self {
            method,
            direct: honest_reader(py, &stream)?,
            exact: plain_io(py, &stream, &[])?,
            read: stream.getattr(method.name())?.unbind(),
            stream: stream.unbind(),
            chunk: None,
            decoder,
            wait: Wait::Unknown,
        })
    }

    /// Copy the next line (without `\n`/`\r\n`), or the next frame's body, into `line`; `skip_blank`:
    /// as [`Decoder::next`].
    pub(crate) fn next_line(&mut self, py: Python<'_>, line: &mut Vec<u8>, skip_blank: bool) -> PyResult<Next> {
        let copy = |message: &[u8]| {
            line.clear();
            line.extend_from_slice(message);
        };
        Ok(match self.with_next_message(py, skip_blank, copy)? {
            Found::Message(()) => Next::Line,
            Found::Dropped(dropped) => Next::Dropped(dropped),
            Found::End => Next::End,
        })
    }

    /// As [`next_line`](Self::next_line), handing the message to `use_message` where it lies in the
    /// buffer, without a copy (a large frame's body is decoded where it was read). No Python code
    /// may read this stream from `use_message`: the reader is borrowed.
    pub(crate) fn with_next_message<R>(
        &mut self,
        py: Python<'_>,
        skip_blank: bool,
        mut use_message: impl FnMut(&[u8]) -> R,
    ) -> PyResult<Found<R>> {
        loop {
            match self.decoder.next(skip_blank) {
                Some(Decoded::Message(message)) => return Ok(Found::Message(use_message(message))),
                Some(Decoded::Dropped(dropped)) => return Ok(Found::Dropped(dropped)),
                None => {}
            }
            if self.decoder.is_closed() {
                return Ok(Found::End);
            }
            if !self.fill(py)? {
                self.decoder.close();
            }
        }
    }

    /// As [`next_line`](Self::next_line), for a client's reading thread: before each read, the thread waits
    /// in [`wait_readable`] (the GIL released by `py.detach`) until the stream's descriptor is readable,
    /// when the stream has one and keeps nothing of its own, so that the read then returns at once. A
    /// thread that waits so is parked by `PyO3` if it wakes while the interpreter finalizes, where one blocked
    /// inside the stream's `readinto1` would be ended by `CPython` 3.10-3.13 unwinding its stack through
    /// ours, which aborts the process. The servers' loops read with `next_line`, which never waits so.
    pub(crate) fn next_line_when_readable(
        &mut self,
        py: Python<'_>,
        line: &mut Vec<u8>,
        skip_blank: bool,
    ) -> PyResult<Next> {
        loop {
            if let Some(next) = self.buffered_line(line, skip_blank) {
                return Ok(next);
            }
            if let Wait::Fd { fd, kept_nothing: true } = self.wait {
                Self::wait_readable(py, fd)?;
            }
            let count = self.fill_counted(py)?;
            if count == 0 {
                self.decoder.close();
            }
            self.wait = match self.wait {
                Wait::Unknown => self.wait_for(py, count),
                Wait::Fd { fd, .. } if self.method != ReadMethod::Readline => {
                    Wait::Fd { fd, kept_nothing: self.exact || count < READ_CHUNK }
                }
                _ => Wait::Never,
            };
        }
    }

    /// What to wait on after the first read (of `count` bytes): the descriptor of a `FileIO`, or of a
    /// `BufferedReader` read straight into our buffer (`readinto1` of `READ_CHUNK`: a read that returns less
    /// leaves nothing in the reader's own buffer, whatever its size); never for any other stream.
    fn wait_for(&self, py: Python<'_>, count: usize) -> Wait {
        if !cfg!(unix) || !self.direct || !matches!(self.method, ReadMethod::ReadInto1 | ReadMethod::ReadInto) {
            return Wait::Never;
        }
        let stream = self.stream.bind(py);
        let Ok(fd) = stream.call_method0(intern!(py, "fileno")).and_then(|fd| fd.extract::<i32>()) else {
            return Wait::Never; // a `BytesIO` (`UnsupportedOperation`), or a closed stream: read as it is
        };
        Wait::Fd { fd, kept_nothing: self.exact || count < READ_CHUNK }
    }

    /// Wait until `fd` is readable, at its end, or failed (the read that follows says which), with the GIL
    /// released and no timer (an idle client's thread sleeps, as it did blocked in the read); a signal
    /// (`EINTR`) runs its handlers first, as a blocking read's would.
    fn wait_readable(py: Python<'_>, fd: i32) -> PyResult<()> {
        while !poll_readable(py, fd) {
            py.check_signals()?;
        }
        Ok(())
    }

    /// As [`next_line`](Self::next_line), without reading: `None` when no whole line (or frame, or
    /// dropped message) is buffered and the input has not ended, so that the caller can first do what
    /// must come before a read that may block. One search of the buffer, where `has_line` and then
    /// `next_line` would search it twice.
    pub(crate) fn buffered_line(&mut self, line: &mut Vec<u8>, skip_blank: bool) -> Option<Next> {
        let closed = self.decoder.is_closed();
        match self.decoder.next(skip_blank) {
            Some(Decoded::Message(message)) => {
                line.clear();
                line.extend_from_slice(message);
                Some(Next::Line)
            }
            Some(Decoded::Dropped(dropped)) => Some(Next::Dropped(dropped)),
            None => closed.then_some(Next::End),
        }
    }

    /// Whether `next_line` with the same `skip_blank` can return without reading.
    pub(crate) fn has_line(&mut self, skip_blank: bool) -> bool {
        self.decoder.has_message(skip_blank)
    }

    /// Read once from the stream unless `next_line` can return without reading (`_read_available`).
    pub(crate) fn read_available(&mut self, py: Python<'_>) -> PyResult<()> {
        if !self.has_line(true) && !self.fill(py)? {
            self.decoder.close();
        }
        Ok(())
    }

    /// One read from the stream into the buffer; `Ok(false)` at end of input.
    #[inline]
    fn fill(&mut self, py: Python<'_>) -> PyResult<bool> {
        Ok(self.fill_counted(py)? > 0)
    }

    /// One read from the stream into the buffer: how many bytes it gave (0 at end of input).
    #[inline]
    fn fill_counted(&mut self, py: Python<'_>) -> PyResult<usize> {
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

    fn read_once(&mut self, py: Python<'_>) -> PyResult<usize> {
        let read = self.read.bind(py);
        match self.method {
            ReadMethod::ReadInto1 | ReadMethod::ReadInto if self.direct => {
                let method = self.method.name();
                let read_into = |room: &mut [MaybeUninit<u8>]| -> PyResult<usize> {
                    // SAFETY: `room` is valid for writes of its length while the call runs, and an
                    // honest `io` stream keeps no export of the view past it.
                    let count = unsafe {
                        with_view(py, room.as_mut_ptr().cast(), room.len(), ffi::PyBUF_WRITE, |view| {
                            read.call1((view,))
                        })?
                    };
                    counted(&count, method, room.len())
                };
                // SAFETY: an honest stream (`honest_reader`) fills every byte it counts.
                Ok(unsafe { self.decoder.feed_with(READ_CHUNK, self.exact, read_into)? })
            }
            ReadMethod::ReadInto1 | ReadMethod::ReadInto => {
                let chunk = match &self.chunk {
                    Some(chunk) => chunk.bind(py),
                    None => self.chunk.insert(PyByteArray::new_with(py, READ_CHUNK, |_| Ok(()))?.unbind()).bind(py),
                };
                let count = counted(&read.call1((chunk,))?, self.method.name(), chunk.len())?;
                let decoder = &mut self.decoder;
                // The stream is Python code that may keep the bytearray: without the GIL another thread
                // could resize it while it is read, so it is read inside a critical section on it (its
                // resizing methods take the same one); with the GIL this costs nothing.
                pyo3::sync::critical_section::with_critical_section(chunk.as_any(), || {
                    // SAFETY: no Python code runs while the slice is alive, and no other thread resizes
                    // the bytearray (the GIL, or its critical section), so it stays where it is. Cut to
                    // what is left if another thread shrank it since the count was checked.
                    let bytes = unsafe { chunk.as_bytes_mut() };
                    let left = count.min(bytes.len());
                    let filled = &mut bytes[..left];
                    decoder.feed(filled);
                    // Zeroed once copied: a stream that claims more than it filled gets zeros (a
                    // -32700), never the bytes of an earlier read served again.
                    filled.fill(0);
                });
                Ok(count)
            }
            // `readline` is bounded too, so that an endless line is never held whole.
            ReadMethod::Read1 | ReadMethod::Readline => self.extend_with(&read.call1((READ_CHUNK,))?),
        }
    }

    fn extend_with(&mut self, data: &Bound<'_, PyAny>) -> PyResult<usize> {
        if let Ok(bytes) = data.cast::<PyBytes>() {
            self.decoder.feed(bytes.as_bytes());
        } else if let Ok(array) = data.cast::<PyByteArray>() {
            self.decoder.feed(&array.to_vec());
        } else {
            return Err(PyTypeError::new_err("stdin must return bytes; pass a binary file-like object"));
        }
        data.len()
    }
}

/// Whether `fd` became readable (or hung up, failed, or is no descriptor: the read says which), waited
/// for with the GIL released and no timeout; `false` for a signal (`EINTR`).
#[cfg(unix)]
fn poll_readable(py: Python<'_>, fd: i32) -> bool {
    let mut wanted = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    // SAFETY: `wanted` is one live, writable `pollfd` for the whole call.
    let ready = py.detach(|| unsafe { libc::poll(&raw mut wanted, 1, -1) });
    ready > 0 || (ready < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted)
}

#[cfg(not(unix))]
fn poll_readable(_py: Python<'_>, _fd: i32) -> bool {
    true // never reached: no reader waits where there is no `poll` (`Reader::wait_for`)
}

/// The count a `readinto1`/`readinto` returned, checked as [`checked_count`] checks it; `None` (a
/// non-blocking stream with no data) is `BlockingIOError`.
fn counted(count: &Bound<'_, PyAny>, method: &str, most: usize) -> PyResult<usize> {
    if count.is_none() {
        return Err(PyBlockingIOError::new_err("stdin is non-blocking and had no data; pass a blocking stream"));
    }
    checked_count(count, method, most)
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

/// Whether `stream` is an `io` stream whose `readinto`/`readinto1` fill every byte they count: a
/// `BytesIO`, a `FileIO`, or a `BufferedReader` (`sys.stdin.buffer`, a pipe opened with `open`)
/// over a `FileIO`, exactly (a subclass may count what it does not fill).
fn honest_reader(py: Python<'_>, stream: &Bound<'_, PyAny>) -> PyResult<bool> {
    let io = io_types(py)?;
    plain_io(py, stream, &[&io.buffered_reader])
}

/// Whether `stream` is exactly a `BytesIO`, a `FileIO`, or one of `buffered` over a `FileIO`: the
/// `io` streams that only use a buffer they are handed during the call. (A buffered stream hands
/// large reads and writes to its raw stream, into or from the caller's buffer.)
fn plain_io(py: Python<'_>, stream: &Bound<'_, PyAny>, buffered: &[&Py<PyType>]) -> PyResult<bool> {
    let io = io_types(py)?;
    let kind = stream.get_type();
    if kind.is(&io.bytes_io) || kind.is(&io.file_io) {
        return Ok(true);
    }
    if !buffered.iter().any(|buffered| kind.is(*buffered)) {
        return Ok(false);
    }
    Ok(stream.getattr_opt(intern!(py, "raw"))?.is_some_and(|raw| raw.get_type().is(&io.file_io)))
}

/// `call` with a `memoryview` of `len` bytes at `memory` (`flags`: `PyBUF_READ` or `PyBUF_WRITE`),
/// released as soon as `call` returns, so that Python never reads or writes the memory after it.
///
/// # Safety
/// `memory` must be valid for `len` bytes (of writes, with `PyBUF_WRITE`) while `call` runs, and
/// whatever `call` hands the view to must keep no export of it past the call (the `io` streams the
/// callers choose do not); the release would fail then, and the memory be reused all the same.
unsafe fn with_view<'py, T>(
    py: Python<'py>,
    memory: *mut u8,
    len: usize,
    flags: std::os::raw::c_int,
    call: impl FnOnce(&Bound<'py, PyAny>) -> PyResult<T>,
) -> PyResult<T> {
    let size = ffi::Py_ssize_t::try_from(len).unwrap_or(ffi::Py_ssize_t::MAX);
    // SAFETY: the caller's promise on `memory`.
    let view = unsafe { Bound::from_owned_ptr_or_err(py, ffi::PyMemoryView_FromMemory(memory.cast(), size, flags))? };
    let result = call(&view);
    view.call_method0(intern!(py, "release"))?;
    result
}

/// Whether `stream`'s `write` may be handed a view of our memory rather than a `bytes` copy of it:
/// a `BytesIO` or a `FileIO`, or a `BufferedWriter`/`BufferedRandom` over a `FileIO`, exactly (each
/// copies or writes the bytes during the call and keeps no export of the view).
fn borrowing_writer(py: Python<'_>, stream: &Bound<'_, PyAny>) -> PyResult<bool> {
    let io = io_types(py)?;
    plain_io(py, stream, &[&io.buffered_writer, &io.buffered_random])
}

/// Whether `stream`'s `write` always takes all it is given (or raises): a `BytesIO`, a
/// `BufferedWriter` or a `BufferedRandom`, exactly. Its count need not be read then.
fn whole_writer(py: Python<'_>, stream: &Bound<'_, PyAny>) -> PyResult<bool> {
    let io = io_types(py)?;
    let kind = stream.get_type();
    Ok(kind.is(&io.bytes_io) || kind.is(&io.buffered_writer) || kind.is(&io.buffered_random))
}

/// The `io` classes whose behaviour the adapters rely on, looked up once.
struct IoTypes {
    bytes_io: Py<PyType>,
    file_io: Py<PyType>,
    buffered_reader: Py<PyType>,
    buffered_writer: Py<PyType>,
    buffered_random: Py<PyType>,
}

static IO_TYPES: PyOnceLock<IoTypes> = PyOnceLock::new();

fn io_types(py: Python<'_>) -> PyResult<&IoTypes> {
    IO_TYPES.get_or_try_init(py, || {
        let io = py.import("io")?;
        let get = |name: &str| -> PyResult<Py<PyType>> { Ok(io.getattr(name)?.cast_into::<PyType>()?.unbind()) };
        Ok(IoTypes {
            bytes_io: get("BytesIO")?,
            file_io: get("FileIO")?,
            buffered_reader: get("BufferedReader")?,
            buffered_writer: get("BufferedWriter")?,
            buffered_random: get("BufferedRandom")?,
        })
    })
}

/// The output stream.
pub(crate) struct Writer {
    /// The stream, and its bound `write` and `flush`, looked up once.
    stream: Py<PyAny>,
    write: Py<PyAny>,
    flush: Option<Py<PyAny>>,
    /// Whether one `write` always takes all it is given (see [`whole_writer`]).
    whole_writes: bool,
    /// Whether `write` is handed a view of a large answer rather than a copy (see [`borrowing_writer`]).
    borrows: bool,
}

/// From this size up, an answer is lent to a [`borrowing_writer`] (a `memoryview` made and released)
/// rather than copied into a `bytes`: below it the copy costs less than the view's two calls.
const LEND_FROM: usize = 4096;

impl Writer {
    /// A writer of `stream` (a binary stream: see [`binary_stream`]), whose `flush` is callable or absent.
    pub(crate) fn new(py: Python<'_>, stream: Bound<'_, PyAny>) -> PyResult<Self> {
        let flush = match stream.getattr_opt("flush")? {
            Some(flush) if !flush.is_callable() => {
                return Err(PyTypeError::new_err("stdout.flush must be callable (or absent)"));
            }
            flush => flush.map(Bound::unbind),
        };
        // `BytesIO.flush` does nothing (a closed one fails the `write` before it): not called.
        let flush = if stream.get_type().is(&io_types(py)?.bytes_io) { None } else { flush };
        Ok(Self {
            write: stream.getattr(intern!(py, "write"))?.unbind(),
            flush,
            whole_writes: whole_writer(py, &stream)?,
            borrows: borrowing_writer(py, &stream)?,
            stream: stream.unbind(),
        })
    }

    /// One `write` of `data` (more only if a raw stream takes part of it), then `flush`.
    pub(crate) fn write_all(&self, py: Python<'_>, data: &[u8]) -> PyResult<()> {
        let write = self.write.bind(py);
        let mut offset = 0;
        while offset < data.len() {
            let rest = data.len() - offset;
            let written = if self.borrows && rest >= LEND_FROM {
                // SAFETY: `data` outlives the call, and a borrowing writer only reads the view during it.
                unsafe {
                    with_view(py, data[offset..].as_ptr().cast_mut(), rest, ffi::PyBUF_READ, |view| {
                        write.call1((view,))
                    })?
                }
            } else {
                write.call1((PyBytes::new(py, &data[offset..]),))?
            };
            // Buffered streams take everything; a raw stream may take only part of it.
            offset +=
                if self.whole_writes || written.is_none() { rest } else { checked_count(&written, "write", rest)? };
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

    /// The stream written to.
    pub(crate) fn into_stream(self) -> Py<PyAny> {
        self.stream
    }
}

fn unsupported_operation(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    UNSUPPORTED_OPERATION.import(py, "io", "UnsupportedOperation")
}

/// `stream`, or its `.buffer` if it is a text stream; it must have a callable `needs` method.
pub(crate) fn binary_stream<'py>(
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
    // A `BytesIO`'s `readinto1` is `BufferedIOBase`'s, which makes a `bytes` of `read1` and copies
    // it; its own `readinto` copies straight from its buffer, and never waits either.
    Ok(if stream.get_type().is(&io_types(py)?.bytes_io) {
        ReadMethod::ReadInto
    } else if has("readinto1")? {
        ReadMethod::ReadInto1
    } else if has("read1")? {
        ReadMethod::Read1
    } else if has("readinto")? && stream.is_instance(RAW_IO_BASE.import(py, "io", "RawIOBase")?)? {
        ReadMethod::ReadInto
    } else {
        ReadMethod::Readline
    })
}

/// Run `use_bytes` over the bytes of a bytes-like object (`bytes` without a copy; `bytearray`,
/// `memoryview` and other buffers of bytes copied first); `TypeError` for anything else.
pub(crate) fn with_bytes<R>(data: &Bound<'_, PyAny>, use_bytes: impl FnOnce(&[u8]) -> R) -> PyResult<R> {
    if let Ok(bytes) = data.cast::<PyBytes>() {
        return Ok(use_bytes(bytes.as_bytes()));
    }
    if data.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err("a bytes-like object is required, not 'str'"));
    }
    let buffer = PyBuffer::<u8>::get(data)?;
    Ok(use_bytes(&buffer.to_vec(data.py())?))
}

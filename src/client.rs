//! The threaded client's pipes (`_ClientPipe`): how `rpcwire.Client` reads a spawned server's stdout, and
//! how a lone caller makes its whole call in two calls into the core.
//!
//! The client's reading (`_read_available`, `_has_buffered_message`, `_read_incoming`, as a transport has
//! them) goes straight to the stdout pipe's descriptor into the protocol crate's framing [`Decoder`], with
//! the GIL released for the system call; what it hands out is classified by `reply` as every client's
//! reading is. One thread reads at a time (the client's reading lock, in Python), so the state's lock is
//! only ever taken, never waited for: a second reader is a bug, refused with `RuntimeError`.
//!
//! The lone caller's path (`Client.call` when nothing else is in flight): `_send_call` encodes the request,
//! checks it against the quick limits and writes it whole to the stdin pipe (non-blocking: a pipe with
//! room takes a small message whole) while the caller holds the output; `_read_answer` then waits with
//! `poll` on the stdout pipe and the client's halt pipe, the GIL released, reading and framing what comes
//! until a whole message is there, within the caller's timeout. It returns the caller's own answer, or
//! hands anything else back for the Python paths (another message, the halt, the deadline, the end of
//! input), which then go on exactly as a call that took them from the start: nothing is lost and
//! nothing is written twice. Only for platforms with `poll` (unix); elsewhere the client reads on a
//! thread (the portable path) and never makes one.

use std::io;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, MutexGuard};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyInt, PyString, PyTuple};

use rpcwire_protocol::framing::{Decoded, Decoder, Framing};

use crate::bound;
use crate::decoder;
use crate::outgoing;
use crate::reply;
use crate::request;
use crate::strings::StringCache;

/// The most one read takes (a core's read, as `_read_available` promises the client).
const READ_CHUNK: usize = 64 * 1024;

const CONCURRENT_READ: &str = "the client's pipe is read by one thread at a time";

/// What the reading thread owns.
struct State {
    decoder: Decoder,
    chunk: Vec<u8>,
    strings: StringCache,
}

/// A spawned server's pipes as `rpcwire.Client` reads and writes them: `fd` (its stdout, blocking),
/// `out_fd` (its stdin, non-blocking), `halt_fd` (the client's halt pipe: readable once readers must stop).
#[pyclass(frozen, module = "rpcwire._rpcwire", name = "_ClientPipe")]
pub(crate) struct ClientPipe {
    fd: i32,
    out_fd: i32,
    halt_fd: i32,
    framing: Framing,
    max_message_bytes: usize,
    max_depth: usize,
    state: Mutex<State>,
}

/// What one wait on the pipes found.
enum Waited {
    /// Bytes were read (0: the end of input).
    Read(usize),
    /// The halt pipe, or the deadline: nothing was read.
    Nothing,
    /// A signal interrupted the wait: its handler runs, then the wait goes on.
    Interrupted,
}

impl ClientPipe {
    fn state(&self) -> PyResult<MutexGuard<'_, State>> {
        self.state.try_lock().ok_or_else(|| PyRuntimeError::new_err(CONCURRENT_READ))
    }

    /// One read into the decoder (the end of input closes it), the GIL released.
    fn fill(&self, py: Python<'_>, state: &mut State) -> PyResult<()> {
        let fd = self.fd;
        loop {
            let chunk: &mut [u8] = &mut state.chunk;
            let read = py.detach(|| read_once(fd, chunk));
            match read {
                Ok(count) => {
                    feed(state, count);
                    return Ok(());
                }
                Err(error) if error.kind() == io::ErrorKind::Interrupted => py.check_signals()?,
                Err(error) => return Err(error.into()),
            }
        }
    }

    /// The next message as a client reads it: as `StdioTransport._read_incoming`.
    fn incoming<'py>(&self, py: Python<'py>, state: &mut State) -> PyResult<Option<Bound<'py, PyAny>>> {
        loop {
            let State { decoder, strings, .. } = state;
            let closed = decoder.is_closed();
            match decoder.next(true) {
                Some(Decoded::Message(line)) => {
                    return Ok(Some(match reply::incoming_object(py, line, self.max_depth, Some(strings))? {
                        reply::Incoming::Message(message) => message,
                        reply::Incoming::Unreadable(reason) => {
                            (PyString::new(py, &reason), PyBytes::new(py, line)).into_pyobject(py)?.into_any()
                        }
                    }));
                }
                Some(Decoded::Dropped(dropped)) => {
                    return Ok(Some(PyString::new(py, &dropped.reason(self.max_message_bytes)).into_any()))
                }
                None if closed => return Ok(None),
                None => self.fill(py, state)?,
            }
        }
    }
}

fn feed(state: &mut State, count: usize) {
    if count == 0 {
        state.decoder.close();
    } else {
        state.decoder.feed(&state.chunk[..count]);
    }
}

fn read_once(fd: i32, chunk: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `chunk` is a live, writable buffer of `chunk.len()` bytes for the whole call.
    let count = unsafe { libc::read(fd, chunk.as_mut_ptr().cast(), chunk.len()) };
    usize::try_from(count).map_err(|_| io::Error::last_os_error())
}

/// Wait until `fd` or `halt_fd` is readable (or `deadline`), and read `fd` once if it is. No GIL.
fn wait_and_read(fd: i32, halt_fd: i32, deadline: Option<Instant>, chunk: &mut [u8]) -> io::Result<Waited> {
    let timeout = match deadline {
        None => -1,
        Some(deadline) => {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(Waited::Nothing);
            }
            // Rounded up, so that the wait never ends just before the deadline.
            i32::try_from(left.as_micros().div_ceil(1000)).unwrap_or(i32::MAX)
        }
    };
    let mut fds = [
        libc::pollfd { fd, events: libc::POLLIN, revents: 0 },
        libc::pollfd { fd: halt_fd, events: libc::POLLIN, revents: 0 },
    ];
    // SAFETY: `fds` is a live array of two `pollfd`s for the whole call.
    let ready = unsafe { libc::poll(fds.as_mut_ptr(), 2, timeout) };
    if ready < 0 {
        let error = io::Error::last_os_error();
        return if error.kind() == io::ErrorKind::Interrupted { Ok(Waited::Interrupted) } else { Err(error) };
    }
    if ready == 0 || fds[1].revents != 0 {
        return Ok(Waited::Nothing);
    }
    match read_once(fd, chunk) {
        Ok(count) => Ok(Waited::Read(count)),
        Err(error) if error.kind() == io::ErrorKind::Interrupted => Ok(Waited::Interrupted),
        Err(error) => Err(error),
    }
}

/// Whether `message` is the `Response` to the call `id` (an `int` id equal to it, as `_take_answer` matches).
fn answers(py: Python<'_>, message: &Bound<'_, PyAny>, id: &Bound<'_, PyAny>) -> PyResult<bool> {
    if !message.get_type().is(bound::response(py)?) {
        return Ok(false);
    }
    let answered = message.getattr(pyo3::intern!(py, "id"))?;
    Ok(answered.is_exact_instance_of::<PyInt>() && answered.eq(id)?)
}

#[pymethods]
impl ClientPipe {
    #[new]
    #[pyo3(signature = (fd, out_fd, halt_fd, *, framing="newline", max_message_bytes, max_depth))]
    fn new(
        fd: i32,
        out_fd: i32,
        halt_fd: i32,
        framing: &str,
        max_message_bytes: i64,
        max_depth: i64,
    ) -> PyResult<Self> {
        let framing = decoder::framing(framing)?;
        let (max_message_bytes, limits) = request::checked_limits(max_message_bytes, max_depth, None)?;
        Ok(Self {
            fd,
            out_fd,
            halt_fd,
            framing,
            max_message_bytes,
            max_depth: limits.max_depth,
            state: Mutex::new(State {
                decoder: Decoder::new(framing, max_message_bytes),
                chunk: vec![0; READ_CHUNK],
                strings: StringCache::default(),
            }),
        })
    }

    /// As `StdioTransport._has_buffered_message`.
    #[pyo3(name = "_has_buffered_message")]
    fn has_buffered_message(&self) -> PyResult<bool> {
        Ok(self.state()?.decoder.has_message(true))
    }

    /// As `StdioTransport._read_available`: one read of the pipe (at most 64 KiB) unless a whole message
    /// is buffered.
    #[pyo3(name = "_read_available")]
    fn read_available(&self, py: Python<'_>) -> PyResult<()> {
        let mut state = self.state()?;
        if !state.decoder.has_message(true) {
            self.fill(py, &mut state)?;
        }
        Ok(())
    }

    /// As `StdioTransport._read_incoming`.
    #[pyo3(name = "_read_incoming")]
    fn read_incoming<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let mut state = self.state()?;
        self.incoming(py, &mut state)
    }

    /// Encode the call `id` to `method` and write it to the server's stdin, whole, without waiting (the
    /// caller holds the output). `None`: written. The line (`bytes`, nothing written) when it is longer than
    /// `quick_bytes` or has more brackets than `quick_depth` (the caller checks it against the limits).
    /// `(written, frame)` when the pipe took only part of it (the caller writes the rest). `OSError` when
    /// the pipe is gone (nothing written).
    #[pyo3(name = "_send_call")]
    fn send_call<'py>(
        &self,
        py: Python<'py>,
        method: &Bound<'py, PyAny>,
        params: Option<&Bound<'py, PyAny>>,
        id: &Bound<'py, PyAny>,
        quick_bytes: usize,
        quick_depth: usize,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let mut frame = Vec::with_capacity(128);
        outgoing::call(&mut frame, method, params, Some(id))?;
        let brackets = frame.iter().filter(|&&byte| byte == b'[' || byte == b'{').count();
        if frame.len() > quick_bytes || brackets > quick_depth {
            return Ok(Some(PyBytes::new(py, &frame).into_any()));
        }
        self.framing.frame(&mut frame);
        let written = loop {
            // SAFETY: `frame` is a live buffer of `frame.len()` bytes for the whole call.
            let count = unsafe { libc::write(self.out_fd, frame.as_ptr().cast(), frame.len()) };
            if let Ok(count) = usize::try_from(count) {
                break count;
            }
            let error = io::Error::last_os_error();
            match error.kind() {
                io::ErrorKind::WouldBlock => break 0,
                io::ErrorKind::Interrupted => py.check_signals()?,
                _ => return Err(error.into()),
            }
        };
        if written == frame.len() {
            return Ok(None);
        }
        Ok(Some(
            PyTuple::new(py, [written.into_pyobject(py)?.into_any(), PyBytes::new(py, &frame).into_any()])?.into_any(),
        ))
    }

    /// Read until a whole message is here, within `timeout` seconds (`None`: no bound), waiting on the pipe
    /// and the halt pipe with the GIL released. The `Response` to the call `id`; `(message,)` for any other
    /// message (as `_read_incoming` gives it), for the client to deliver; `None` when nothing was taken: the
    /// deadline passed, the client halts, or the input ended (then `_has_buffered_message` is true and
    /// `_read_incoming` says so).
    #[pyo3(name = "_read_answer")]
    fn read_answer<'py>(
        &self,
        py: Python<'py>,
        id: &Bound<'py, PyAny>,
        timeout: Option<f64>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let mut state = self.state()?;
        let deadline = timeout.and_then(|timeout| {
            Duration::try_from_secs_f64(timeout.max(0.0)).ok().and_then(|left| Instant::now().checked_add(left))
        });
        while !state.decoder.has_message(true) {
            let (fd, halt_fd) = (self.fd, self.halt_fd);
            let chunk: &mut [u8] = &mut state.chunk;
            match py.detach(|| wait_and_read(fd, halt_fd, deadline, chunk))? {
                Waited::Read(count) => feed(&mut state, count),
                Waited::Nothing => return Ok(None),
                Waited::Interrupted => py.check_signals()?,
            }
        }
        let Some(message) = self.incoming(py, &mut state)? else { return Ok(None) };
        if answers(py, &message, id)? {
            return Ok(Some(message));
        }
        Ok(Some(PyTuple::new(py, [message])?.into_any()))
    }
}

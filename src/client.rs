//! The threaded client's pipes (`_ClientPipe`): how `rpcwire.Client` reads a spawned server's stdout, and
//! how a lone caller makes its whole call in one call into the core.
//!
//! The client's reading (`_read_available`, `_has_buffered_message`, `_read_incoming`, as a transport has
//! them) goes straight to the stdout pipe's descriptor into the protocol crate's framing [`Decoder`], with
//! the GIL released for the system call and for the search of what it brought (each byte searched once, a
//! line over `max_message_bytes` dropped as it arrives, never held); what it hands out is classified by
//! `reply` as every client's reading is. One thread reads at a time: the client's reading lock is here
//! (`_take_reading`, only ever tried), and the state's lock is only ever taken, never waited for: a second
//! reader is a bug, refused with `RuntimeError`.
//!
//! The lone caller's path (`Client.call` when nothing else is in flight): `_call` takes the reading lock,
//! encodes the request and writes it to the stdin pipe (non-blocking) in one write that a pipe never splits
//! (at most `PIPE_BUF` bytes: all of it or nothing), when nobody holds the client's output lock: it does not
//! take that lock, as the GIL is held from the look to the end of the write, and every other writer holds
//! the lock across its writes. It then waits with `poll` on the stdout pipe and the client's halt pipe, the
//! GIL released, reading and framing what comes until a whole message is there, within the caller's
//! timeout. It returns the result of the caller's own answer (its envelope read without a `Response` made
//! for it), or hands anything else back for the Python paths as a typed outcome ([`Outcome`], one of the
//! `LoneOutcome` classes of `rpcwire._contract`: nothing written; another message; the halt,
//! the deadline, the end of input), which then go on exactly as a call that took them from the start:
//! nothing is lost and nothing is written twice. Only for platforms with `poll` (unix); elsewhere the
//! client reads on a thread (the portable path) and never makes one.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Mutex, MutexGuard};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyInt, PyString};

use rpcwire_protocol::framing::{Decoded, Decoder, Dropped, Framing};

use crate::bound;
use crate::decoder;
use crate::outgoing;
use crate::reply;
use crate::request;
use crate::strings::StringCache;

/// The most one read takes (a core's read, as `_read_available` promises the client).
const READ_CHUNK: usize = 64 * 1024;

const CONCURRENT_READ: &str = "the client's pipe is read by one thread at a time";

/// The longest write to a pipe that is never split: a non-blocking one writes all of it or nothing (POSIX's
/// `PIPE_BUF`; Python's `select.PIPE_BUF`).
#[cfg(any(target_os = "linux", target_os = "android"))]
const ATOMIC_WRITE: usize = libc::PIPE_BUF;
#[cfg(not(any(target_os = "linux", target_os = "android")))]
const ATOMIC_WRITE: usize = 512;

/// The most a framing adds to a line: a `Content-Length` header with the longest count, or a newline.
const FRAMING_BYTES: usize = "Content-Length: \r\n\r\n".len() + 20;

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
    /// Whether `out_fd` is a pipe (a FIFO): only then does `_call` write without the output's lock.
    out_is_pipe: bool,
    state: Mutex<State>,
    /// The client's reading lock: held by the one thread reading (only ever tried, never waited for).
    reading: AtomicBool,
    /// When `_call` last read its answer: nanoseconds since `born` (0: never).
    last_read: AtomicU64,
    born: Instant,
}

/// What a wait for a whole message found.
enum Waited {
    /// A whole message (or what the framing dropped, or the end of input) is buffered.
    Message,
    /// The halt pipe, or the deadline, before a whole message.
    Nothing,
}

impl ClientPipe {
    fn state(&self) -> PyResult<MutexGuard<'_, State>> {
        self.state.try_lock().ok_or_else(|| PyRuntimeError::new_err(CONCURRENT_READ))
    }

    /// One read into the decoder (the end of input closes it), and the search of what it brought, the GIL
    /// released: the decoder remembers how far it searched (and drops an over-long line as it goes), so
    /// the `_has_buffered_message` that follows, with the GIL, has nothing left to search.
    fn fill(&self, py: Python<'_>, state: &mut State) -> PyResult<()> {
        let fd = self.fd;
        let State { decoder, chunk, .. } = state;
        loop {
            let read = py.detach(|| {
                let count = read_once(fd, chunk)?;
                feed(decoder, &chunk[..count]);
                decoder.has_message(true);
                io::Result::Ok(())
            });
            match read {
                Ok(()) => return Ok(()),
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
                    let incoming = reply::incoming_object(py, line, self.max_depth, Some(strings))?;
                    return Ok(Some(Self::handed_out(py, incoming, line)?));
                }
                Some(Decoded::Dropped(ref dropped)) => return Ok(Some(self.dropped(py, dropped))),
                None if closed => return Ok(None),
                None => self.fill(py, state)?,
            }
        }
    }

    /// A message read, as the client's reading hands it out: what `reply` makes of a line, a line it cannot
    /// read as `(reason, line)`.
    fn handed_out<'py>(py: Python<'py>, incoming: reply::Incoming<'py>, line: &[u8]) -> PyResult<Bound<'py, PyAny>> {
        Ok(match incoming {
            reply::Incoming::Message(message) => message,
            reply::Incoming::Unreadable(reason) => {
                (PyString::new(py, &reason), PyBytes::new(py, line)).into_pyobject(py)?.into_any()
            }
        })
    }

    /// A message the framing dropped, as its reason.
    fn dropped<'py>(&self, py: Python<'py>, dropped: &Dropped) -> Bound<'py, PyAny> {
        PyString::new(py, &dropped.reason(self.max_message_bytes)).into_any()
    }
}

/// What `_call` read: the result of its answer, or any other message (`None`: nothing taken).
enum Got<'py> {
    Result(Bound<'py, PyAny>),
    Message(Option<Bound<'py, PyAny>>),
}

/// What `_call` hands back when it is not the call's result: one of `rpcwire._contract`'s `LoneOutcome`
/// classes (handed to the module by `_bind`), made here and nowhere else.
enum Outcome<'py> {
    /// Nothing written (the line, for the general path); the reading not held.
    Unsent(Bound<'py, PyAny>),
    /// Its answer, an error (the `Response`); the reading released.
    ErrorAnswer(Bound<'py, PyAny>),
    /// Written, the reading held: another message read first, or nothing taken (`None`).
    ReadOn(Option<Bound<'py, PyAny>>),
    /// Written, the reading held: reading failed.
    ReadFailed(PyErr),
}

impl<'py> Outcome<'py> {
    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let [unsent, error_answer, read_on, read_failed] = bound::lone_outcomes(py)?;
        match self {
            Outcome::Unsent(line) => unsent.bind(py).call1((line,)),
            Outcome::ErrorAnswer(response) => error_answer.bind(py).call1((response,)),
            Outcome::ReadOn(message) => read_on.bind(py).call1((message,)),
            Outcome::ReadFailed(error) => read_failed.bind(py).call1((error.into_value(py),)),
        }
    }
}

/// The instant `timeout` seconds from now (`None`: no bound, or beyond what an `Instant` holds).
fn deadline_after(timeout: Option<f64>) -> Option<Instant> {
    timeout.and_then(|timeout| {
        Duration::try_from_secs_f64(timeout.max(0.0)).ok().and_then(|left| Instant::now().checked_add(left))
    })
}

fn is_pipe(fd: i32) -> bool {
    // SAFETY: `stat` is a plain struct that `fstat` fills; an all-zero one is a valid value to pass it.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `stat` is a live, writable `libc::stat` for the whole call.
    let done = unsafe { libc::fstat(fd, &raw mut stat) };
    done == 0 && (stat.st_mode & libc::S_IFMT) == libc::S_IFIFO
}

/// What one read returned, into the decoder (nothing: the end of input).
fn feed(decoder: &mut Decoder, read: &[u8]) {
    if read.is_empty() {
        decoder.close();
    } else {
        decoder.feed(read);
    }
}

fn read_once(fd: i32, chunk: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `chunk` is a live, writable buffer of `chunk.len()` bytes for the whole call.
    let count = unsafe { libc::read(fd, chunk.as_mut_ptr().cast(), chunk.len()) };
    usize::try_from(count).map_err(|_| io::Error::last_os_error())
}

/// Until `decoder` holds a whole message: wait until `fd` or `halt_fd` is readable (or `deadline`), read
/// `fd` once if it is, and hand what came to `decoder`. No GIL: this is where a long message's bytes are
/// searched (once each, an over-long line dropped as it arrives).
fn wait_for_message(
    fd: i32,
    halt_fd: i32,
    deadline: Option<Instant>,
    decoder: &mut Decoder,
    chunk: &mut [u8],
) -> io::Result<Waited> {
    while !decoder.has_message(true) {
        match wait_and_read(fd, halt_fd, deadline, chunk)? {
            Some(count) => feed(decoder, &chunk[..count]),
            None => return Ok(Waited::Nothing),
        }
    }
    Ok(Waited::Message)
}

/// Wait until `fd` or `halt_fd` is readable (or `deadline`), and read `fd` once if it is: the count read
/// (0: the end of input), or `None` (the halt pipe, or the deadline); `Interrupted` as an error.
fn wait_and_read(fd: i32, halt_fd: i32, deadline: Option<Instant>, chunk: &mut [u8]) -> io::Result<Option<usize>> {
    let timeout = match deadline {
        None => -1,
        Some(deadline) => {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
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
        return Err(io::Error::last_os_error());
    }
    if ready == 0 || fds[1].revents != 0 {
        return Ok(None);
    }
    read_once(fd, chunk).map(Some)
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
            out_is_pipe: is_pipe(out_fd),
            reading: AtomicBool::new(false),
            last_read: AtomicU64::new(0),
            born: Instant::now(),
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

    /// Take the client's reading lock if nobody holds it (`True`: taken).
    #[pyo3(name = "_take_reading")]
    fn take_reading(&self) -> bool {
        self.reading.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).is_ok()
    }

    /// Release the client's reading lock (held by the caller).
    #[pyo3(name = "_leave_reading")]
    fn leave_reading(&self) {
        self.reading.store(false, Ordering::Release);
    }

    /// Whether a thread holds the client's reading lock.
    #[pyo3(name = "_reading_taken")]
    fn is_reading(&self) -> bool {
        self.reading.load(Ordering::Acquire)
    }

    /// Seconds since `_call` last read its answer (`inf`: never).
    #[pyo3(name = "_since_read")]
    fn since_read(&self) -> f64 {
        match self.last_read.load(Ordering::Relaxed) {
            0 => f64::INFINITY,
            nanos => self.born.elapsed().saturating_sub(Duration::from_nanos(nanos)).as_secs_f64(),
        }
    }

    /// A lone caller's whole call to `method`, its id `id`, within `timeout` seconds (`None`: no bound). It
    /// takes the reading lock (if free), encodes the request and writes it whole without waiting, if it fits
    /// the quick limits, and one write to a pipe never splits it, and nobody holds the lock of `output` (the
    /// client's `_Output`, asked with its `_locked`: not taken, as the GIL is held from that look to the end
    /// of the write); then it reads until a whole message is here, within the deadline, waiting on the pipe
    /// and the halt pipe with the GIL released. The result of its answer (then the reading is released), or
    /// an [`Outcome`], a `LoneOutcome` of `rpcwire._contract`: `Unsent(line)` nothing written, the reading not
    /// held (also when another thread reads); `ErrorAnswer(response)` its answer is an error (the reading
    /// released); `ReadOn(message)` written, the reading held, and another message read (as `_read_incoming`
    /// gives it); `ReadOn(None)` written, the reading held, nothing taken (the deadline passed, the client
    /// halts, or the input ended: then `_has_buffered_message` is true and `_read_incoming` says so);
    /// `ReadFailed(exception)` written, the reading held, and the reading failed.
    /// An exception (nothing written, the reading released) when the line cannot be made, or the pipe is
    /// gone (`OSError`); after the write, only when there is no memory to hand back what was read (the
    /// reading released then too).
    #[pyo3(name = "_call")]
    #[allow(clippy::too_many_arguments)]
    fn lone_call<'py>(
        &self,
        py: Python<'py>,
        method: &Bound<'py, PyAny>,
        params: Option<&Bound<'py, PyAny>>,
        id: i64,
        quick_bytes: usize,
        quick_depth: usize,
        timeout: Option<f64>,
        output: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let deadline = deadline_after(timeout);
        let taken = self.take_reading();
        // Nothing written (or the line could not be made): the reading, if taken, is released.
        let unsent = match self.write_lone(py, (method, params, id), (quick_bytes, quick_depth), output, taken) {
            Ok(None) => None,
            Ok(Some(line)) => Some(Outcome::Unsent(line).into_pyobject(py)),
            Err(error) => Some(Err(error)),
        };
        if let Some(unsent) = unsent {
            if taken {
                self.leave_reading();
            }
            return unsent;
        }
        let outcome = match self.read_own(py, id, deadline) {
            Ok(Got::Result(result)) => {
                self.read_done();
                return Ok(result);
            }
            Ok(Got::Message(None)) => Outcome::ReadOn(None).into_pyobject(py),
            Ok(Got::Message(Some(message))) => (|| {
                let id = id.into_pyobject(py)?.into_any();
                match answers(py, &message, &id) {
                    Ok(true) => {
                        let outcome = Outcome::ErrorAnswer(message).into_pyobject(py)?;
                        self.read_done();
                        Ok(outcome)
                    }
                    Ok(false) => Outcome::ReadOn(Some(message)).into_pyobject(py),
                    Err(error) => Outcome::ReadFailed(error).into_pyobject(py),
                }
            })(),
            Err(error) => Outcome::ReadFailed(error).into_pyobject(py),
        };
        // Only making the outcome fails here (no memory): the call was written, but nobody would read
        // for it or for anyone else with the reading held, so it is released.
        if outcome.is_err() {
            self.leave_reading();
        }
        outcome
    }
}

impl ClientPipe {
    /// `_call`'s writing of the call `id` to `method` with `params`: `None` once written; the line when
    /// nothing was written (`taken`: whether it holds the reading lock; without it, the line is all it makes;
    /// `quick`: the quick limits, bytes and depth).
    fn write_lone<'py>(
        &self,
        py: Python<'py>,
        (method, params, id): (&Bound<'py, PyAny>, Option<&Bound<'py, PyAny>>, i64),
        (quick_bytes, quick_depth): (usize, usize),
        output: &Bound<'py, PyAny>,
        taken: bool,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let mut frame = Vec::with_capacity(128);
        outgoing::call(&mut frame, method, params, Some(&id.into_pyobject(py)?.into_any()))?;
        let brackets = frame.iter().filter(|&&byte| byte == b'[' || byte == b'{').count();
        if !taken
            || !self.out_is_pipe
            || frame.len() > quick_bytes
            || brackets > quick_depth
            || frame.len() + FRAMING_BYTES > ATOMIC_WRITE
            // The last Python code before the write: from here on the GIL is held to its end.
            || output.getattr(pyo3::intern!(py, "_locked"))?.call0()?.is_truthy()?
        {
            return Ok(Some(PyBytes::new(py, &frame).into_any()));
        }
        let line_len = frame.len();
        self.framing.frame(&mut frame);
        // SAFETY: `frame` is a live buffer of `frame.len()` bytes for the whole call.
        let count = unsafe { libc::write(self.out_fd, frame.as_ptr().cast(), frame.len()) };
        match usize::try_from(count) {
            // A write to a pipe of at most PIPE_BUF bytes is all or nothing.
            Ok(count) if count == frame.len() => Ok(None),
            Ok(_) => Err(PyRuntimeError::new_err("a pipe split a write of at most PIPE_BUF bytes")),
            Err(_) => {
                let error = io::Error::last_os_error();
                match error.kind() {
                    // (Interrupted: its signal's handler runs as the call goes on, the general way.)
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => {
                        frame.truncate(line_len);
                        Ok(Some(PyBytes::new(py, &frame).into_any()))
                    }
                    _ => Err(error.into()),
                }
            }
        }
    }

    /// Its answer read: when, and the reading released.
    fn read_done(&self) {
        let nanos = u64::try_from(self.born.elapsed().as_nanos()).unwrap_or(u64::MAX).max(1);
        self.last_read.store(nanos, Ordering::Relaxed);
        self.leave_reading();
    }

    /// Read (the reading lock held) until a whole message is here, or the deadline, the halt, the end of
    /// input (`Got::Message(None)`, nothing taken).
    fn read_own<'py>(&self, py: Python<'py>, id: i64, deadline: Option<Instant>) -> PyResult<Got<'py>> {
        let mut state = self.state()?;
        let State { decoder, chunk, strings } = &mut *state;
        let (fd, halt_fd) = (self.fd, self.halt_fd);
        loop {
            match py.detach(|| wait_for_message(fd, halt_fd, deadline, decoder, chunk)) {
                Ok(Waited::Message) => break,
                Ok(Waited::Nothing) => return Ok(Got::Message(None)),
                // A signal interrupted the wait: its handler runs, then the wait goes on.
                Err(error) if error.kind() == io::ErrorKind::Interrupted => py.check_signals()?,
                Err(error) => return Err(error.into()),
            }
        }
        Ok(match decoder.next(true) {
            Some(Decoded::Message(line)) => match reply::read(py, line, self.max_depth, Some(strings), id)? {
                reply::Read::Result(result) => Got::Result(result),
                reply::Read::Incoming(incoming) => Got::Message(Some(Self::handed_out(py, incoming, line)?)),
            },
            Some(Decoded::Dropped(ref dropped)) => Got::Message(Some(self.dropped(py, dropped))),
            None => Got::Message(None),
        })
    }
}

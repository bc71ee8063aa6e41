//! Transport: the `StdioTransport` class and the `serve` loop.
//!
//! I/O model: one thread runs `serve`, which reads, dispatches and writes in turn; any thread may
//! call the `write_*` methods (a handler's progress notifications, for instance). Reading fills a
//! `LineBuffer` with whatever one read returns: `readinto1` (or `read1`) on buffered streams gives
//! up to 64 KiB of what is already there and never waits for more than one line needs; streams
//! without them are read with `readline`. Each written message is one `write` call of a whole
//! line, then `flush`, under a lock that is awaited with the GIL released, so writers on real
//! pipes (whose `write` releases the GIL) never interleave and never deadlock.

use std::sync::{Mutex, MutexGuard};

use pyo3::exceptions::{PyBlockingIOError, PyRuntimeError, PyTypeError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::{MutexExt, PyOnceLock};
use pyo3::types::{PyByteArray, PyBytes, PyType};

use crate::codec;
use crate::dispatch;
use crate::envelope;
use crate::framing::LineBuffer;

/// How much one `readinto1`/`read1` call may return.
const READ_CHUNK: usize = 64 * 1024;

/// The nesting limit of incoming JSON (see `rpcwire.DEFAULT_MAX_DEPTH`).
pub(crate) const DEFAULT_MAX_DEPTH: usize = 128;

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

struct Reader {
    stream: Py<PyAny>,
    method: ReadMethod,
    chunk: Py<PyByteArray>,
    buffer: LineBuffer,
    at_eof: bool,
}

impl Reader {
    /// Copy the next line (without `\n`/`\r\n`) into `line`; `Ok(false)` at end of input.
    fn next_line(&mut self, py: Python<'_>, line: &mut Vec<u8>) -> PyResult<bool> {
        loop {
            if let Some(complete) = self.buffer.pop_line() {
                line.clear();
                line.extend_from_slice(complete);
                return Ok(true);
            }
            if !self.at_eof && !self.fill(py)? {
                self.at_eof = true;
            }
            if self.at_eof {
                let Some(rest) = self.buffer.pop_rest() else {
                    return Ok(false);
                };
                line.clear();
                line.extend_from_slice(rest);
                return Ok(true);
            }
        }
    }

    /// One read from the stream into the buffer; `Ok(false)` at end of input.
    fn fill(&mut self, py: Python<'_>) -> PyResult<bool> {
        match self.read_once(py) {
            Err(error) if self.method != ReadMethod::Readline && error.is_instance(py, unsupported_operation(py)?) => {
                // An `io.BufferedIOBase` subclass inherits `readinto1`/`read1` that it does not implement.
                self.method = ReadMethod::Readline;
                self.read_once(py)
            }
            other => other,
        }
    }

    fn read_once(&mut self, py: Python<'_>) -> PyResult<bool> {
        let stream = self.stream.bind(py);
        match self.method {
            ReadMethod::ReadInto1 | ReadMethod::ReadInto => {
                let name = if self.method == ReadMethod::ReadInto1 {
                    intern!(py, "readinto1")
                } else {
                    intern!(py, "readinto")
                };
                let chunk = self.chunk.bind(py);
                let count = stream.call_method1(name, (chunk,))?;
                if count.is_none() {
                    return Err(PyBlockingIOError::new_err(
                        "stdin is non-blocking and had no data; pass a blocking stream",
                    ));
                }
                let count: usize = count.extract()?;
                // SAFETY: no Python code runs while the slice is alive, so the bytearray cannot change.
                let filled = unsafe { chunk.as_bytes() };
                self.buffer.extend(&filled[..count.min(filled.len())]);
                Ok(count > 0)
            }
            ReadMethod::Read1 => self.extend_with(&stream.call_method1(intern!(py, "read1"), (READ_CHUNK,))?),
            ReadMethod::Readline => self.extend_with(&stream.call_method0(intern!(py, "readline"))?),
        }
    }

    fn extend_with(&mut self, data: &Bound<'_, PyAny>) -> PyResult<bool> {
        if let Ok(bytes) = data.cast::<PyBytes>() {
            self.buffer.extend(bytes.as_bytes());
        } else if let Ok(array) = data.cast::<PyByteArray>() {
            self.buffer.extend(&array.to_vec());
        } else {
            return Err(PyTypeError::new_err("stdin must return bytes; pass a binary file-like object"));
        }
        Ok(data.len()? > 0)
    }
}

struct Writer {
    stream: Py<PyAny>,
    flush: Option<Py<PyAny>>,
}

impl Writer {
    /// Write `line` (a whole message ending in `\n`) and flush.
    fn write_line(&self, py: Python<'_>, line: &[u8]) -> PyResult<()> {
        let stream = self.stream.bind(py);
        let mut offset = 0;
        while offset < line.len() {
            let written = stream.call_method1(intern!(py, "write"), (PyBytes::new(py, &line[offset..]),))?;
            // Buffered streams take everything; a raw stream may take only part of it.
            offset = if written.is_none() { line.len() } else { offset + written.extract::<usize>()? };
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

fn lock<'a, T>(py: Python<'_>, mutex: &'a Mutex<T>) -> PyResult<MutexGuard<'a, T>> {
    mutex.lock_py_attached(py).map_err(|_| PyRuntimeError::new_err("a previous call panicked while holding the stream"))
}

/// Newline-delimited JSON-RPC 2.0 over a pair of binary streams.
///
/// `stdin` and `stdout` default to `sys.stdin.buffer` and `sys.stdout.buffer`; a text stream is
/// replaced by its `.buffer`. Writes from several threads never interleave.
#[pyclass(frozen, module = "rpcwire._rpcwire")]
pub(crate) struct StdioTransport {
    reader: Mutex<Reader>,
    writer: Mutex<Writer>,
    max_depth: usize,
}

impl StdioTransport {
    fn write_line(&self, py: Python<'_>, mut line: Vec<u8>) -> PyResult<()> {
        line.push(b'\n');
        lock(py, &self.writer)?.write_line(py, &line)
    }
}

#[pymethods]
impl StdioTransport {
    #[new]
    #[pyo3(signature = (stdin=None, stdout=None))]
    fn new(py: Python<'_>, stdin: Option<Bound<'_, PyAny>>, stdout: Option<Bound<'_, PyAny>>) -> PyResult<Self> {
        let stdin = binary_stream(py, stdin, "stdin", "readline")?;
        let stdout = binary_stream(py, stdout, "stdout", "write")?;
        let reader = Reader {
            method: read_method(py, &stdin)?,
            stream: stdin.unbind(),
            chunk: PyByteArray::new(py, &vec![0; READ_CHUNK]).unbind(),
            buffer: LineBuffer::default(),
            at_eof: false,
        };
        let flush = stdout.getattr_opt("flush")?.filter(PyAnyMethods::is_callable).map(Bound::unbind);
        let writer = Writer { stream: stdout.unbind(), flush };
        Ok(Self { reader: Mutex::new(reader), writer: Mutex::new(writer), max_depth: DEFAULT_MAX_DEPTH })
    }

    /// The next line without its `\n` (or `\r\n`); `None` at end of input.
    fn read_line<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let mut line = Vec::new();
        let more = lock(py, &self.reader)?.next_line(py, &mut line)?;
        Ok(more.then(|| PyBytes::new(py, &line)))
    }

    /// Write a success answer `{"jsonrpc":"2.0","id":id,"result":result}`.
    fn write_response(&self, py: Python<'_>, id: &Bound<'_, PyAny>, result: &Bound<'_, PyAny>) -> PyResult<()> {
        let mut line = envelope::RESPONSE_START.to_vec();
        codec::encode(&mut line, id)?;
        line.extend_from_slice(envelope::RESULT_MEMBER);
        codec::encode(&mut line, result)?;
        line.extend_from_slice(envelope::RESPONSE_END);
        self.write_line(py, line)
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
        let mut line = envelope::RESPONSE_START.to_vec();
        codec::encode(&mut line, id)?;
        dispatch::write_error_member(&mut line, code, message, data)?;
        self.write_line(py, line)
    }

    /// Write a notification (no `id`), e.g. a progress event while a request is in flight.
    #[pyo3(signature = (method, params=None))]
    fn write_notification(
        &self,
        py: Python<'_>,
        method: &Bound<'_, PyAny>,
        params: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let mut line = envelope::NOTIFICATION_START.to_vec();
        codec::encode(&mut line, method)?;
        if let Some(params) = params.filter(|params| !params.is_none()) {
            line.extend_from_slice(envelope::PARAMS_MEMBER);
            codec::encode(&mut line, params)?;
        }
        line.extend_from_slice(envelope::RESPONSE_END);
        self.write_line(py, line)
    }

    /// Answer every request with `handler(method, params)` until end of input.
    fn serve(&self, py: Python<'_>, handler: &Bound<'_, PyAny>) -> PyResult<()> {
        let mut line = Vec::new();
        let mut answer = Vec::new();
        while lock(py, &self.reader)?.next_line(py, &mut line)? {
            if line.iter().all(|byte| matches!(byte, b' ' | b'\t' | b'\r')) {
                continue;
            }
            answer.clear();
            if dispatch::answer_line(py, &line, handler, self.max_depth, &mut answer)? {
                answer.push(b'\n');
                lock(py, &self.writer)?.write_line(py, &answer)?;
            }
        }
        Ok(())
    }
}

/// Serve `handler` on `transport` until end of input (same as `transport.serve(handler)`).
#[pyfunction]
pub(crate) fn serve(py: Python<'_>, handler: &Bound<'_, PyAny>, transport: &Bound<'_, StdioTransport>) -> PyResult<()> {
    transport.get().serve(py, handler)
}

//! The request the sequential `serve` is calling its handler for, for `rpcwire.current_request()`.
//!
//! The concurrent engine gives every request a `RequestContext` in a context variable. The native
//! sequential loop would pay for one per message that few handlers ask for, so it only notes, for
//! the length of each handler call, where the call's pieces are: no reference taken, nothing
//! allocated, a few stores into a thread-local. `_current_call()` builds a `Request` from them only
//! when the handler asks (through `current_request()`). The context Python makes then is kept here,
//! so that every `current_request()` of the call gets the same one, and it is finished (LSP's
//! `$/progress` `end`) before the call's answer is built.

use std::cell::Cell;

use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyAny, PyString};

use rpcwire_protocol::envelope::Id;

use crate::request;

/// Where the pieces of the call in progress are. Valid only while that call runs, on this thread:
/// they belong to `dispatch::answer_entry`'s frame (or to `serve`'s caller), which outlives it.
#[derive(Clone, Copy)]
struct Call {
    method: *mut ffi::PyObject,
    params: *mut ffi::PyObject,
    /// Null for a notification.
    id: *const Id<'static>,
    transport: *mut ffi::PyObject,
}

/// What this thread notes: both in one thread-local, so that entering and finishing a call each look
/// it up once (a library's thread-local is a call into the dynamic loader).
struct Noted {
    call: Cell<Option<Call>>,
    /// The `RequestContext` made for the call, once a handler asked for one.
    context: Cell<Option<Py<PyAny>>>,
}

thread_local! {
    // `Cell`s, `const`-initialised: noting a call costs a few stores, no borrow flag, no lazy init.
    static NOTED: Noted = const { Noted { call: Cell::new(None), context: Cell::new(None) } };
}

/// This thread's notes, looked up once for a whole `serve` (which runs on one thread) rather than twice
/// a call: a library's thread-local is a call into the dynamic loader.
///
/// Not `Send` (a raw pointer): it stays on the thread it was taken on, whose storage outlives it.
#[derive(Clone, Copy)]
pub(crate) struct ThisThread {
    noted: *const Noted,
}

impl ThisThread {
    pub(crate) fn get() -> Self {
        Self { noted: NOTED.with(std::ptr::from_ref) }
    }

    fn noted(&self) -> &Noted {
        // SAFETY: taken from this thread's `NOTED` (the type is neither `Send` nor `Sync`, so this is that
        // thread), whose storage lives as long as the thread, which is running this code.
        unsafe { &*self.noted }
    }
}

/// The call in progress, noted while this guard lives; what was noted before (a handler that runs
/// another `serve`) comes back when it is dropped.
pub(crate) struct Calling {
    thread: ThisThread,
    previous_call: Option<Call>,
    previous_context: Option<Py<PyAny>>,
}

impl Calling {
    pub(crate) fn enter(
        thread: ThisThread,
        method: &Bound<'_, PyString>,
        params: &Bound<'_, PyAny>,
        id: Option<&Id<'_>>,
        transport: &Bound<'_, PyAny>,
    ) -> Self {
        let call = Call {
            method: method.as_ptr(),
            params: params.as_ptr(),
            id: id.map_or(std::ptr::null(), |id| std::ptr::from_ref(id).cast()),
            transport: transport.as_ptr(),
        };
        let noted = thread.noted();
        Self { thread, previous_call: noted.call.replace(Some(call)), previous_context: noted.context.take() }
    }

    /// The handler returned: finish the context it asked for, if any (before its answer is built).
    pub(crate) fn finish(mut self, py: Python<'_>) -> PyResult<()> {
        // The call is over: what was noted before it comes back.
        let context = self.restore();
        std::mem::forget(self); // restored: nothing left for `drop`
        if let Some(context) = context {
            context.bind(py).call_method0(intern!(py, "_finish"))?;
        }
        Ok(())
    }

    /// Put back what was noted before this call; returns the context made for this call, if any.
    fn restore(&mut self) -> Option<Py<PyAny>> {
        let noted = self.thread.noted();
        noted.call.set(self.previous_call);
        let context = noted.context.take();
        if let Some(previous) = self.previous_context.take() {
            noted.context.set(Some(previous));
        }
        context
    }
}

impl Drop for Calling {
    /// (A call that unwinds: its context, if any, is dropped unfinished, as before.)
    fn drop(&mut self) {
        drop(self.restore());
    }
}

/// `(Request, transport)` for the call the sequential `serve` is making on this thread, or `None`.
#[pyfunction]
pub(crate) fn _current_call(py: Python<'_>) -> PyResult<Option<(Bound<'_, PyAny>, Bound<'_, PyAny>)>> {
    let Some(call) = NOTED.with(|noted| noted.call.get()) else { return Ok(None) };
    // SAFETY: the slot holds a call only while `Calling` lives, that is while `answer_entry` (whose
    // frame owns the method, the params and the id) waits for the handler, which is running this
    // function on this very thread; the transport is `serve`'s own. Borrowed pointers become owned
    // references here, before any other Python code runs.
    let (method, params, transport, id) = unsafe {
        (
            Bound::from_borrowed_ptr(py, call.method).cast_into_unchecked::<PyString>(),
            Bound::from_borrowed_ptr(py, call.params),
            Bound::from_borrowed_ptr(py, call.transport),
            call.id.as_ref(),
        )
    };
    Ok(Some((request::request_from_parts(py, method, params, id)?, transport)))
}

/// The `RequestContext` already made for the call in progress, if any.
#[pyfunction]
pub(crate) fn _current_context(py: Python<'_>) -> Option<Py<PyAny>> {
    NOTED.with(|noted| {
        let context = noted.context.take();
        let copy = context.as_ref().map(|context| context.clone_ref(py));
        noted.context.set(context);
        copy
    })
}

/// Keep `context` for the rest of the call in progress (ignored outside one).
#[pyfunction]
pub(crate) fn _set_current_context(context: Bound<'_, PyAny>) {
    NOTED.with(|noted| {
        if noted.call.get().is_some() {
            noted.context.set(Some(context.unbind()));
        }
    });
}

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

thread_local! {
    // `Cell`s, `const`-initialised: noting a call costs a few stores, no borrow flag, no lazy init.
    static CALL: Cell<Option<Call>> = const { Cell::new(None) };
    /// The `RequestContext` made for the call, once a handler asked for one.
    static CONTEXT: Cell<Option<Py<PyAny>>> = const { Cell::new(None) };
}

/// The call in progress, noted while this guard lives; what was noted before (a handler that runs
/// another `serve`) comes back when it is dropped.
pub(crate) struct Calling {
    previous_call: Option<Call>,
    previous_context: Option<Py<PyAny>>,
}

impl Calling {
    pub(crate) fn enter(
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
        Self { previous_call: CALL.replace(Some(call)), previous_context: CONTEXT.take() }
    }

    /// The handler returned: finish the context it asked for, if any (before its answer is built).
    pub(crate) fn finish(self, py: Python<'_>) -> PyResult<()> {
        let context = CONTEXT.take();
        drop(self); // the call is over: what was noted before it comes back
        if let Some(context) = context {
            context.bind(py).call_method0(intern!(py, "_finish"))?;
        }
        Ok(())
    }
}

impl Drop for Calling {
    fn drop(&mut self) {
        CALL.set(self.previous_call);
        if let Some(context) = self.previous_context.take() {
            CONTEXT.set(Some(context));
        }
    }
}

/// `(Request, transport)` for the call the sequential `serve` is making on this thread, or `None`.
#[pyfunction]
pub(crate) fn _current_call(py: Python<'_>) -> PyResult<Option<(Bound<'_, PyAny>, Bound<'_, PyAny>)>> {
    let Some(call) = CALL.get() else { return Ok(None) };
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
    let context = CONTEXT.take();
    let copy = context.as_ref().map(|context| context.clone_ref(py));
    CONTEXT.set(context);
    copy
}

/// Keep `context` for the rest of the call in progress (ignored outside one).
#[pyfunction]
pub(crate) fn _set_current_context(context: Bound<'_, PyAny>) {
    if CALL.get().is_some() {
        CONTEXT.set(Some(context.unbind()));
    }
}

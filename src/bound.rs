//! The Python objects the native module calls back, handed to it once at import by `rpcwire/__init__.py`
//! (`_bind`): the native module never imports the package's Python modules itself (they import it), so
//! there is no import cycle and no lookup by module name on any path.

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;

/// What `_bind` was given.
struct Objects {
    /// `rpcwire.serve`: the one place that chooses how a transport is served.
    serve: Py<PyAny>,
    /// `rpcwire.Request`, built for every request a reader hands out.
    request: Py<PyType>,
    /// `rpcwire.Response`, built for every response a client reads.
    response: Py<PyType>,
    /// `rpcwire.JsonRpcError`: a handler's exception of this type carries its own code and message.
    json_rpc_error: Py<PyType>,
    /// `rpcwire._types.Refused`: what a `FrameDecoder` hands out for a dropped message.
    refused: Py<PyType>,
    /// `rpcwire._answer.log_failure`: how every mode logs a handler's exception answered -32603.
    log_failure: Py<PyAny>,
    /// `rpcwire._answer.meta_traceparent`: the trace context of a request's `params._meta`.
    meta_traceparent: Py<PyAny>,
    /// `rpcwire._contract`'s `Unsent`, `ErrorAnswer`, `ReadOn`, `ReadFailed`: what a lone call's
    /// `_ClientPipe._call` returns when it is not the call's result (`client::Outcome`).
    lone_outcomes: [Py<PyType>; 4],
}

static OBJECTS: PyOnceLock<Objects> = PyOnceLock::new();

/// Hand the native module the Python objects it calls back (at the package's import). The first binding
/// stays: an extension module is initialised once per process, so a package imported again (a reload,
/// `sys.modules` cleared) finds it bound already, as the lazily imported types of before stayed too.
#[pyfunction]
#[pyo3(signature = (*, serve, request, response, json_rpc_error, refused, log_failure, meta_traceparent, lone_outcomes))]
#[allow(clippy::too_many_arguments)] // keyword-only: one per object, named at the one call
pub(crate) fn _bind(
    py: Python<'_>,
    serve: Bound<'_, PyAny>,
    request: Bound<'_, PyType>,
    response: Bound<'_, PyType>,
    json_rpc_error: Bound<'_, PyType>,
    refused: Bound<'_, PyType>,
    log_failure: Bound<'_, PyAny>,
    meta_traceparent: Bound<'_, PyAny>,
    lone_outcomes: [Bound<'_, PyType>; 4],
) {
    let objects = Objects {
        serve: serve.unbind(),
        request: request.unbind(),
        response: response.unbind(),
        json_rpc_error: json_rpc_error.unbind(),
        refused: refused.unbind(),
        log_failure: log_failure.unbind(),
        meta_traceparent: meta_traceparent.unbind(),
        lone_outcomes: lone_outcomes.map(Bound::unbind),
    };
    // Already bound: the first binding stays (see above); the new objects are dropped.
    let _ = OBJECTS.set(py, objects);
}

#[inline]
fn objects(py: Python<'_>) -> PyResult<&Objects> {
    OBJECTS.get(py).ok_or_else(|| PyRuntimeError::new_err("rpcwire._rpcwire is used before `import rpcwire` bound it"))
}

/// `rpcwire.serve`.
pub(crate) fn serve(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    Ok(objects(py)?.serve.bind(py))
}

/// `rpcwire.Request`.
#[inline]
pub(crate) fn request(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    Ok(objects(py)?.request.bind(py))
}

/// `rpcwire.Response`.
#[inline]
pub(crate) fn response(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    Ok(objects(py)?.response.bind(py))
}

/// `rpcwire.JsonRpcError`.
pub(crate) fn json_rpc_error(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    Ok(objects(py)?.json_rpc_error.bind(py))
}

/// `rpcwire._types.Refused`.
pub(crate) fn refused(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    Ok(objects(py)?.refused.bind(py))
}

/// `rpcwire._answer.log_failure`.
pub(crate) fn log_failure(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    Ok(objects(py)?.log_failure.bind(py))
}

/// `rpcwire._answer.meta_traceparent`.
pub(crate) fn meta_traceparent(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    Ok(objects(py)?.meta_traceparent.bind(py))
}

/// The lone call's outcome classes, in `client::Outcome`'s order.
pub(crate) fn lone_outcomes(py: Python<'_>) -> PyResult<&[Py<PyType>; 4]> {
    Ok(&objects(py)?.lone_outcomes)
}

//! The Python objects the native module calls back, handed to it once at import by `rpcwire/__init__.py`
//! (`_bind`): the native module never imports the package's Python modules itself (they import it).

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;

/// `rpcwire.serve`: the one place that chooses how a transport is served.
static SERVE: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// Hand the native module the Python objects it calls back (once, at the package's import).
#[pyfunction]
pub(crate) fn _bind(py: Python<'_>, serve: Bound<'_, PyAny>) -> PyResult<()> {
    SERVE.set(py, serve.unbind()).map_err(|_| PyRuntimeError::new_err("rpcwire._rpcwire is already bound"))
}

/// `rpcwire.serve`, as bound at import.
pub(crate) fn serve(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    SERVE
        .get(py)
        .map(|serve| serve.bind(py))
        .ok_or_else(|| PyRuntimeError::new_err("rpcwire._rpcwire is used before `import rpcwire` bound it"))
}

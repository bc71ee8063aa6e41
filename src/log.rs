//! The `rpcwire` logger: where what the wire does not carry goes (stdout is the wire, so nothing is
//! ever printed). The detail of the transport's own -32700/-32600 answers is logged at DEBUG;
//! failing notifications at DEBUG or ERROR (see `dispatch`); every -32603 made from an exception at
//! ERROR with its traceback (see `answer` and `dispatch`).

use pyo3::call::PyCallArgs;
use pyo3::exceptions::PyBaseException;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::IntoPyDict;

static LOGGER: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// The `rpcwire` logger.
pub(crate) fn logger(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    LOGGER
        .get_or_try_init(py, || Ok::<_, PyErr>(py.import("logging")?.call_method1("getLogger", ("rpcwire",))?.unbind()))
        .map(|logger| logger.bind(py))
}

/// Log `"{what}: {detail}"` at DEBUG.
pub(crate) fn debug(py: Python<'_>, what: &str, detail: impl std::fmt::Display) -> PyResult<()> {
    // `Logger.debug` checks the level itself; asking `isEnabledFor` first would only add a call.
    logger(py)?.call_method1(intern!(py, "debug"), ("%s: %s", what, detail.to_string()))?;
    Ok(())
}

/// Log at ERROR with `error` and its traceback (`exc_info`); `args` are the format and its
/// arguments, as `Logger.error` takes them.
pub(crate) fn error<'py>(py: Python<'py>, args: impl PyCallArgs<'py>, error: &PyErr) -> PyResult<()> {
    let kwargs = [(intern!(py, "exc_info"), with_traceback(py, error))].into_py_dict(py)?;
    logger(py)?.call_method(intern!(py, "error"), args, Some(&kwargs))?;
    Ok(())
}

/// The exception of `error` with its traceback as `__traceback__`: up to Python 3.11 an exception
/// fetched from the interpreter keeps its traceback apart, and `exc_info` reads `__traceback__`.
pub(crate) fn with_traceback<'py>(py: Python<'py>, error: &PyErr) -> Bound<'py, PyBaseException> {
    error.clone_ref(py).into_value(py).into_bound(py)
}

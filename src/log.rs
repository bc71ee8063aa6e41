//! The `rpcwire` logger: where what the wire does not carry goes (stdout is the wire, so nothing is
//! ever printed). The detail of the transport's own -32700/-32600 answers is logged at DEBUG;
//! failing notifications at DEBUG or ERROR (see `dispatch`); every -32603 made from an exception at
//! ERROR with its traceback (see `answer` and `dispatch`).

use pyo3::call::PyCallArgs;
use pyo3::exceptions::PyBaseException;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{IntoPyDict, PyBool, PyDict, PyType};

static LOGGER: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static LOGGER_CLASS: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// `logging.DEBUG`.
const DEBUG: i32 = 10;

/// The `rpcwire` logger.
pub(crate) fn logger(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    LOGGER
        .get_or_try_init(py, || Ok::<_, PyErr>(py.import("logging")?.call_method1("getLogger", ("rpcwire",))?.unbind()))
        .map(|logger| logger.bind(py))
}

/// Log `"{what}: {detail}"` at DEBUG (`detail` is formatted only when the record is made).
pub(crate) fn debug(py: Python<'_>, what: &str, detail: impl std::fmt::Display) -> PyResult<()> {
    let logger = logger(py)?;
    if !debug_may_log(py, logger)? {
        return Ok(());
    }
    logger.call_method1(intern!(py, "debug"), ("%s: %s", what, detail.to_string()))?;
    Ok(())
}

/// `False` when `logger.debug` would certainly drop its record: a plain `logging.Logger` whose
/// `isEnabledFor` has cached `False` for DEBUG (the cache `logging` itself clears whenever a level
/// or `logging.disable` changes). Read here without calling into Python: a server that answers many
/// malformed lines would otherwise run `Logger.debug`'s Python code for each. `True` (then
/// `Logger.debug` decides) for anything else: a logger class of the application's, no cache entry yet.
fn debug_may_log(py: Python<'_>, logger: &Bound<'_, PyAny>) -> PyResult<bool> {
    if !logger.get_type().is(LOGGER_CLASS.import(py, "logging", "Logger")?) {
        return Ok(true);
    }
    let Some(cache) = logger.getattr_opt(intern!(py, "_cache"))? else { return Ok(true) };
    let Ok(cache) = cache.cast_into::<PyDict>() else { return Ok(true) };
    let cached = cache.get_item(DEBUG)?;
    Ok(!cached.is_some_and(|enabled| enabled.cast::<PyBool>().is_ok_and(|enabled| !enabled.is_true())))
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

//! The `rpcwire` logger: where what the wire does not carry goes (stdout is the wire, so nothing is
//! ever printed). The detail of the transport's own -32700/-32600 answers is logged at DEBUG;
//! failing notifications at DEBUG or ERROR (see `dispatch`).

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;

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

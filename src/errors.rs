//! Errors: the binding's one Rust error type, a syntax error of the input or a Python exception, and
//! how it reaches Python.
//!
//! Input never panics: a line that is not JSON is a [`SyntaxError`] value (`rpcwire_protocol::errors`),
//! answered on the wire with -32700 by the dispatcher. Its text (what and where) goes to the `rpcwire`
//! logger, not onto the wire, so that both implementations write the same bytes.

pub(crate) use rpcwire_protocol::errors::SyntaxError;

/// Anything that can go wrong while turning JSON text into Python objects.
#[derive(Debug)]
pub(crate) enum Error {
    Syntax(SyntaxError),
    Python(pyo3::PyErr),
}

impl From<SyntaxError> for Error {
    fn from(error: SyntaxError) -> Self {
        Error::Syntax(error)
    }
}

impl From<pyo3::PyErr> for Error {
    fn from(error: pyo3::PyErr) -> Self {
        Error::Python(error)
    }
}

impl From<Error> for pyo3::PyErr {
    fn from(error: Error) -> Self {
        match error {
            Error::Syntax(error) => pyo3::exceptions::PyValueError::new_err(error.to_string()),
            Error::Python(error) => error,
        }
    }
}

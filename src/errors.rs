//! Errors: the one Rust error type of input that is not JSON, and how it reaches Python.
//!
//! Input never panics: a line that is not JSON is a [`SyntaxError`] value, answered on the wire
//! with -32700 by the dispatcher. Its text (what and where) goes to the `rpcwire` logger, not
//! onto the wire, so that both implementations write the same bytes.
//!
//! The fuzz targets (fuzz/, built with `--cfg fuzzing`) compile this file without pyo3: only
//! [`SyntaxError`] is theirs.

use std::fmt;

/// Why a line is not one strict RFC 8259 JSON text, and the byte offset where that was seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SyntaxError {
    pub(crate) what: &'static str,
    pub(crate) position: usize,
}

impl fmt::Display for SyntaxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at byte {}", self.what, self.position)
    }
}

impl std::error::Error for SyntaxError {}

/// Anything that can go wrong while turning JSON text into Python objects.
#[cfg(not(fuzzing))]
#[derive(Debug)]
pub(crate) enum Error {
    Syntax(SyntaxError),
    Python(pyo3::PyErr),
}

#[cfg(not(fuzzing))]
impl From<SyntaxError> for Error {
    fn from(error: SyntaxError) -> Self {
        Error::Syntax(error)
    }
}

#[cfg(not(fuzzing))]
impl From<pyo3::PyErr> for Error {
    fn from(error: pyo3::PyErr) -> Self {
        Error::Python(error)
    }
}

#[cfg(not(fuzzing))]
impl From<Error> for pyo3::PyErr {
    fn from(error: Error) -> Self {
        match error {
            Error::Syntax(error) => pyo3::exceptions::PyValueError::new_err(error.to_string()),
            Error::Python(error) => error,
        }
    }
}

//! Stand-in for the Python-free half of `src/errors.rs` (whose `Error` enum wraps a `PyErr`), so
//! that `json.rs` and `envelope.rs` compile here without pyo3. Keep it identical to the original.

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

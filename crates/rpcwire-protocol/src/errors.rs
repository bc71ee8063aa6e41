//! The one error of input that is not JSON: a [`SyntaxError`] value, never a panic.
//!
//! A line that is not JSON is answered on the wire with -32700 by the binding; its text (what and
//! where) goes to the `rpcwire` logger, not onto the wire, so that both implementations write the same
//! bytes. The binding's own error type (a syntax error or a Python exception) is `rpcwire`'s
//! `src/errors.rs`.

use std::fmt;

/// Why a line is not one strict RFC 8259 JSON text, and the byte offset where that was seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SyntaxError {
    pub what: &'static str,
    pub position: usize,
}

impl fmt::Display for SyntaxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at byte {}", self.what, self.position)
    }
}

impl std::error::Error for SyntaxError {}

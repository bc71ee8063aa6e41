//! JSON text without Python: a strict RFC 8259 scanner, string unescaping and escaping, and
//! Python's float formatting, one concern a file:
//!
//! | module | owns |
//! | --- | --- |
//! | `scan` | the `Scanner` cursor: whitespace, brackets and depth, member names, literals, a value skipped |
//! | `scan_string` | the scanner's strings: validated (SSE2), borrowed, or unescaped in one walk (into a buffer or a `str`'s units) |
//! | `scan_number` | the scanner's numbers: validated, and valued in the same walk |
//! | `unescape` | a string's escapes resolved to WTF-8; WTF-8 widened into a Python string's storage units |
//! | `escape` | the escaping writer: text as a JSON string, as Python's `json` writes it |
//! | `float_repr` | a float as Python's `repr(float)` writes it |
//!
//! The scanner validates as it walks and hands out borrowed pieces of the input (a string's raw
//! content, a number's text, a value's span), so that the envelope is checked without building
//! anything and only `params` are later turned into Python objects (see `codec`). It accepts
//! exactly what `json.loads` accepts with NaN and Infinity refused, so both implementations agree
//! on every byte: lone surrogate escapes are allowed (strings are handled as WTF-8 here), numbers
//! of any length are allowed (the longest integer is recorded for Python's digit limit), and the
//! nesting depth is bounded by `max_depth`, and by the stack left to the thread (`stack`), before
//! any recursion. The items are re-exported here: callers name `json::Scanner`, not its file.

mod escape;
mod float_repr;
mod scan;
mod scan_number;
mod scan_string;
mod unescape;

pub use escape::{write_ascii_str, write_escaped_code_points, write_escaped_str, write_short, CodeUnit};
pub use float_repr::write_float_repr;
pub use scan::{JsonStr, Kind, Scanner};
pub use scan_number::Number;
pub use scan_string::{StrCursor, StrText, UnitsStop};
pub use unescape::{count_chars, unescape_into, widen_wtf8, StrUnit, Width};

type Result<T> = std::result::Result<T, crate::errors::SyntaxError>;

//! The strict RFC 8259 scanner's cursor: `Scanner` walks one JSON text, validating as it goes, and hands
//! out borrowed pieces of it (a string's raw content, a number's text, a value's span), so that the
//! envelope is checked without building anything and only `params` are later turned into Python
//! objects (the binding's `codec`). Here: the cursor, whitespace, brackets and their depth, member
//! names, literals, and the skip of a whole value; strings are read in `scan_string`, numbers in
//! `scan_number` (further `impl Scanner` blocks, one concern each, as jiter splits its parser).
//!
//! The nesting depth is bounded by `max_depth`, and by the stack left to the thread (`stack`), before
//! any recursion.

use std::borrow::Cow;

use super::unescape::unescape_into;
use super::Result;
use crate::errors::SyntaxError;
use crate::stack::StackFloor;

/// The kind of a JSON value, as far as the envelope needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Null,
    Bool,
    Integer,
    Float,
    String,
    Array,
    Object,
}

/// A string's content between its quotes, exactly as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JsonStr<'a> {
    pub raw: &'a str,
    /// Whether `raw` contains a backslash escape (if not, `raw` is already the decoded text).
    pub escaped: bool,
}

impl<'a> JsonStr<'a> {
    /// The decoded string as WTF-8 (UTF-8 that may hold lone surrogates), and whether it does.
    pub fn decode(&self) -> (Cow<'a, [u8]>, bool) {
        if !self.escaped {
            return (Cow::Borrowed(self.raw.as_bytes()), false);
        }
        let mut out = Vec::with_capacity(self.raw.len());
        let has_surrogate = unescape_into(self.raw.as_bytes(), &mut out);
        (Cow::Owned(out), has_surrogate)
    }

    /// Whether the decoded string equals `expected`.
    #[inline]
    pub fn decodes_to(&self, expected: &str) -> bool {
        if self.escaped {
            self.decode().0.as_ref() == expected.as_bytes()
        } else {
            self.raw == expected
        }
    }
}

/// A cursor over one JSON text that validates as it goes.
pub struct Scanner<'a> {
    pub(super) text: &'a str,
    pub(super) pos: usize,
    pub(super) depth: usize,
    pub(super) max_depth: usize,
    /// Where this thread's stack must stop: a container is entered only above it.
    pub(super) stack: StackFloor,
    /// Digits of the longest integer literal seen (Python refuses to parse very long ones).
    pub longest_integer: usize,
}

impl<'a> Scanner<'a> {
    pub fn new(text: &'a str, max_depth: usize) -> Self {
        Self { text, pos: 0, depth: 0, max_depth, stack: StackFloor::new(), longest_integer: 0 }
    }

    pub(super) fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    pub(super) fn error(&self, what: &'static str) -> SyntaxError {
        SyntaxError { what, position: self.pos }
    }

    pub fn skip_whitespace(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.bytes().get(self.pos) {
            self.pos += 1;
        }
    }

    /// The next byte after any whitespace, not consumed.
    pub fn peek(&mut self) -> Option<u8> {
        self.skip_whitespace();
        self.bytes().get(self.pos).copied()
    }

    /// The current position, after any whitespace: where the next value starts.
    pub fn value_start(&mut self) -> usize {
        self.skip_whitespace();
        self.pos
    }

    /// The text not read yet (whitespace included).
    #[inline]
    pub fn rest(&self) -> &'a [u8] {
        &self.bytes()[self.pos..]
    }

    /// Consume `literal` if the text goes on with exactly these bytes (no whitespace skipped first);
    /// `literal` must be whole tokens (`"name":`, `"2.0"`), so that what follows is scanned as usual.
    #[inline]
    pub fn eat(&mut self, literal: &[u8]) -> bool {
        let matched = self.rest().starts_with(literal);
        if matched {
            self.pos += literal.len();
        }
        matched
    }

    /// The text from `start` to the current position.
    pub fn span_from(&self, start: usize) -> &'a str {
        &self.text[start..self.pos]
    }

    /// Succeeds only if nothing but whitespace is left.
    pub fn finish(&mut self) -> Result<()> {
        match self.peek() {
            None => Ok(()),
            Some(_) => Err(self.error("extra data after the JSON value")),
        }
    }

    pub(super) fn expect(&mut self, byte: u8, what: &'static str) -> Result<()> {
        if self.peek() == Some(byte) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.error(what))
        }
    }

    /// Consume `[` or `{` and enter it; `Ok(true)` if it has items, `Ok(false)` if it was empty
    /// (then its closing bracket is consumed too).
    pub fn open(&mut self, bracket: u8) -> Result<bool> {
        self.expect(bracket, "expected '[' or '{'")?;
        if self.depth == self.max_depth {
            return Err(self.error("nesting deeper than the limit"));
        }
        // The only recursion of the walks over JSON text (here and in `codec`) is through `open`.
        if !self.stack.has_room(self.depth) {
            return Err(self.error("nesting deeper than this thread's stack allows"));
        }
        self.depth += 1;
        let close = if bracket == b'[' { b']' } else { b'}' };
        if self.peek() == Some(close) {
            self.pos += 1;
            self.depth -= 1;
            return Ok(false);
        }
        Ok(true)
    }

    /// After an array's item: consume a `,` and return `true` if the next item follows it at once
    /// and starts like a number (`-` or a digit); otherwise consume nothing (`more` reads what is
    /// there). The decoder's loop over runs of numbers (`[1,2,3]`), which then needs no `more`.
    #[inline(always)]
    #[allow(clippy::inline_always)] // once per number of a long array
    pub fn comma_before_number(&mut self) -> bool {
        let found = matches!(self.rest(), [b',', b'-' | b'0'..=b'9', ..]);
        self.pos += usize::from(found);
        found
    }

    /// After an item: `Ok(true)` if a `,` announces another, `Ok(false)` at the closing bracket.
    pub fn more(&mut self, close: u8) -> Result<bool> {
        match self.peek() {
            Some(b',') => {
                self.pos += 1;
                Ok(true)
            }
            Some(byte) if byte == close => {
                self.pos += 1;
                self.depth -= 1;
                Ok(false)
            }
            _ => Err(self.error("expected ',' or a closing bracket")),
        }
    }

    /// An object member's name and the `:` after it.
    pub fn key(&mut self) -> Result<JsonStr<'a>> {
        if self.peek() != Some(b'"') {
            return Err(self.error("expected a member name in double quotes"));
        }
        let key = self.string()?;
        self.expect(b':', "expected ':' after a member name")?;
        Ok(key)
    }

    fn literal(&mut self, word: &'static [u8]) -> Result<()> {
        if self.bytes()[self.pos..].starts_with(word) {
            self.pos += word.len();
            Ok(())
        } else {
            Err(self.error("expected a value"))
        }
    }

    /// Validate and skip one value of any kind.
    pub fn value(&mut self) -> Result<Kind> {
        match self.peek() {
            Some(b'"') => self.string().map(|_| Kind::String),
            Some(b'-' | b'0'..=b'9') => {
                self.number().map(|(_, integer)| if integer { Kind::Integer } else { Kind::Float })
            }
            Some(b'n') => self.literal(b"null").map(|()| Kind::Null),
            Some(b't') => self.literal(b"true").map(|()| Kind::Bool),
            Some(b'f') => self.literal(b"false").map(|()| Kind::Bool),
            Some(b'[') => {
                if self.open(b'[')? {
                    loop {
                        self.value()?;
                        if !self.more(b']')? {
                            break;
                        }
                    }
                }
                Ok(Kind::Array)
            }
            Some(b'{') => {
                if self.open(b'{')? {
                    loop {
                        self.key()?;
                        self.value()?;
                        if !self.more(b'}')? {
                            break;
                        }
                    }
                }
                Ok(Kind::Object)
            }
            _ => Err(self.error("expected a value")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Kind, Scanner};

    fn skim(text: &str, max_depth: usize) -> Result<Kind, String> {
        let mut scanner = Scanner::new(text, max_depth);
        let kind = scanner.value().map_err(|e| e.to_string())?;
        scanner.finish().map_err(|e| e.to_string())?;
        Ok(kind)
    }

    #[test]
    fn accepts_exactly_rfc_8259() {
        for good in
            ["0", "-0", "1.5e-3", "1E+2", " [1, {\"a\": [true, false, null]}] ", "\"\\ud800\"", "\"\\u00e9\\/\""]
        {
            assert!(skim(good, 128).is_ok(), "{good}");
        }
        for bad in [
            "",
            "01",
            "1.",
            ".5",
            "-",
            "1e",
            "+1",
            "NaN",
            "Infinity",
            "-Infinity",
            "[1,]",
            "{\"a\":1,}",
            "{'a':1}",
            "[1] [2]",
            "\"\t\"",
            "\"\\x\"",
            "\"\\u12\"",
            "tru",
            "nul",
            "{\"a\" 1}",
            "{1:2}",
            "[",
            "\"abc",
        ] {
            assert!(skim(bad, 128).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn depth_is_bounded_before_recursing() {
        let nested = |depth: usize| "[".repeat(depth) + &"]".repeat(depth);
        assert_eq!(skim(&nested(128), 128), Ok(Kind::Array));
        assert!(skim(&nested(129), 128).unwrap_err().contains("nesting"));
        assert!(skim(&"[".repeat(1_000_000), 128).is_err());
    }
}

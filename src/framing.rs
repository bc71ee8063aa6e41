//! Framing: bytes in, newline-delimited lines out.
//!
//! The transport fills a [`LineBuffer`] with whatever one read returned (a large chunk or a single
//! line) and takes complete lines out of it. Lines end at the byte `\n` only; a `\r` right before
//! it is dropped. Nothing here knows about JSON or Python, so it is tested with `cargo test`.

use memchr::memchr;

/// What the buffer hands out next.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Line<'a> {
    /// A whole line, without its `\n` (and a `\r` before it).
    Complete(&'a [u8]),
    /// A line longer than the limit, already discarded; `looks_like_json` when its first
    /// significant byte opened an object or an array (it is answered as an invalid request rather
    /// than as a parse error).
    TooLong { looks_like_json: bool },
}

/// Bytes read but not yet handed out as lines.
///
/// A line longer than `max_line` bytes (not counting its `\n` or `\r\n`) is never held whole: once
/// the partial line passes the limit its bytes are dropped as they arrive, up to its `\n`.
#[derive(Debug)]
pub(crate) struct LineBuffer {
    data: Vec<u8>,
    /// Everything before this index has been handed out.
    consumed: usize,
    /// `data[consumed..scanned]` is known to hold no `\n`, so a long line is searched only once.
    scanned: usize,
    max_line: usize,
    /// Set while the rest of an over-long line is being dropped.
    discarding: bool,
    /// The first significant byte of the line being dropped, once one was seen.
    discarded_first: Option<u8>,
}

impl LineBuffer {
    pub(crate) fn new(max_line: usize) -> Self {
        Self { data: Vec::new(), consumed: 0, scanned: 0, max_line, discarding: false, discarded_first: None }
    }

    /// Append bytes that were just read.
    pub(crate) fn extend(&mut self, bytes: &[u8]) {
        if self.consumed > 0 {
            // Only the partial last line is left: move it to the front instead of growing forever.
            self.data.drain(..self.consumed);
            self.scanned -= self.consumed;
            self.consumed = 0;
        }
        self.data.extend_from_slice(bytes);
    }

    /// Whether a complete line (or the end of an over-long one) is buffered.
    pub(crate) fn has_line(&self) -> bool {
        memchr(b'\n', &self.data[self.scanned..]).is_some()
    }

    /// The next line, if a complete one (or the end of an over-long one) is buffered.
    pub(crate) fn pop_line(&mut self) -> Option<Line<'_>> {
        let Some(offset) = memchr(b'\n', &self.data[self.scanned..]) else {
            self.scanned = self.data.len();
            // One byte of slack: a `\r` right before the `\n` is not part of the line.
            if self.discarding || self.scanned - self.consumed > self.max_line + 1 {
                self.discard_rest();
            }
            return None;
        };
        let newline = self.scanned + offset;
        let start = self.consumed;
        self.consumed = newline + 1;
        self.scanned = self.consumed;
        if self.discarding {
            return Some(self.end_discarding(start, newline));
        }
        Some(self.checked(start, newline))
    }

    /// At end of input: the last line if it had no `\n` (and was not empty).
    pub(crate) fn pop_rest(&mut self) -> Option<Line<'_>> {
        let start = self.consumed;
        self.consumed = self.data.len();
        self.scanned = self.consumed;
        if self.discarding {
            return Some(self.end_discarding(start, self.data.len()));
        }
        (start < self.data.len()).then(|| self.checked(start, self.data.len()))
    }

    fn checked(&self, start: usize, end: usize) -> Line<'_> {
        let line = strip_cr(&self.data[start..end]);
        if line.len() > self.max_line {
            too_long(first_significant(line))
        } else {
            Line::Complete(line)
        }
    }

    fn discard_rest(&mut self) {
        self.discarding = true;
        self.discarded_first = self.discarded_first.or_else(|| first_significant(&self.data[self.consumed..]));
        self.consumed = self.data.len();
        self.scanned = self.consumed;
    }

    /// The over-long line being dropped ends with `data[start..end]`.
    fn end_discarding(&mut self, start: usize, end: usize) -> Line<'static> {
        self.discarding = false;
        too_long(self.discarded_first.take().or_else(|| first_significant(&self.data[start..end])))
    }
}

fn too_long(first_significant: Option<u8>) -> Line<'static> {
    Line::TooLong { looks_like_json: matches!(first_significant, Some(b'{' | b'[')) }
}

/// The first byte that is not JSON whitespace.
fn first_significant(bytes: &[u8]) -> Option<u8> {
    bytes.iter().copied().find(|byte| !matches!(byte, b' ' | b'\t' | b'\r' | b'\n'))
}

fn strip_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

#[cfg(test)]
mod tests {
    use super::{Line, LineBuffer};

    const NO_LIMIT: usize = 1 << 40;

    #[allow(clippy::unnecessary_wraps)] // compared with what `pop_line` returns
    fn complete(bytes: &[u8]) -> Option<Line<'_>> {
        Some(Line::Complete(bytes))
    }

    fn drain(buffer: &mut LineBuffer) -> Vec<Vec<u8>> {
        std::iter::from_fn(|| match buffer.pop_line()? {
            Line::Complete(line) => Some(line.to_vec()),
            Line::TooLong { .. } => Some(b"<too long>".to_vec()),
        })
        .collect()
    }

    #[test]
    fn splits_on_newline_only() {
        let mut buffer = LineBuffer::new(NO_LIMIT);
        buffer.extend("a\u{2028}b\nc\r\n\n".as_bytes());
        assert_eq!(drain(&mut buffer), vec!["a\u{2028}b".as_bytes().to_vec(), b"c".to_vec(), b"".to_vec()]);
        assert_eq!(buffer.pop_rest(), None);
    }

    #[test]
    fn joins_a_line_split_across_reads() {
        let mut buffer = LineBuffer::new(NO_LIMIT);
        buffer.extend(b"first\nsec");
        assert_eq!(buffer.pop_line(), complete(b"first"));
        assert_eq!(buffer.pop_line(), None);
        buffer.extend(b"ond");
        assert_eq!(buffer.pop_line(), None);
        buffer.extend(b"\r\nthird");
        assert_eq!(buffer.pop_line(), complete(b"second"));
        assert_eq!(buffer.pop_line(), None);
        assert_eq!(buffer.pop_rest(), complete(b"third"));
        assert_eq!(buffer.pop_rest(), None);
    }

    #[test]
    fn keeps_only_the_partial_line_after_extend() {
        let mut buffer = LineBuffer::new(NO_LIMIT);
        for _ in 0..1000 {
            buffer.extend(b"0123456789\n01234");
            assert_eq!(buffer.pop_line(), complete(b"0123456789"));
            buffer.extend(b"56789\n");
            assert_eq!(buffer.pop_line(), complete(b"0123456789"));
        }
        buffer.extend(b"");
        assert!(buffer.data.is_empty());
    }

    #[test]
    fn a_lone_carriage_return_at_the_end_is_dropped() {
        let mut buffer = LineBuffer::new(NO_LIMIT);
        buffer.extend(b"x\r");
        assert_eq!(buffer.pop_line(), None);
        assert_eq!(buffer.pop_rest(), complete(b"x"));
    }

    #[test]
    fn an_over_long_line_is_dropped_as_it_arrives_and_the_next_is_served() {
        let mut buffer = LineBuffer::new(8);
        buffer.extend(b"12345678\r\n{\"a\":");
        assert_eq!(buffer.pop_line(), complete(b"12345678"));
        for _ in 0..1000 {
            buffer.extend(b"0123456789");
            assert_eq!(buffer.pop_line(), None);
            assert!(buffer.data.len() <= 20, "the over-long line is held: {} bytes", buffer.data.len());
        }
        buffer.extend(b"\nnext\n");
        assert_eq!(buffer.pop_line(), Some(Line::TooLong { looks_like_json: true }));
        assert_eq!(buffer.pop_line(), complete(b"next"));
    }

    #[test]
    fn a_complete_line_one_byte_over_the_limit_is_too_long() {
        let mut buffer = LineBuffer::new(4);
        buffer.extend(b"  x2345\n1234\r\n 12345");
        assert_eq!(buffer.pop_line(), Some(Line::TooLong { looks_like_json: false }));
        assert_eq!(buffer.pop_line(), complete(b"1234"));
        assert_eq!(buffer.pop_line(), None);
        assert_eq!(buffer.pop_rest(), Some(Line::TooLong { looks_like_json: false }));
        assert_eq!(buffer.pop_rest(), None);
    }

    #[test]
    fn an_over_long_line_cut_by_end_of_input_is_reported_once() {
        let mut buffer = LineBuffer::new(2);
        buffer.extend(b"   [1,2,3,4");
        assert_eq!(buffer.pop_line(), None);
        buffer.extend(b",5");
        assert_eq!(buffer.pop_line(), None);
        assert_eq!(buffer.pop_rest(), Some(Line::TooLong { looks_like_json: true }));
        assert_eq!(buffer.pop_rest(), None);
    }
}

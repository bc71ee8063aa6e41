//! Framing: bytes in, newline-delimited lines out.
//!
//! The transport fills a [`LineBuffer`] with whatever one read returned (a large chunk or a single
//! line) and takes complete lines out of it. Lines end at the byte `\n` only; a `\r` right before
//! it is dropped. Nothing here knows about JSON or Python, so it is tested with `cargo test`.

use memchr::memchr;

/// Bytes read but not yet handed out as lines.
#[derive(Debug, Default)]
pub(crate) struct LineBuffer {
    data: Vec<u8>,
    /// Everything before this index has been handed out.
    consumed: usize,
    /// `data[consumed..scanned]` is known to hold no `\n`, so a long line is searched only once.
    scanned: usize,
}

impl LineBuffer {
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

    /// The next complete line, without its `\n` (and a `\r` before it), if one is buffered.
    pub(crate) fn pop_line(&mut self) -> Option<&[u8]> {
        let newline = self.scanned + memchr(b'\n', &self.data[self.scanned..])?;
        let start = self.consumed;
        self.consumed = newline + 1;
        self.scanned = self.consumed;
        Some(strip_cr(&self.data[start..newline]))
    }

    /// At end of input: the last line if it had no `\n` (and was not empty).
    pub(crate) fn pop_rest(&mut self) -> Option<&[u8]> {
        let start = self.consumed;
        if start == self.data.len() {
            return None;
        }
        self.consumed = self.data.len();
        self.scanned = self.consumed;
        Some(strip_cr(&self.data[start..]))
    }
}

fn strip_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

#[cfg(test)]
mod tests {
    use super::LineBuffer;

    fn drain(buffer: &mut LineBuffer) -> Vec<Vec<u8>> {
        std::iter::from_fn(|| buffer.pop_line().map(<[u8]>::to_vec)).collect()
    }

    #[test]
    fn splits_on_newline_only() {
        let mut buffer = LineBuffer::default();
        buffer.extend("a\u{2028}b\nc\r\n\n".as_bytes());
        assert_eq!(drain(&mut buffer), vec!["a\u{2028}b".as_bytes().to_vec(), b"c".to_vec(), b"".to_vec()]);
        assert_eq!(buffer.pop_rest(), None);
    }

    #[test]
    fn joins_a_line_split_across_reads() {
        let mut buffer = LineBuffer::default();
        buffer.extend(b"first\nsec");
        assert_eq!(buffer.pop_line(), Some(&b"first"[..]));
        assert_eq!(buffer.pop_line(), None);
        buffer.extend(b"ond");
        assert_eq!(buffer.pop_line(), None);
        buffer.extend(b"\r\nthird");
        assert_eq!(buffer.pop_line(), Some(&b"second"[..]));
        assert_eq!(buffer.pop_line(), None);
        assert_eq!(buffer.pop_rest(), Some(&b"third"[..]));
        assert_eq!(buffer.pop_rest(), None);
    }

    #[test]
    fn keeps_only_the_partial_line_after_extend() {
        let mut buffer = LineBuffer::default();
        for _ in 0..1000 {
            buffer.extend(b"0123456789\n01234");
            assert_eq!(buffer.pop_line().map(<[u8]>::len), Some(10));
            buffer.extend(b"56789\n");
            assert_eq!(buffer.pop_line(), Some(&b"0123456789"[..]));
        }
        buffer.extend(b"");
        assert!(buffer.data.is_empty());
    }

    #[test]
    fn a_lone_carriage_return_at_the_end_is_dropped() {
        let mut buffer = LineBuffer::default();
        buffer.extend(b"x\r");
        assert_eq!(buffer.pop_line(), None);
        assert_eq!(buffer.pop_rest(), Some(&b"x"[..]));
    }
}

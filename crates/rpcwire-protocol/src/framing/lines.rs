//! Newline framing: [`LineBuffer`], the bytes read but not yet handed out as lines. Lines end at the
//! byte `\n` only; a `\r` right before it is dropped; a line longer than the limit is never held
//! whole, its bytes dropped as they arrive (and whether it began as JSON kept, for the answer).

use memchr::memchr;

use super::is_blank;

/// The bytes a line's `\n` is looked for in by [`find_newline`]'s own loop before `memchr` takes the rest.
const NEAR: usize = 128;

/// The index of the first `\n` in `bytes`. The buffer usually holds many lines and the next `\n` is
/// near: the first [`NEAR`] bytes are searched here, 16 at a time, and only a longer line goes to
/// `memchr`, whose dispatch (three calls deep) costs more than a short line's whole search.
#[inline]
fn find_newline(bytes: &[u8]) -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_set1_epi8};
        if bytes.len() < 16 {
            return bytes.iter().position(|&byte| byte == b'\n');
        }
        // The first `\n` among the 16 bytes at `at`.
        let newline_at = |at: usize| {
            debug_assert!(at + 16 <= bytes.len());
            // SAFETY: SSE2 is part of x86_64; the 16 bytes read lie inside `bytes` (`at + 16 <= len`).
            let mask = unsafe {
                let chunk = _mm_loadu_si128(bytes.as_ptr().add(at).cast());
                #[allow(clippy::cast_possible_wrap)] // the byte's bits, as the intrinsic takes them
                _mm_movemask_epi8(_mm_cmpeq_epi8(chunk, _mm_set1_epi8(b'\n' as i8)))
            };
            (mask != 0).then(|| at + mask.trailing_zeros() as usize)
        };
        let near = bytes.len().min(NEAR);
        let mut at = 0;
        while at + 16 <= near {
            if let Some(found) = newline_at(at) {
                return Some(found);
            }
            at += 16;
        }
        if bytes.len() <= NEAR {
            // The last 16 bytes, over some already searched (none of which is a `\n`).
            return newline_at(bytes.len() - 16);
        }
        memchr(b'\n', &bytes[at..]).map(|offset| at + offset)
    }
    #[cfg(not(target_arch = "x86_64"))]
    memchr(b'\n', bytes)
}

/// What the buffer hands out next.
#[derive(Debug, PartialEq, Eq)]
pub enum Line<'a> {
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
pub struct LineBuffer {
    pub(super) data: Vec<u8>,
    /// Everything before this index has been handed out.
    consumed: usize,
    /// `data[consumed..scanned]` is known to hold no `\n`, so a long line is searched only once.
    pub(super) scanned: usize,
    max_line: usize,
    /// Set while the rest of an over-long line is being dropped.
    discarding: bool,
    /// The first significant byte of the line being dropped, once one was seen.
    discarded_first: Option<u8>,
}

impl LineBuffer {
    pub fn new(max_line: usize) -> Self {
        Self { data: Vec::new(), consumed: 0, scanned: 0, max_line, discarding: false, discarded_first: None }
    }

    /// Append bytes that were just read.
    #[inline]
    pub fn extend(&mut self, bytes: &[u8]) {
        self.make_room(bytes.len());
        self.data.extend_from_slice(bytes);
    }

    /// Drop what was handed out and make room for `additional` more bytes after the rest.
    #[inline]
    pub(super) fn make_room(&mut self, additional: usize) {
        if self.consumed > 0 {
            // Only the partial last line is left: move it to the front instead of growing forever.
            self.data.drain(..self.consumed);
            self.scanned -= self.consumed;
            self.consumed = 0;
        }
        self.data.reserve(additional);
    }

    /// Whether a complete line (or the end of an over-long one) is buffered. Asked as bytes arrive, it
    /// searches each byte once and drops an over-long partial line as [`pop_line`](Self::pop_line) does.
    pub fn has_line(&mut self) -> bool {
        self.scan().is_some()
    }

    /// Whether a complete line that is not blank (or the end of an over-long one) is buffered; the
    /// complete blank lines before it are dropped, as a reader that skips them would drop them.
    pub(super) fn has_line_skipping_blank(&mut self) -> bool {
        while let Some(newline) = self.scan() {
            if self.discarding {
                return true; // the end of an over-long line
            }
            // A line over the limit is handed out (dropped), blank or not.
            let blank = matches!(self.checked(self.consumed, newline), Found::Line { start, end }
                if is_blank(&self.data[start..end]));
            if !blank {
                return true;
            }
            self.consumed = newline + 1;
            self.scanned = self.consumed;
        }
        false
    }

    /// The next line, if a complete one (or the end of an over-long one) is buffered.
    pub fn pop_line(&mut self) -> Option<Line<'_>> {
        let found = self.find_line()?;
        Some(self.line(found))
    }

    /// At end of input: the last line if it had no `\n` (and was not empty).
    pub fn pop_rest(&mut self) -> Option<Line<'_>> {
        let found = self.find_rest()?;
        Some(self.line(found))
    }

    /// As [`pop_line`](Self::pop_line), as positions: a caller that may drop the line (a blank one) and
    /// look again holds no borrow of the buffer.
    #[inline]
    pub(super) fn find_line(&mut self) -> Option<Found> {
        let newline = self.scan()?;
        let start = self.consumed;
        self.consumed = newline + 1;
        self.scanned = self.consumed;
        if self.discarding {
            return Some(self.end_discarding(start, newline));
        }
        Some(self.checked(start, newline))
    }

    /// The index of the next `\n`, if one is buffered. Every caller that looks for a line goes through
    /// here, so that the search goes on where the last one stopped (`scanned`) and a partial line past
    /// the limit is dropped as soon as it is seen: a long line costs one pass over its bytes and holds
    /// at most `max_line` of them, however often it is asked about as it arrives.
    #[inline]
    fn scan(&mut self) -> Option<usize> {
        if let Some(offset) = find_newline(&self.data[self.scanned..]) {
            return Some(self.scanned + offset);
        }
        self.scanned = self.data.len();
        // One byte of slack: a `\r` right before the `\n` is not part of the line.
        if self.discarding || self.scanned - self.consumed > self.max_line + 1 {
            self.discard_rest();
        }
        None
    }

    /// As [`pop_rest`](Self::pop_rest), as positions.
    pub(super) fn find_rest(&mut self) -> Option<Found> {
        let start = self.consumed;
        self.consumed = self.data.len();
        self.scanned = self.consumed;
        if self.discarding {
            return Some(self.end_discarding(start, self.data.len()));
        }
        (start < self.data.len()).then(|| self.checked(start, self.data.len()))
    }

    /// The line `found` names (positions from the last `find_*`, before any `extend`).
    #[inline]
    pub(super) fn line(&self, found: Found) -> Line<'_> {
        match found {
            Found::Line { start, end } => Line::Complete(&self.data[start..end]),
            Found::TooLong { looks_like_json } => Line::TooLong { looks_like_json },
        }
    }

    #[inline]
    fn checked(&self, start: usize, end: usize) -> Found {
        let end = if end > start && self.data[end - 1] == b'\r' { end - 1 } else { end };
        if end - start > self.max_line {
            too_long(first_significant(&self.data[start..end]))
        } else {
            Found::Line { start, end }
        }
    }

    fn discard_rest(&mut self) {
        self.discarding = true;
        self.discarded_first = self.discarded_first.or_else(|| first_significant(&self.data[self.consumed..]));
        self.consumed = self.data.len();
        self.scanned = self.consumed;
    }

    /// The over-long line being dropped ends with `data[start..end]`.
    fn end_discarding(&mut self, start: usize, end: usize) -> Found {
        self.discarding = false;
        too_long(self.discarded_first.take().or_else(|| first_significant(&self.data[start..end])))
    }
}

/// What [`LineBuffer`] found, as positions in its data.
#[derive(Debug, Clone, Copy)]
pub(super) enum Found {
    Line { start: usize, end: usize },
    TooLong { looks_like_json: bool },
}

fn too_long(first_significant: Option<u8>) -> Found {
    Found::TooLong { looks_like_json: opens_json(first_significant) }
}

/// The first byte that is not JSON whitespace.
pub fn first_significant(bytes: &[u8]) -> Option<u8> {
    bytes.iter().copied().find(|byte| !matches!(byte, b' ' | b'\t' | b'\r' | b'\n'))
}

/// Whether a dropped text whose first significant byte is this one began as a message would (an object
/// or an array): it is then answered as an invalid request rather than as a parse error.
pub fn opens_json(first_significant: Option<u8>) -> bool {
    matches!(first_significant, Some(b'{' | b'['))
}

#[cfg(test)]
mod tests {
    use super::*;

    const NO_LIMIT: usize = 1 << 40;

    #[test]
    fn find_newline_agrees_with_memchr_at_every_length_and_position() {
        for length in 0..(NEAR + 80) {
            let bytes = vec![b'a'; length];
            assert_eq!(find_newline(&bytes), None, "{length}");
            for position in 0..length {
                let mut bytes = bytes.clone();
                bytes[position] = b'\n';
                assert_eq!(find_newline(&bytes), Some(position), "{length} {position}");
                // A second `\n` after the first changes nothing.
                if position + 5 < length {
                    bytes[position + 5] = b'\n';
                    assert_eq!(find_newline(&bytes), Some(position), "{length} {position}");
                }
            }
        }
    }

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

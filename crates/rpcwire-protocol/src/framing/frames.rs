//! `Content-Length` framing (LSP's base protocol): [`FrameBuffer`], the bytes read but not yet handed
//! out as frames. A frame is a header block (`Content-Length: N`, any other header ignored, bounded by
//! [`HEADER_LIMIT`]) and N bytes of body; a frame that cannot be read is an error value
//! ([`FrameError`]) and the buffer resyncs at the next `Content-Length`.

use memchr::{memchr, memchr2};

use super::is_blank;

/// A header block (from its first header line to the blank line that ends it, both included) may
/// hold at most this many bytes; LSP's has one or two short headers.
pub const HEADER_LIMIT: usize = 8 * 1024;

/// Where a resync starts: the name of the header every frame has, matched in any case.
const RESYNC_NAME: &[u8] = b"content-length";

/// What the frame buffer hands out next.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    /// A whole body.
    Complete(&'a [u8]),
    /// A `Content-Length` over the limit: handed out as soon as the header block ends, its body is
    /// then dropped as it arrives (never held, never waited for before answering).
    TooLong { length: u64 },
    /// A frame that cannot be read: the buffer drops what follows up to the next `Content-Length`.
    Bad(FrameError),
}

/// Why a frame cannot be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameError {
    /// A header line that is not `Name: value` with a token for a name, a `Content-Length` that is
    /// not a decimal number (of at most 18 digits), or a second one with another value.
    BadHeader,
    /// A header block longer than [`HEADER_LIMIT`].
    HeadersTooLong,
    /// A header block that ended without `Content-Length`.
    MissingLength,
    /// End of input inside a frame (its headers or its body).
    Truncated,
}

impl FrameError {
    pub fn reason(self) -> &'static str {
        match self {
            Self::BadHeader => "a header line that is not 'Name: value' or a bad Content-Length",
            Self::HeadersTooLong => "a header block longer than 8192 bytes",
            Self::MissingLength => "a header block without Content-Length",
            Self::Truncated => "a frame cut short by the end of input",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Reading a header block: `length` once `Content-Length` was read, `started` once any header
    /// line was (blank lines before the first are skipped), `used` its bytes read so far.
    Headers { length: Option<u64>, started: bool, used: usize },
    /// Waiting for a body of this many bytes (at most the limit).
    Body(usize),
    /// Dropping this many more bytes of an over-long body.
    Skip(u64),
    /// Dropping bytes up to the next `Content-Length`, after a bad frame.
    Resync,
}

const NEW_BLOCK: State = State::Headers { length: None, started: false, used: 0 };

/// What is ready to be handed out, as positions (so that `has_frame` can find it without a borrow).
#[derive(Debug, Clone, Copy)]
enum Ready {
    Body { start: usize, end: usize },
    TooLong(u64),
    Bad(FrameError),
}

/// Bytes read but not yet handed out as frames (`Content-Length` framing).
///
/// Tolerant where peers differ: headers in any order and case, `Content-Type` (or any other header)
/// optional and ignored, lines ending in `\r\n` or `\n`, blank lines between frames skipped. Memory
/// is bounded by the body limit plus [`HEADER_LIMIT`], whatever arrives.
#[derive(Debug)]
pub struct FrameBuffer {
    pub(super) data: Vec<u8>,
    /// Everything before this index has been handed out or dropped.
    consumed: usize,
    /// `data[consumed..scanned]` is known to hold no `\n` (while `scanned > consumed`), so that a
    /// header line arriving a few bytes at a time is searched once.
    scanned: usize,
    max_body: usize,
    state: State,
    ready: Option<Ready>,
}

impl FrameBuffer {
    pub fn new(max_body: usize) -> Self {
        Self { data: Vec::new(), consumed: 0, scanned: 0, max_body, state: NEW_BLOCK, ready: None }
    }

    /// Append bytes that were just read.
    pub fn extend(&mut self, bytes: &[u8]) {
        self.make_room(bytes.len());
        self.data.extend_from_slice(bytes);
    }

    /// Drop what was handed out or dropped, and make room for `additional` more bytes after the rest.
    fn make_room(&mut self, additional: usize) {
        self.drop_consumed();
        if let State::Body(length) = self.state {
            // The rest of a body whose length is known: room for all of it at once (or for this
            // read, if more), rather than doubling (and copying) the buffer as its pieces arrive.
            let rest = (self.consumed + length).saturating_sub(self.data.len());
            self.data.reserve_exact(rest.max(additional));
        } else {
            self.data.reserve(additional);
        }
    }

    /// Drop what was handed out or dropped, and make room for a read straight into the buffer: the
    /// room offered, which is `most` bytes, or with `exact` the rest of a body begun (see below).
    ///
    /// Every read is offered the full `most` (a buffered stream handed less would keep the rest in
    /// its own buffer, where a `poll` of its descriptor does not see it). Once a body's length is
    /// known, its rest and one such read past it are reserved at once: the read that brings its last
    /// piece then never reallocates it (which could move, and so copy, the whole body to a larger
    /// block while the old one is still held), and the room past the body is touched only by what
    /// follows it.
    ///
    /// `exact`: the stream keeps nothing of its own (a `BytesIO`, a `FileIO`), so a body's rest is
    /// asked for exactly, as `BufferedReader.read(n)` does: the read ends where the body does and
    /// the next one starts at the next frame's headers, so that no part of a frame is read behind a
    /// body and then moved to the buffer's front (a copy of up to a whole read for every frame).
    pub(super) fn read_room(&mut self, most: usize, exact: bool) -> usize {
        self.drop_consumed();
        match self.state {
            State::Body(length) if self.consumed + length > self.data.len() => {
                let rest = self.consumed + length - self.data.len();
                if exact {
                    self.data.reserve_exact(rest);
                    return rest;
                }
                self.data.reserve_exact(rest.saturating_add(most));
            }
            _ => self.data.reserve(most),
        }
        most
    }

    /// Drop what was handed out or dropped (a body found by `has_frame` and not yet handed out is
    /// kept), moving the rest to the front.
    ///
    /// While a body is awaited, a header block (at most [`HEADER_LIMIT`] bytes) before it is kept
    /// rather than the body's start moved over it: a copy of up to a read's worth of bytes to drop a
    /// few dozen. It goes with the body once that is handed out.
    fn drop_consumed(&mut self) {
        let keep = match self.ready {
            Some(Ready::Body { start, .. }) => start,
            _ => self.consumed,
        };
        if matches!(self.state, State::Body(_)) && keep <= HEADER_LIMIT {
            return;
        }
        if keep > 0 {
            self.data.drain(..keep);
            self.consumed -= keep;
            self.scanned = self.scanned.saturating_sub(keep);
            if let Some(Ready::Body { start, end }) = &mut self.ready {
                *start -= keep;
                *end -= keep;
            }
        }
    }

    /// Whether `pop_frame(at_eof)` returns a frame without more input.
    pub fn has_frame(&mut self, at_eof: bool) -> bool {
        if self.ready.is_none() {
            self.ready = self.advance(at_eof);
        }
        self.ready.is_some()
    }

    /// The next frame, if one is buffered; `at_eof`: no more input will come (a frame cut short is
    /// then [`FrameError::Truncated`], once).
    pub fn pop_frame(&mut self, at_eof: bool) -> Option<Frame<'_>> {
        let ready = match self.ready.take() {
            Some(ready) => ready,
            None => self.advance(at_eof)?,
        };
        Some(match ready {
            Ready::Body { start, end } => Frame::Complete(&self.data[start..end]),
            Ready::TooLong(length) => Frame::TooLong { length },
            Ready::Bad(error) => Frame::Bad(error),
        })
    }

    /// Move through the buffered bytes until a frame is ready or more input is needed.
    fn advance(&mut self, at_eof: bool) -> Option<Ready> {
        loop {
            let available = self.data.len() - self.consumed;
            match self.state {
                State::Headers { length, started, used } => {
                    let rest = &self.data[self.consumed..];
                    let from = self.scanned.saturating_sub(self.consumed);
                    let Some(offset) = memchr(b'\n', &rest[from.min(rest.len())..]).map(|found| found + from) else {
                        self.scanned = self.data.len();
                        if used + rest.len() > HEADER_LIMIT {
                            return Some(
                                self.fail_at(self.consumed + (HEADER_LIMIT - used), FrameError::HeadersTooLong),
                            );
                        }
                        if !at_eof {
                            return None;
                        }
                        let clean = !started && is_blank(rest);
                        self.consumed = self.data.len();
                        self.state = State::Resync;
                        return (!clean).then_some(Ready::Bad(FrameError::Truncated));
                    };
                    let next = self.consumed + offset + 1;
                    if used + offset + 1 > HEADER_LIMIT {
                        return Some(self.fail_at(self.consumed + (HEADER_LIMIT - used), FrameError::HeadersTooLong));
                    }
                    let line = &self.data[self.consumed..next - 1];
                    if is_blank(line) {
                        self.consumed = next;
                        if !started {
                            self.state = NEW_BLOCK;
                            continue;
                        }
                        match length {
                            None => return Some(self.fail_at(next, FrameError::MissingLength)),
                            Some(length) => match usize::try_from(length) {
                                Ok(length) if length <= self.max_body => self.state = State::Body(length),
                                _ => {
                                    self.state = State::Skip(length);
                                    return Some(Ready::TooLong(length));
                                }
                            },
                        }
                        continue;
                    }
                    let length = match header_length(line) {
                        Ok(None) => length,
                        Ok(Some(found)) if length.is_none_or(|seen| seen == found) => Some(found),
                        // Not a header, or a second length that disagrees.
                        _ => return Some(self.fail_at(next, FrameError::BadHeader)),
                    };
                    self.consumed = next;
                    self.state = State::Headers { length, started: true, used: used + offset + 1 };
                }
                State::Body(length) => {
                    if available >= length {
                        let start = self.consumed;
                        self.consumed += length;
                        self.state = NEW_BLOCK;
                        return Some(Ready::Body { start, end: self.consumed });
                    }
                    if !at_eof {
                        return None;
                    }
                    return Some(self.fail_at(self.data.len(), FrameError::Truncated));
                }
                State::Skip(left) => {
                    let dropped = u64::try_from(available).unwrap_or(u64::MAX).min(left);
                    // `dropped <= available`, a `usize`.
                    self.consumed += usize::try_from(dropped).unwrap_or(available);
                    if dropped == left {
                        self.state = NEW_BLOCK;
                        continue;
                    }
                    self.state = State::Skip(left - dropped);
                    return None;
                }
                State::Resync => {
                    if let Some(found) = find_resync(&self.data[self.consumed..]) {
                        self.consumed += found;
                        self.state = NEW_BLOCK;
                        continue;
                    }
                    // Keep what could be the start of the name, cut by the end of this read.
                    let keep = if at_eof { 0 } else { RESYNC_NAME.len() - 1 };
                    self.consumed = self.consumed.max(self.data.len().saturating_sub(keep));
                    return None;
                }
            }
        }
    }

    /// The bytes held (the fuzz target checks the bound).
    pub fn held(&self) -> usize {
        self.data.len()
    }

    /// A bad frame: resync from `position`.
    fn fail_at(&mut self, position: usize, error: FrameError) -> Ready {
        self.consumed = position;
        self.state = State::Resync;
        Ready::Bad(error)
    }
}

/// The offset of the next `content-length`, in any case.
fn find_resync(bytes: &[u8]) -> Option<usize> {
    let mut from = 0;
    while let Some(offset) = memchr2(b'c', b'C', &bytes[from..]) {
        let at = from + offset;
        let candidate = &bytes[at..];
        if candidate.len() < RESYNC_NAME.len() {
            return None;
        }
        if candidate[..RESYNC_NAME.len()].eq_ignore_ascii_case(RESYNC_NAME) {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

/// One header line (without its `\n`): `Ok(Some(n))` for `Content-Length: n`, `Ok(None)` for any
/// other header, `Err` for a line that is not a header or a length that is not a number.
fn header_length(line: &[u8]) -> Result<Option<u64>, ()> {
    let colon = memchr(b':', line).ok_or(())?;
    let (name, value) = (&line[..colon], &line[colon + 1..]);
    if name.is_empty() || !name.iter().all(|&byte| is_token_byte(byte)) {
        return Err(());
    }
    if !name.eq_ignore_ascii_case(RESYNC_NAME) {
        return Ok(None);
    }
    let value = value.trim_ascii();
    if value.is_empty() || value.len() > 18 || !value.iter().all(u8::is_ascii_digit) {
        return Err(());
    }
    Ok(Some(value.iter().fold(0, |number, digit| number * 10 + u64::from(digit - b'0'))))
}

/// RFC 9110's `tchar`.
fn is_token_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(stream: &[u8], max_body: usize, piece: usize) -> Vec<String> {
        let mut buffer = FrameBuffer::new(max_body);
        let mut got = Vec::new();
        let mut take = |buffer: &mut FrameBuffer, at_eof: bool| {
            while let Some(frame) = buffer.pop_frame(at_eof) {
                got.push(match frame {
                    Frame::Complete(body) => String::from_utf8_lossy(body).into_owned(),
                    Frame::TooLong { length } => format!("<too long {length}>"),
                    Frame::Bad(error) => format!("<{error:?}>"),
                });
            }
        };
        for chunk in stream.chunks(piece.max(1)) {
            buffer.extend(chunk);
            take(&mut buffer, false);
            let most = max_body + HEADER_LIMIT + piece;
            assert!(buffer.held() <= most, "{} bytes held", buffer.held());
        }
        take(&mut buffer, true);
        got
    }

    fn all_pieces(stream: &[u8], max_body: usize) -> Vec<String> {
        let whole = frames(stream, max_body, stream.len());
        for piece in [1, 2, 3, 7, 13] {
            assert_eq!(frames(stream, max_body, piece), whole, "read {piece} bytes at a time");
        }
        whole
    }

    #[test]
    fn reads_frames_with_headers_in_any_order_and_case() {
        let stream = b"Content-Length: 2\r\n\r\n{}content-type: x\r\nCONTENT-LENGTH:3\r\n\r\n[1]\
            \r\n\nContent-Length:  1 \n\n7Content-Length: 0\r\nX-Other: y\r\n\r\n";
        assert_eq!(all_pieces(stream, 100), ["{}", "[1]", "7", ""]);
    }

    #[test]
    fn a_bad_header_is_answered_and_the_next_frame_is_found() {
        let stream = b"{\"jsonrpc\":\"2.0\"}\nContent-Length: 2\r\n\r\n{}Content-Length: x1\r\n\r\n{}\
            content-length: 2\r\nContent-Length: 3\r\n\r\n{}!Content-Length: 1\r\n\r\n1";
        assert_eq!(all_pieces(stream, 100), ["<BadHeader>", "{}", "<BadHeader>", "<BadHeader>", "1"]);
    }

    #[test]
    fn a_missing_or_over_long_length_is_answered_and_skipped() {
        let stream =
            b"Content-Type: a\r\n\r\n{\"x\":1}Content-Length: 12\r\n\r\n{\"a\":123456}Content-Length: 2\r\n\r\n{}";
        assert_eq!(all_pieces(stream, 10), ["<MissingLength>", "<too long 12>", "{}"]);
        // The over-long frame is answered as soon as its headers end, before its body arrives.
        let mut buffer = FrameBuffer::new(10);
        buffer.extend(b"Content-Length: 999999999999999999\r\n\r\n");
        assert_eq!(buffer.pop_frame(false), Some(Frame::TooLong { length: 999_999_999_999_999_999 }));
        for _ in 0..100 {
            buffer.extend(&[b'x'; 1000]);
            assert_eq!(buffer.pop_frame(false), None);
            assert!(buffer.held() <= 1000);
        }
    }

    #[test]
    fn headers_are_bounded() {
        let mut stream = b"X-Long: ".to_vec();
        stream.extend(std::iter::repeat_n(b'a', 20_000));
        stream.extend(b"\r\n\r\nContent-Length: 1\r\n\r\n1");
        assert_eq!(all_pieces(&stream, 10), ["<HeadersTooLong>", "1"]);
        let endless = b"{\"jsonrpc\":\"2.0\",\"method\":\"m\"}".repeat(1000);
        assert_eq!(all_pieces(&endless, 10), ["<HeadersTooLong>"]);
    }

    #[test]
    fn end_of_input_inside_a_frame_is_reported_once() {
        assert_eq!(all_pieces(b"Content-Length: 5\r\n\r\n{}", 10), ["<Truncated>"]);
        assert_eq!(all_pieces(b"Content-Length: 5\r\n", 10), ["<Truncated>"]);
        assert_eq!(all_pieces(b"Content-Len", 10), ["<Truncated>"]);
        assert_eq!(all_pieces(b"\r\n \r\n", 10), Vec::<String>::new());
        assert_eq!(all_pieces(b"Content-Length: 50\r\n\r\n{}", 10), ["<too long 50>"]);
        assert_eq!(all_pieces(b"junk\n{}", 10), ["<BadHeader>"]);
        assert_eq!(FrameError::Truncated.reason(), "a frame cut short by the end of input");
    }

    #[test]
    fn has_frame_agrees_with_pop_frame_and_survives_extend() {
        let mut buffer = FrameBuffer::new(10);
        buffer.extend(b"Content-Length: 2\r\n\r\n{}Conte");
        assert!(buffer.has_frame(false));
        buffer.extend(b"nt-Length: 1\r\n\r\n1");
        assert_eq!(buffer.pop_frame(false), Some(Frame::Complete(b"{}")));
        assert!(buffer.has_frame(false));
        assert_eq!(buffer.pop_frame(false), Some(Frame::Complete(b"1")));
        assert!(!buffer.has_frame(false));
        assert!(!buffer.has_frame(true));
    }
}

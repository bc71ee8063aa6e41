//! Framing: bytes in, messages out, by newline ([`LineBuffer`]) or by `Content-Length` header
//! ([`FrameBuffer`], LSP's base protocol).
//!
//! A [`Decoder`] (one per stream, of either framing; sans-I/O, in the style of h11) is fed whatever one
//! read returned (a large chunk or a single line) and hands out complete messages, or what it dropped
//! ([`Dropped`]). Lines end at the byte `\n` only; a `\r` right before it is dropped. Frames are a
//! header block (`Content-Length: N`, any other header ignored) and N bytes of body; a frame that
//! cannot be read is an error value and the buffer resyncs at the next `Content-Length`. [`Framing`]
//! also frames what is written. Nothing here knows about JSON or Python, so it is tested with
//! `cargo test` and fuzzed (`fuzz/fuzz_targets/framing.rs`). The transport's reader and
//! `rpcwire._rpcwire.FrameDecoder` are both a `Decoder`.

use std::mem::MaybeUninit;

use memchr::{memchr, memchr2};

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
    fn make_room(&mut self, additional: usize) {
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
    fn has_line_skipping_blank(&mut self) -> bool {
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
    fn find_line(&mut self) -> Option<Found> {
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
        if let Some(offset) = memchr(b'\n', &self.data[self.scanned..]) {
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
    fn find_rest(&mut self) -> Option<Found> {
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
    fn line(&self, found: Found) -> Line<'_> {
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
enum Found {
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
    data: Vec<u8>,
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

    /// Drop what was handed out or dropped, and make room for a read of `most` bytes straight into
    /// the buffer.
    ///
    /// Every read is offered the full `most` (a buffered stream handed less would keep the rest in
    /// its own buffer, where a `poll` of its descriptor does not see it). Once a body's length is
    /// known, its rest and one such read past it are reserved at once: the read that brings its last
    /// piece then never reallocates it (which could move, and so copy, the whole body to a larger
    /// block while the old one is still held), and the room past the body is touched only by what
    /// follows it.
    fn read_room(&mut self, most: usize) {
        self.drop_consumed();
        match self.state {
            State::Body(length) if self.consumed + length > self.data.len() => {
                let rest = self.consumed + length - self.data.len();
                self.data.reserve_exact(rest.saturating_add(most));
            }
            _ => self.data.reserve(most),
        }
    }

    /// Drop what was handed out or dropped (a body found by `has_frame` and not yet handed out is
    /// kept), moving the rest to the front.
    fn drop_consumed(&mut self) {
        let keep = match self.ready {
            Some(Ready::Body { start, .. }) => start,
            _ => self.consumed,
        };
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

/// How messages are delimited on a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// One message per line (`\n`).
    Newline,
    /// `Content-Length: N\r\n\r\n` and N bytes of body (LSP's base protocol).
    ContentLength,
}

impl Framing {
    /// The framing a name (`"newline"`, `"content-length"`) stands for.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "newline" => Some(Self::Newline),
            "content-length" => Some(Self::ContentLength),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Newline => "newline",
            Self::ContentLength => "content-length",
        }
    }

    /// Turn the message in `body` into its frame, in place: `\n` after it, or the header before it.
    #[inline]
    pub fn frame(self, body: &mut Vec<u8>) {
        match self {
            Self::Newline => body.push(b'\n'),
            Self::ContentLength => {
                body.splice(0..0, content_length_header(body.len()));
            }
        }
    }

    /// Append the frame of `message` to `out`.
    pub fn frame_into(self, message: &[u8], out: &mut Vec<u8>) {
        match self {
            Self::Newline => {
                out.extend_from_slice(message);
                out.push(b'\n');
            }
            Self::ContentLength => {
                out.extend_from_slice(&content_length_header(message.len()));
                out.extend_from_slice(message);
            }
        }
    }
}

/// `Content-Length: N\r\n\r\n`.
fn content_length_header(length: usize) -> Vec<u8> {
    let mut digits = itoa::Buffer::new();
    [b"Content-Length: ", digits.format(length).as_bytes(), b"\r\n\r\n"].concat()
}

/// A message the framing dropped: the reader answers it (a server) or reports it (a client).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dropped {
    /// A line longer than the limit, already discarded (see [`Line::TooLong`]).
    TooLong { looks_like_json: bool },
    /// A `Content-Length` over the limit; its body is dropped as it arrives.
    Oversized { length: u64 },
    /// A frame that cannot be read (see [`FrameError`]).
    BadFrame(FrameError),
}

impl Dropped {
    /// Why it was dropped, in the words the log and a client's error use.
    pub fn reason(self, max_message_bytes: usize) -> String {
        match self {
            Self::TooLong { .. } => format!("a line longer than max_message_bytes ({max_message_bytes})"),
            Self::Oversized { length } => {
                format!("a Content-Length ({length}) over max_message_bytes ({max_message_bytes})")
            }
            Self::BadFrame(error) => error.reason().to_owned(),
        }
    }
}

/// What a [`Decoder`] hands out.
#[derive(Debug, PartialEq, Eq)]
pub enum Decoded<'a> {
    /// A message: a line without its `\n` (and a `\r` before it), or a frame's body.
    Message(&'a [u8]),
    Dropped(Dropped),
}

/// The buffer of one framing.
#[derive(Debug)]
enum Buffer {
    Lines(LineBuffer),
    Frames(FrameBuffer),
}

/// Framing without I/O, in the style of h11: bytes in ([`feed`](Self::feed)), messages out
/// ([`next`](Self::next)). The transport's reader fills one from its stream; `rpcwire._rpcwire.FrameDecoder`
/// hands one to Python readers (the asyncio client, the MCP reader, `rpcwire.lsp`, `--listen`).
///
/// One `match` per feed and per message, the newline path first.
#[derive(Debug)]
pub struct Decoder {
    buffer: Buffer,
    /// No more input will come: a last line without `\n` is a message, an unfinished frame is dropped.
    closed: bool,
}

impl Decoder {
    pub fn new(framing: Framing, max_message_bytes: usize) -> Self {
        let buffer = match framing {
            Framing::Newline => Buffer::Lines(LineBuffer::new(max_message_bytes)),
            Framing::ContentLength => Buffer::Frames(FrameBuffer::new(max_message_bytes)),
        };
        Self { buffer, closed: false }
    }

    /// Add bytes read from the stream.
    #[inline]
    pub fn feed(&mut self, bytes: &[u8]) {
        match &mut self.buffer {
            Buffer::Lines(buffer) => buffer.extend(bytes),
            Buffer::Frames(buffer) => buffer.extend(bytes),
        }
    }

    /// Add bytes read straight into the buffer, without a copy: `read` writes up to `most` bytes at
    /// the front of the room it is given and returns how many it wrote (counts above `most` are
    /// taken as `most`); nothing is added if it fails.
    ///
    /// # Safety
    /// `read` must have written (initialised) every byte of the count it returns: the buffer's room
    /// may hold uninitialised memory, which it hands out once counted.
    pub unsafe fn feed_with<E>(
        &mut self,
        most: usize,
        read: impl FnOnce(&mut [MaybeUninit<u8>]) -> Result<usize, E>,
    ) -> Result<usize, E> {
        let data = match &mut self.buffer {
            Buffer::Lines(buffer) => {
                buffer.make_room(most);
                &mut buffer.data
            }
            Buffer::Frames(buffer) => {
                buffer.read_room(most);
                &mut buffer.data
            }
        };
        let count = read(&mut data.spare_capacity_mut()[..most])?.min(most);
        // SAFETY: `make_room`/`read_room` reserved `most` bytes beyond the length, and the caller
        // promises that `read` initialised the first `count` of them.
        unsafe { data.set_len(data.len() + count) };
        Ok(count)
    }

    /// The end of input.
    pub fn close(&mut self) {
        self.closed = true;
    }

    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Whether [`next`](Self::next) with the same `skip_blank` hands something out (or ends) without more
    /// input: a whole line, a frame's outcome, or the end of input. `skip_blank` drops the complete blank
    /// lines at the front, as `next` would.
    #[inline]
    pub fn has_message(&mut self, skip_blank: bool) -> bool {
        self.closed
            || match &mut self.buffer {
                Buffer::Lines(buffer) if skip_blank => buffer.has_line_skipping_blank(),
                Buffer::Lines(buffer) => buffer.has_line(),
                Buffer::Frames(buffer) => buffer.has_frame(false),
            }
    }

    /// The next message or dropped message; `None` when more input is needed (or, once closed, when
    /// nothing is left). `skip_blank`: lines of spaces, tabs and `\r` only are skipped (a frame's body
    /// never is: its header said a message was there), as every reader of messages skips them;
    /// `read_line()` alone sees them.
    #[inline]
    pub fn next(&mut self, skip_blank: bool) -> Option<Decoded<'_>> {
        let closed = self.closed;
        match &mut self.buffer {
            Buffer::Lines(buffer) => {
                let found = loop {
                    let found = match buffer.find_line() {
                        None if closed => buffer.find_rest()?,
                        found => found?,
                    };
                    match found {
                        Found::Line { start, end } if skip_blank && is_blank(&buffer.data[start..end]) => {}
                        found => break found,
                    }
                };
                Some(match buffer.line(found) {
                    Line::Complete(line) => Decoded::Message(line),
                    Line::TooLong { looks_like_json } => Decoded::Dropped(Dropped::TooLong { looks_like_json }),
                })
            }
            Buffer::Frames(buffer) => Some(match buffer.pop_frame(closed)? {
                Frame::Complete(body) => Decoded::Message(body),
                Frame::TooLong { length } => Decoded::Dropped(Dropped::Oversized { length }),
                Frame::Bad(error) => Decoded::Dropped(Dropped::BadFrame(error)),
            }),
        }
    }
}

/// Only spaces, tabs and `\r`.
fn is_blank(bytes: &[u8]) -> bool {
    bytes.iter().all(|byte| matches!(byte, b' ' | b'\t' | b'\r'))
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
    use super::{Decoded, Decoder, Dropped, Frame, FrameBuffer, FrameError, Framing, Line, LineBuffer, HEADER_LIMIT};

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
    fn asking_for_a_line_as_it_arrives_drops_it_past_the_limit_and_searches_each_byte_once() {
        // As a reader that asks before every read (`_has_buffered_message`, then `_read_available`).
        for skip_blank in [false, true] {
            let mut decoder = Decoder::new(Framing::Newline, 8);
            decoder.feed(b"{\"a\":");
            for _ in 0..1000 {
                assert!(!decoder.has_message(skip_blank));
                decoder.feed(b"0123456789");
                let super::Buffer::Lines(buffer) = &decoder.buffer else { unreachable!() };
                assert!(buffer.data.len() <= 30, "the over-long line is held: {} bytes", buffer.data.len());
            }
            decoder.feed(b"\nnext\n");
            assert!(decoder.has_message(skip_blank));
            assert_eq!(decoder.next(skip_blank), Some(Decoded::Dropped(Dropped::TooLong { looks_like_json: true })));
            assert_eq!(decoder.next(skip_blank), Some(Decoded::Message(b"next")));
        }
        // A long line within the limit: each look goes on where the last one stopped.
        let mut buffer = LineBuffer::new(NO_LIMIT);
        for _ in 0..1000 {
            buffer.extend(b"0123456789");
            assert!(!buffer.has_line());
            assert_eq!(buffer.scanned, buffer.data.len(), "the next look would search the line again");
        }
        buffer.extend(b"\n");
        assert!(buffer.has_line());
        assert_eq!(
            buffer.pop_line().map(|line| matches!(line, Line::Complete(line) if line.len() == 10_000)),
            Some(true)
        );
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

    fn decoded(decoder: &mut Decoder, skip_blank: bool) -> Vec<String> {
        std::iter::from_fn(|| {
            Some(match decoder.next(skip_blank)? {
                Decoded::Message(message) => String::from_utf8_lossy(message).into_owned(),
                Decoded::Dropped(dropped) => format!("<{dropped:?}>"),
            })
        })
        .collect()
    }

    #[test]
    fn the_decoder_skips_blank_lines_and_ends_with_the_last_line() {
        let mut decoder = Decoder::new(Framing::Newline, 4);
        decoder.feed(b"a\n \t\r\n\nb\r\n\n  ");
        assert_eq!(decoded(&mut decoder, true), ["a", "b"]);
        decoder.feed(b"{12345");
        assert!(!decoder.has_message(true));
        decoder.close();
        assert!(decoder.has_message(true));
        assert_eq!(decoded(&mut decoder, true), ["<TooLong { looks_like_json: true }>"]);
        assert_eq!(decoder.next(true), None);

        let mut decoder = Decoder::new(Framing::Newline, 4);
        decoder.feed(b"a\n\n  \nb");
        assert_eq!(decoded(&mut decoder, false), ["a", "", "  "]);
        decoder.close();
        assert_eq!(decoded(&mut decoder, false), ["b"]);
    }

    #[test]
    fn has_message_skipping_blank_lines_drops_them_and_agrees_with_next() {
        let mut decoder = Decoder::new(Framing::Newline, 4);
        decoder.feed(b"\n \r\n");
        assert!(!decoder.has_message(true));
        decoder.feed(b"      \n");
        assert!(decoder.has_message(true), "a blank line over the limit is dropped, not skipped");
        assert_eq!(decoder.next(true), Some(Decoded::Dropped(Dropped::TooLong { looks_like_json: false })));
        decoder.feed(b"\n\nx\n");
        assert!(decoder.has_message(true));
        assert_eq!(decoder.next(true), Some(Decoded::Message(b"x")));
        assert!(!decoder.has_message(true));
    }

    #[test]
    fn the_decoder_reads_frames_and_hands_out_empty_bodies() {
        let mut decoder = Decoder::new(Framing::ContentLength, 4);
        decoder.feed(b"Content-Length: 0\r\n\r\n\r\nContent-Length: 9\r\n\r\n1234");
        assert_eq!(decoded(&mut decoder, true), ["", "<Oversized { length: 9 }>"]);
        decoder.feed(b"56789Content-Length: 2\r\n\r\n{}Content-Length: 3");
        assert_eq!(decoded(&mut decoder, true), ["{}"]);
        decoder.close();
        assert_eq!(decoded(&mut decoder, true), ["<BadFrame(Truncated)>"]);
        assert_eq!(Dropped::Oversized { length: 9 }.reason(4), "a Content-Length (9) over max_message_bytes (4)");
    }

    /// Read `input` into a new `Content-Length` decoder as the transport's direct reads do (rooms of
    /// up to 64 KiB): the lengths of the bodies handed out, the room each read was given, and the
    /// buffer's capacity after each read.
    fn read_directly(mut input: &[u8]) -> (Vec<usize>, Vec<usize>, Vec<usize>) {
        let mut decoder = Decoder::new(Framing::ContentLength, NO_LIMIT);
        let (mut bodies, mut rooms, mut capacities) = (Vec::new(), Vec::new(), Vec::new());
        loop {
            while let Some(found) = decoder.next(true) {
                match found {
                    Decoded::Message(message) => bodies.push(message.len()),
                    Decoded::Dropped(dropped) => panic!("dropped {dropped:?}"),
                }
            }
            let read = |room: &mut [std::mem::MaybeUninit<u8>]| -> Result<usize, ()> {
                rooms.push(room.len());
                let count = room.len().min(input.len());
                for (slot, &byte) in room.iter_mut().zip(&input[..count]) {
                    slot.write(byte);
                }
                input = &input[count..];
                Ok(count)
            };
            // SAFETY: `read` initialises every byte it counts.
            let count = unsafe { decoder.feed_with(64 * 1024, read) }.unwrap();
            if let super::Buffer::Frames(buffer) = &decoder.buffer {
                capacities.push(buffer.data.capacity());
            }
            if count == 0 {
                decoder.close();
                assert_eq!(decoder.next(true), None);
                return (bodies, rooms, capacities);
            }
        }
    }

    #[test]
    fn a_large_frame_read_directly_is_reserved_once() {
        let body = vec![b'7'; 300_000];
        let header = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
        let input = [header.as_slice(), &body, b"Content-Length: 2\r\n\r\n{}"].concat();
        let (bodies, rooms, capacities) = read_directly(&input);
        assert_eq!(bodies, [body.len(), 2]);
        assert!(rooms.iter().all(|&room| room == 64 * 1024), "every read is offered a full room: {rooms:?}");
        // The first read's room, then the body's rest and one read past it, reserved once: the read
        // that brings the body's last piece does not grow (and move) it.
        let mut sizes = capacities.clone();
        sizes.dedup();
        assert_eq!(sizes.len(), 2, "{capacities:?}");
        assert!(sizes[1] <= header.len() + body.len() + 64 * 1024, "{capacities:?}");
    }

    #[test]
    fn small_frames_read_directly_share_reads() {
        let frame = b"Content-Length: 13\r\n\r\n{\"id\":123456}";
        let input = frame.repeat(10_000);
        let (bodies, rooms, capacities) = read_directly(&input);
        assert_eq!(bodies, vec![13; 10_000]);
        // Full reads: a frame cut by a read's end costs no extra read once the buffer has room.
        assert!(rooms.len() <= 2 + input.len() / (32 * 1024), "{} reads", rooms.len());
        assert!(capacities.iter().all(|&capacity| capacity <= 4 * 64 * 1024), "{capacities:?}");
    }

    #[test]
    fn frames_are_written_as_read() {
        let mut out = Vec::new();
        Framing::ContentLength.frame_into(b"[1,\n2]", &mut out);
        Framing::Newline.frame_into(b"x", &mut out);
        let mut body = b"{}".to_vec();
        Framing::ContentLength.frame(&mut body);
        assert_eq!(out, b"Content-Length: 6\r\n\r\n[1,\n2]x\n");
        assert_eq!(body, b"Content-Length: 2\r\n\r\n{}");
        assert_eq!(Framing::from_name("content-length").map(Framing::name), Some("content-length"));
        assert_eq!(Framing::from_name("lines"), None);
    }
}

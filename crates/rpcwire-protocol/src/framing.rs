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

mod frames;
mod lines;

pub use frames::{Frame, FrameBuffer, FrameError, HEADER_LIMIT};
use lines::Found;
pub use lines::{first_significant, opens_json, Line, LineBuffer};

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

#[cfg(test)]
mod tests {
    use super::*;

    const NO_LIMIT: usize = 1 << 40;

    #[test]
    fn asking_for_a_line_as_it_arrives_drops_it_past_the_limit_and_searches_each_byte_once() {
        // As a reader that asks before every read (`_has_buffered_message`, then `_read_available`).
        for skip_blank in [false, true] {
            let mut decoder = Decoder::new(Framing::Newline, 8);
            decoder.feed(b"{\"a\":");
            for _ in 0..1000 {
                assert!(!decoder.has_message(skip_blank));
                decoder.feed(b"0123456789");
                let Buffer::Lines(buffer) = &decoder.buffer else { panic!("a newline decoder holds lines") };
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
            if let Buffer::Frames(buffer) = &decoder.buffer {
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

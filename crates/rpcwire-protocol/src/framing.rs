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
//! `rpcwire._rpcwire.FrameDecoder` are both a `Decoder`; [`message_text`] checks a large body as UTF-8.

use std::mem::MaybeUninit;

mod frames;
mod lines;
mod text;

pub use frames::{Frame, FrameBuffer, FrameError, HEADER_LIMIT};
use lines::Found;
pub use lines::{first_significant, opens_json, Line, LineBuffer};
pub use text::message_text;

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

    /// Add bytes read straight into the buffer, without a copy: `read` writes up to the length of the
    /// room it is given at its front and returns how many it wrote (counts above it are taken as
    /// it); nothing is added if it fails. The room is `most` bytes, or with `exact` (a stream that
    /// keeps nothing of its own: a `BytesIO`, a `FileIO`) the rest of a frame's body begun, so that
    /// the read ends where the body does (see `FrameBuffer::read_room`).
    ///
    /// # Safety
    /// `read` must have written (initialised) every byte of the count it returns: the buffer's room
    /// may hold uninitialised memory, which it hands out once counted.
    pub unsafe fn feed_with<E>(
        &mut self,
        most: usize,
        exact: bool,
        read: impl FnOnce(&mut [MaybeUninit<u8>]) -> Result<usize, E>,
    ) -> Result<usize, E> {
        let (data, room) = match &mut self.buffer {
            Buffer::Lines(buffer) => {
                buffer.make_room(most);
                (&mut buffer.data, most)
            }
            Buffer::Frames(buffer) => {
                let room = buffer.read_room(most, exact);
                (&mut buffer.data, room)
            }
        };
        let count = read(&mut data.spare_capacity_mut()[..room])?.min(room);
        // SAFETY: `make_room`/`read_room` reserved `room` bytes beyond the length, and the caller
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

    /// What [`read_directly`] saw.
    #[derive(Default)]
    struct Reads {
        /// The length of each body handed out, and the address of its first byte.
        bodies: Vec<usize>,
        body_addresses: Vec<usize>,
        /// The room each read was given, and where its first byte went: its offset in the input,
        /// and its address.
        rooms: Vec<usize>,
        read_at: Vec<(usize, usize)>,
        /// The buffer's capacity after each read.
        capacities: Vec<usize>,
    }

    /// Read `input` into a new `Content-Length` decoder as the transport's direct reads do (rooms of
    /// up to 64 KiB; `exact`: a stream that keeps nothing of its own).
    fn read_directly(input: &[u8], exact: bool) -> Reads {
        let mut decoder = Decoder::new(Framing::ContentLength, NO_LIMIT);
        let mut reads = Reads::default();
        let mut offset = 0;
        loop {
            while let Some(found) = decoder.next(true) {
                match found {
                    Decoded::Message(message) => {
                        reads.bodies.push(message.len());
                        reads.body_addresses.push(message.as_ptr() as usize);
                    }
                    Decoded::Dropped(dropped) => panic!("dropped {dropped:?}"),
                }
            }
            let read = |room: &mut [std::mem::MaybeUninit<u8>]| -> Result<usize, ()> {
                reads.rooms.push(room.len());
                reads.read_at.push((offset, room.as_ptr() as usize));
                let count = room.len().min(input.len() - offset);
                for (slot, &byte) in room.iter_mut().zip(&input[offset..offset + count]) {
                    slot.write(byte);
                }
                offset += count;
                Ok(count)
            };
            // SAFETY: `read` initialises every byte it counts.
            let count = unsafe { decoder.feed_with(64 * 1024, exact, read) }.unwrap();
            if let Buffer::Frames(buffer) = &decoder.buffer {
                reads.capacities.push(buffer.data.capacity());
            }
            if count == 0 {
                decoder.close();
                assert_eq!(decoder.next(true), None);
                return reads;
            }
        }
    }

    #[test]
    fn a_large_frame_read_directly_is_reserved_once() {
        let body = vec![b'7'; 300_000];
        let header = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
        let input = [header.as_slice(), &body, b"Content-Length: 2\r\n\r\n{}"].concat();
        let Reads { bodies, rooms, capacities, .. } = read_directly(&input, false);
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
    fn a_body_read_exactly_is_read_once_and_never_moved() {
        // Frames a little larger than a read, as an LSP client's `didOpen` of a 64 KiB document.
        let sizes = [70_000, 70_000, 100, 200_000, 70_000, 65_536, 70_000];
        let (mut input, mut body_offsets) = (Vec::new(), Vec::new());
        for (k, &size) in sizes.iter().enumerate() {
            input.extend(format!("Content-Length: {size}\r\n\r\n").into_bytes());
            body_offsets.push(input.len());
            input.extend(std::iter::repeat_n(b'a' + u8::try_from(k).unwrap(), size));
        }
        let reads = read_directly(&input, true);
        assert_eq!(reads.bodies, sizes);
        // A read of the headers and the body's start, then one of the body's rest, which ends where
        // the body does; a read is never offered more than its frame needs.
        let rooms: Vec<usize> = reads.rooms.iter().copied().filter(|&room| room != 64 * 1024).collect();
        assert_eq!(rooms.len(), sizes.iter().filter(|&&size| size > 64 * 1024 - 24).count(), "{:?}", reads.rooms);
        let frame_starts: Vec<usize> = body_offsets.iter().zip(sizes).map(|(offset, size)| offset + size).collect();
        for (&(offset, _), room) in reads.read_at.iter().zip(&reads.rooms).skip(1) {
            assert!(*room == 64 * 1024 || frame_starts.contains(&(offset + room)), "a read past a body's end");
        }
        // Each body is handed out where its bytes were read, never moved to the buffer's front
        // (but for those larger than any before, whose rest grew the buffer once).
        for (k, (&body_offset, &address)) in body_offsets.iter().zip(&reads.body_addresses).enumerate() {
            if sizes[..k].iter().all(|&size| size < sizes[k]) {
                continue;
            }
            let &(read_offset, read_address) =
                reads.read_at.iter().rev().find(|&&(read_offset, _)| read_offset <= body_offset).unwrap();
            assert_eq!(address, read_address + (body_offset - read_offset), "body {k} was moved");
        }
    }

    #[test]
    fn small_frames_read_directly_share_reads() {
        let frame = b"Content-Length: 13\r\n\r\n{\"id\":123456}";
        let input = frame.repeat(10_000);
        for exact in [false, true] {
            let Reads { bodies, rooms, capacities, .. } = read_directly(&input, exact);
            assert_eq!(bodies, vec![13; 10_000]);
            // Full reads: a frame cut by a read's end costs no extra read once the buffer has room.
            assert!(rooms.len() <= 2 + input.len() / (32 * 1024), "{} reads", rooms.len());
            assert!(capacities.iter().all(|&capacity| capacity <= 4 * 64 * 1024), "{capacities:?}");
        }
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

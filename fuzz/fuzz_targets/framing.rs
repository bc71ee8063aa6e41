//! `LineBuffer` against a reference model of the framing rules in docs/semantics.md, and
//! `FrameBuffer` (Content-Length framing) against itself fed the whole stream at once.
//!
//! The input is a small limit, a list of read sizes (and how many lines to take after each read)
//! and the bytes of the stream. The stream is fed in those pieces; the lines handed out, read
//! after read and at the end of input, must be what splitting the whole stream at `\n`, dropping
//! one `\r` at the end of each line, and calling every line longer than the limit too long gives.
//! The frames handed out must be the same whatever the pieces (a header or a body split across
//! reads, `has_frame` asked between them), and the bytes held stay within the body limit, the
//! header limit and one read. The `Decoder` (what the transport and `FrameDecoder` read through)
//! hands out the same lines, the blank ones skipped when asked, and the same frames.
#![no_main]

use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;

use rpcwire_protocol::framing::{
    self, Decoded, Decoder, Dropped, Frame, FrameBuffer, Framing, Line, LineBuffer, HEADER_LIMIT,
};

#[derive(Debug, PartialEq, Eq)]
enum Expected {
    Complete(Vec<u8>),
    TooLong {
        looks_like_json: bool,
    },
    /// A frame dropped (the `Decoder` in `Content-Length` framing).
    Dropped(Dropped),
}

fn owned(line: &Line<'_>) -> Expected {
    match line {
        Line::Complete(bytes) => Expected::Complete(bytes.to_vec()),
        Line::TooLong { looks_like_json } => Expected::TooLong { looks_like_json: *looks_like_json },
    }
}

/// The framing rules applied to the whole stream at once.
fn reference(stream: &[u8], max_line: usize) -> Vec<Expected> {
    let mut pieces: Vec<&[u8]> = stream.split(|&byte| byte == b'\n').collect();
    if pieces.last().is_some_and(|last| last.is_empty()) {
        pieces.pop(); // the stream ended with `\n` (or was empty): no last partial line
    }
    pieces
        .into_iter()
        .map(|piece| {
            let line = piece.strip_suffix(b"\r").unwrap_or(piece);
            if line.len() > max_line {
                let first = line.iter().find(|byte| !matches!(byte, b' ' | b'\t' | b'\r' | b'\n'));
                Expected::TooLong { looks_like_json: matches!(first, Some(b'{' | b'[')) }
            } else {
                Expected::Complete(line.to_vec())
            }
        })
        .collect()
}

#[derive(Debug, PartialEq, Eq)]
enum Framed {
    Body(Vec<u8>),
    TooLong(u64),
    Bad(framing::FrameError),
}

/// Every frame of `stream`, fed in pieces of `sizes` (cycled; all of it at once when empty).
fn frames(stream: &[u8], max_body: usize, sizes: &[u8]) -> Vec<Framed> {
    let mut buffer = FrameBuffer::new(max_body);
    let mut got = Vec::new();
    let mut take = |buffer: &mut FrameBuffer, at_eof: bool| loop {
        let has_frame = buffer.has_frame(at_eof);
        let Some(frame) = buffer.pop_frame(at_eof) else {
            assert!(!has_frame, "has_frame without a frame");
            break;
        };
        assert!(has_frame, "a frame after has_frame said none");
        got.push(match frame {
            Frame::Complete(body) => Framed::Body(body.to_vec()),
            Frame::TooLong { length } => Framed::TooLong(length),
            Frame::Bad(error) => Framed::Bad(error),
        });
    };
    let mut rest = stream;
    for &size in sizes.iter().cycle() {
        if rest.is_empty() {
            break;
        }
        let size = usize::from(size & 0x1F).max(1).min(rest.len());
        buffer.extend(&rest[..size]);
        rest = &rest[size..];
        take(&mut buffer, false);
        assert!(buffer.held() <= max_body + HEADER_LIMIT + 32, "{} bytes held", buffer.held());
    }
    buffer.extend(rest);
    take(&mut buffer, true);
    assert!(buffer.pop_frame(true).is_none(), "a frame after the end");
    got
}

/// What a `Decoder` hands out for `stream` fed in pieces of `sizes` (cycled; all at once when empty).
fn decoded(framing: Framing, stream: &[u8], limit: usize, sizes: &[u8], skip_blank: bool) -> Vec<Expected> {
    let mut decoder = Decoder::new(framing, limit);
    let mut got = Vec::new();
    let mut take = |decoder: &mut Decoder| loop {
        let has_message = decoder.has_message(skip_blank);
        let Some(item) = decoder.next(skip_blank) else {
            assert!(!has_message || decoder.is_closed(), "has_message without a message");
            break;
        };
        got.push(match item {
            Decoded::Message(bytes) => Expected::Complete(bytes.to_vec()),
            Decoded::Dropped(Dropped::TooLong { looks_like_json }) => Expected::TooLong { looks_like_json },
            Decoded::Dropped(other) => Expected::Dropped(other),
        });
    };
    let mut rest = stream;
    for &size in sizes.iter().cycle() {
        if rest.is_empty() {
            break;
        }
        let size = usize::from(size & 0x1F).max(1).min(rest.len());
        decoder.feed(&rest[..size]);
        rest = &rest[size..];
        take(&mut decoder);
    }
    decoder.feed(rest);
    take(&mut decoder);
    decoder.close();
    take(&mut decoder);
    got
}

fn is_blank(expected: &Expected) -> bool {
    matches!(expected, Expected::Complete(line) if line.iter().all(|byte| matches!(byte, b' ' | b'\t' | b'\r')))
}

fn run(data: &[u8]) -> Result<()> {
    let mut input = Unstructured::new(data);
    let max_line = usize::from(input.int_in_range(0u8..=40)?);
    let reads: Vec<u8> = input.arbitrary()?;
    let stream = input.take_rest();
    let expected = reference(stream, max_line);

    let mut buffer = LineBuffer::new(max_line);
    let mut got = Vec::new();
    let mut rest = stream;
    let mut take = |buffer: &mut LineBuffer, most: usize| {
        for _ in 0..most {
            let has_line = buffer.has_line();
            let line = buffer.pop_line();
            assert_eq!(has_line, line.is_some(), "has_line disagrees with pop_line");
            let Some(line) = line else { break };
            got.push(owned(&line));
        }
    };
    for (index, &read) in reads.iter().cycle().enumerate() {
        if rest.is_empty() || index > stream.len() + reads.len() {
            break;
        }
        // Low bits: how many bytes this read returns (0 is a read that returned nothing yet);
        // high bits: how many lines the reader takes before reading again (7: all of them).
        let size = usize::from(read & 0x1F).min(rest.len());
        buffer.extend(&rest[..size]);
        rest = &rest[size..];
        let most = usize::from(read >> 5);
        take(&mut buffer, if most == 7 { usize::MAX } else { most });
    }
    buffer.extend(rest);
    take(&mut buffer, usize::MAX);
    assert!(!buffer.has_line());
    if let Some(line) = buffer.pop_rest() {
        got.push(owned(&line));
    }
    assert_eq!(buffer.pop_rest(), None, "pop_rest twice");
    assert_eq!(buffer.pop_line(), None, "a line after the end");
    assert_eq!(got, expected, "max_line {max_line}, stream {stream:?}");
    assert_eq!(frames(stream, max_line, &reads), frames(stream, max_line, &[]), "stream {stream:?}");
    assert_eq!(decoded(Framing::Newline, stream, max_line, &reads, false), expected, "stream {stream:?}");
    let not_blank: Vec<Expected> = expected.into_iter().filter(|line| !is_blank(line)).collect();
    assert_eq!(decoded(Framing::Newline, stream, max_line, &reads, true), not_blank, "stream {stream:?}");
    let frames_decoded = decoded(Framing::ContentLength, stream, max_line, &reads, true);
    assert_eq!(frames_decoded, decoded(Framing::ContentLength, stream, max_line, &[], true), "stream {stream:?}");
    Ok(())
}

fuzz_target!(|data: &[u8]| {
    let _ = run(data);
});

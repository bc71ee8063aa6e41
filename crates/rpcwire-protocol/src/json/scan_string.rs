//! The scanner's strings: validated in one walk over their bytes that skips the ordinary ones
//! sixteen at a time (SSE2 on `x86_64`), and read three ways: borrowed as written (`Scanner::string`,
//! for the envelope), unescaped into a buffer with their `Width` found in the same walk
//! (`Scanner::string_text`, the decoder's path), or, a long text with escapes, unescaped in the same one
//! walk straight into a Python string's storage units, widened as wider characters come
//! (`Scanner::string_units`).
//!
//! Lone surrogate escapes are accepted (as `json.loads` accepts them): strings are WTF-8 here.

use super::scan::{JsonStr, Scanner};
use super::unescape::{escape_u, hex4, push_code_point, wtf8_char, StrUnit, Width};
use super::Result;
use crate::errors::SyntaxError;

/// Bytes that stand for themselves inside a JSON string: all but `"`, `\\` and control characters.
pub(super) static ORDINARY_IN_STRING: [bool; 256] = {
    let mut table = [true; 256];
    let mut byte = 0;
    while byte < 0x20 {
        table[byte] = false;
        byte += 1;
    }
    table[b'"' as usize] = false;
    table[b'\\' as usize] = false;
    table
};

/// The index of the first byte at or after `pos` that is `"`, `\\`, a control character or (with
/// `STOP_AT_ED`, the lead byte of a WTF-8 surrogate) 0xED; `bytes.len()` if there is none.
///
/// Sixteen bytes are tested at a time with SSE2 (part of every `x86_64`), elsewhere one at a time:
/// each string is passed over three times (envelope, decoding, encoding), and SSE2 beat 8-byte SWAR
/// words (bench/README.md).
#[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))] // `pos` moves in the SSE2 loop only
pub(super) fn skip_ordinary<const STOP_AT_ED: bool>(bytes: &[u8], mut pos: usize) -> usize {
    #[cfg(target_arch = "x86_64")]
    while let Some(chunk) = bytes.get(pos..pos + 16) {
        let mask = special_mask_sse2::<STOP_AT_ED>(chunk.try_into().expect("a chunk of 16 bytes"));
        if mask != 0 {
            return pos + mask.trailing_zeros() as usize;
        }
        pos += 16;
    }
    let is_special = |byte: u8| !ORDINARY_IN_STRING[usize::from(byte)] || (STOP_AT_ED && byte == 0xED);
    bytes[pos..].iter().position(|&byte| is_special(byte)).map_or(bytes.len(), |offset| pos + offset)
}

/// As `skip_ordinary::<false>`, and raises `widest` to the largest byte skipped (the bytes before the one
/// it stops at, never one after it): that byte says how Python stores the text ([`Width::of_utf8`]).
///
/// The decoder walks each string once, resolving its escapes as it goes and learning its width, so
/// that the `str` is built without another pass to validate or measure it.
#[inline]
#[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))] // `pos` moves in the SSE2 loop only
fn skip_ordinary_widest(bytes: &[u8], mut pos: usize, widest: &mut u8) -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{__m128i, _mm_and_si128, _mm_loadu_si128, _mm_max_epu8, _mm_setzero_si128};
        /// Sixteen 0xFF then sixteen 0x00: from offset `16 - n`, a mask that keeps the first `n` bytes.
        static PREFIX: [u8; 32] = {
            let mut mask = [0; 32];
            let mut i = 0;
            while i < 16 {
                mask[i] = 0xFF;
                i += 1;
            }
            mask
        };
        // SAFETY: SSE2 is part of the x86_64 baseline; each load reads 16 bytes inside `bytes` (the
        // chunk) or inside `PREFIX` (`16 - n` is in 0..=16, so 16 bytes from it stay in its 32).
        unsafe {
            let mut most: __m128i = _mm_setzero_si128();
            while let Some(chunk) = bytes.get(pos..pos + 16) {
                let chunk = _mm_loadu_si128(chunk.as_ptr().cast());
                let mask = special_mask_of::<false>(chunk);
                if mask != 0 {
                    let n = mask.trailing_zeros() as usize;
                    let keep = _mm_loadu_si128(PREFIX[16 - n..].as_ptr().cast());
                    *widest = (*widest).max(largest_byte(_mm_max_epu8(most, _mm_and_si128(chunk, keep))));
                    return pos + n;
                }
                most = _mm_max_epu8(most, chunk);
                pos += 16;
            }
            *widest = (*widest).max(largest_byte(most));
        }
    }
    for (offset, &byte) in bytes[pos..].iter().enumerate() {
        if !ORDINARY_IN_STRING[usize::from(byte)] {
            return pos + offset;
        }
        *widest = (*widest).max(byte);
    }
    bytes.len()
}

/// The largest of the 16 bytes; 0 for ASCII ones without looking further (the usual case).
#[cfg(target_arch = "x86_64")]
#[inline]
fn largest_byte(bytes: std::arch::x86_64::__m128i) -> u8 {
    use std::arch::x86_64::{_mm_cvtsi128_si32, _mm_max_epu8, _mm_movemask_epi8, _mm_srli_si128};
    // SAFETY: SSE2 is part of the x86_64 baseline; these work on registers only.
    unsafe {
        if _mm_movemask_epi8(bytes) == 0 {
            return 0;
        }
        let most = _mm_max_epu8(bytes, _mm_srli_si128::<8>(bytes));
        let most = _mm_max_epu8(most, _mm_srli_si128::<4>(most));
        let most = _mm_max_epu8(most, _mm_srli_si128::<2>(most));
        let most = _mm_max_epu8(most, _mm_srli_si128::<1>(most));
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // the low byte
        let byte = _mm_cvtsi128_si32(most) as u8;
        byte
    }
}

impl<'a> Scanner<'a> {
    /// A string; the cursor is at its opening quote.
    pub fn string(&mut self) -> Result<JsonStr<'a>> {
        let bytes = self.bytes();
        // A local cursor (not `self.pos`) lets the loop keep it in a register.
        let start = self.pos + 1;
        let mut pos = start;
        let mut escaped = false;
        loop {
            pos = skip_ordinary::<false>(bytes, pos);
            match bytes.get(pos) {
                None => return Err(SyntaxError { what: "unterminated string", position: pos }),
                Some(b'"') => break,
                Some(b'\\') => {
                    escaped = true;
                    pos += 1;
                    match bytes.get(pos) {
                        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => pos += 1,
                        Some(b'u') if bytes.get(pos + 1..pos + 5).and_then(hex4).is_some() => pos += 5,
                        _ => return Err(SyntaxError { what: "invalid escape in string", position: pos }),
                    }
                }
                Some(_) => return Err(SyntaxError { what: "control character in string", position: pos }),
            }
        }
        let raw = &self.text[start..pos];
        self.pos = pos + 1;
        Ok(JsonStr { raw, escaped })
    }

    /// A string, its escapes resolved: the cursor is at its opening quote. A string without escapes is
    /// handed out as it is written; otherwise its text (WTF-8) is appended to `out`. Accepts exactly what
    /// [`string`](Self::string) accepts, with the same errors, in one walk over the bytes that validates,
    /// unescapes and finds the text's [`Width`] (the decoder's path: no second pass over any string).
    ///
    /// `Ok(None)` when the text of a string with escapes would take more than `limit` bytes of `out`:
    /// the cursor has not moved (what `out` holds then is of no use), and [`string_units`](Self::string_units)
    /// reads the string instead, so that a long text is never held whole outside the Python string.
    pub fn string_text(&mut self, out: &mut Vec<u8>, limit: usize) -> Result<Option<StrText<'a>>> {
        let bytes = self.bytes();
        let start = self.pos + 1;
        let mut widest = 0;
        // A local cursor (not `self.pos`) lets the loops keep it in a register.
        let mut pos = skip_ordinary_widest(bytes, start, &mut widest);
        match bytes.get(pos) {
            Some(b'"') => {
                self.pos = pos + 1;
                return Ok(Some(StrText {
                    unescaped: Some(&self.text[start..pos]),
                    width: Width::of_utf8(widest),
                    has_surrogate: false,
                }));
            }
            Some(b'\\') => {}
            None => return Err(SyntaxError { what: "unterminated string", position: pos }),
            Some(_) => return Err(SyntaxError { what: "control character in string", position: pos }),
        }
        if pos - start > limit {
            return Ok(None);
        }
        out.extend_from_slice(&bytes[start..pos]);
        let mut width = Width::Ascii;
        let mut has_surrogate = false;
        loop {
            // At a backslash.
            pos += 1;
            let simple = match bytes.get(pos) {
                Some(b'"') => b'"',
                Some(b'\\') => b'\\',
                Some(b'/') => b'/',
                Some(b'b') => 0x08,
                Some(b'f') => 0x0C,
                Some(b'n') => b'\n',
                Some(b'r') => b'\r',
                Some(b't') => b'\t',
                Some(b'u') => {
                    let Some((cp, length)) = escape_u(bytes, pos + 1) else {
                        return Err(SyntaxError { what: "invalid escape in string", position: pos });
                    };
                    pos += length;
                    has_surrogate |= (0xD800..0xE000).contains(&cp);
                    width = width.max(Width::of_code_point(cp));
                    push_code_point(out, cp);
                    0
                }
                _ => return Err(SyntaxError { what: "invalid escape in string", position: pos }),
            };
            if simple != 0 {
                out.push(simple);
                pos += 1;
            }
            let run = pos;
            pos = skip_ordinary_widest(bytes, run, &mut widest);
            if out.len() + (pos - run) > limit {
                return Ok(None);
            }
            out.extend_from_slice(&bytes[run..pos]);
            match bytes.get(pos) {
                Some(b'"') => break,
                Some(b'\\') => {}
                None => return Err(SyntaxError { what: "unterminated string", position: pos }),
                Some(_) => return Err(SyntaxError { what: "control character in string", position: pos }),
            }
        }
        self.pos = pos + 1;
        Ok(Some(StrText { unescaped: None, width: width.max(Width::of_utf8(widest)), has_surrogate }))
    }
}

/// Where [`Scanner::string_units`] reads a long string: the byte of the JSON text it has come to and how
/// many units it has written. Made by [`Scanner::string_cursor`] at the string's opening quote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StrCursor {
    /// The next byte to read (inside the string).
    pos: usize,
    /// The units written so far (characters of the text).
    pub at: usize,
}

/// Why [`Scanner::string_units`] stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnitsStop {
    /// The string ended: its `at` characters are written and the scanner is past its closing quote.
    Closed,
    /// The units are full before the string's end: the caller gives more room and reads on.
    Full,
    /// The next character does not fit the units' width: this width holds it. The caller moves the
    /// units written to storage of that width and reads on (the character is read again there).
    Wider(Width),
}

impl Scanner<'_> {
    /// A cursor for [`string_units`](Self::string_units) at the string whose opening quote is at the cursor.
    pub fn string_cursor(&self) -> StrCursor {
        StrCursor { pos: self.pos + 1, at: 0 }
    }

    /// The most characters the string at `cursor` can still hold (one a byte of the text left): the room
    /// that is always enough for the rest of it.
    pub fn string_room(&self, cursor: &StrCursor) -> usize {
        self.text.len().saturating_sub(cursor.pos)
    }

    /// Read on the string at `cursor`, validating it (what [`string`](Self::string) accepts, with the
    /// same errors), and write its characters into `units[cursor.at..]`, one unit a character of at
    /// most `width` (a surrogate pair escape one character, a lone surrogate escape its code unit),
    /// until it ends, `units` is full, or a wider character comes.
    ///
    /// One walk that validates and writes: a long string's text goes straight into a Python string's
    /// storage, whose width grows as wider characters come (the caller copies what was written then), so
    /// that no escape is read twice and the text is held nowhere else. Ordinary bytes go sixteen at a
    /// time (SSE2: stored widened whole, the count then moved to the first that ends the run).
    pub fn string_units<T: StrUnit>(
        &mut self,
        cursor: &mut StrCursor,
        units: &mut [T],
        width: Width,
    ) -> Result<UnitsStop> {
        let bytes = self.bytes();
        let max = width.max_char();
        // Locals, not `cursor`'s fields, so that the loop keeps them in registers.
        let (mut pos, mut at) = (cursor.pos, cursor.at);
        let stop = 'read: loop {
            #[cfg(target_arch = "x86_64")]
            while let (Some(chunk), true) = (bytes.get(pos..pos + 16), at + 16 <= units.len()) {
                use std::arch::x86_64::{_mm_loadu_si128, _mm_movemask_epi8};
                // SAFETY: SSE2 is part of the x86_64 baseline; the load reads the 16 bytes of `chunk`
                // and `store16` writes units `at..at + 16`, inside `units` (checked above).
                let mask = unsafe {
                    let chunk = _mm_loadu_si128(chunk.as_ptr().cast());
                    T::store16(units.as_mut_ptr().add(at), chunk);
                    // Bytes beyond ASCII too: a character of more than one byte is read below.
                    special_mask_of::<false>(chunk) | _mm_movemask_epi8(chunk)
                };
                if mask != 0 {
                    let n = mask.trailing_zeros() as usize;
                    pos += n;
                    at += n;
                    break;
                }
                pos += 16;
                at += 16;
            }
            // At a byte that ends a run (or one of the last few of the text or the room).
            loop {
                let Some(&byte) = bytes.get(pos) else {
                    return Err(SyntaxError { what: "unterminated string", position: pos });
                };
                if byte == b'"' {
                    break 'read UnitsStop::Closed;
                }
                let Some(unit) = units.get_mut(at) else { break 'read UnitsStop::Full };
                let (cp, length) = match byte {
                    b'\\' => match bytes.get(pos + 1) {
                        Some(b'"') => (u32::from(b'"'), 2),
                        Some(b'\\') => (u32::from(b'\\'), 2),
                        Some(b'/') => (u32::from(b'/'), 2),
                        Some(b'b') => (0x08, 2),
                        Some(b'f') => (0x0C, 2),
                        Some(b'n') => (u32::from(b'\n'), 2),
                        Some(b'r') => (u32::from(b'\r'), 2),
                        Some(b't') => (u32::from(b'\t'), 2),
                        Some(b'u') => {
                            let Some((cp, length)) = escape_u(bytes, pos + 2) else {
                                return Err(SyntaxError { what: "invalid escape in string", position: pos + 1 });
                            };
                            (cp, 1 + length)
                        }
                        _ => return Err(SyntaxError { what: "invalid escape in string", position: pos + 1 }),
                    },
                    0x80.. => wtf8_char(bytes, pos),
                    0..=0x1F => return Err(SyntaxError { what: "control character in string", position: pos }),
                    _ => (u32::from(byte), 1),
                };
                if cp > max {
                    break 'read UnitsStop::Wider(Width::of_code_point(cp));
                }
                *unit = T::of(cp);
                at += 1;
                pos += length;
                // Escapes and characters beyond ASCII that follow one another (a text of `\u` escapes,
                // or of CJK) are read here, without a trip through the chunk loop for the empty run
                // between them.
                if !matches!(bytes.get(pos), Some(&byte) if byte == b'\\' || byte >= 0x80) {
                    continue 'read;
                }
            }
        };
        if stop == UnitsStop::Closed {
            self.pos = pos + 1;
        }
        *cursor = StrCursor { pos, at };
        Ok(stop)
    }
}

/// A string as [`Scanner::string_text`] read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StrText<'a> {
    /// The content between the quotes when it held no escape (it is then the text); `None` when the
    /// escapes were resolved into the caller's buffer.
    pub unescaped: Option<&'a str>,
    /// How Python stores the text (exact: the narrowest kind that holds it).
    pub width: Width,
    /// Whether the text holds a lone surrogate (only an escape writes one; its WTF-8 form is not UTF-8).
    pub has_surrogate: bool,
}

/// Bit `i` set when `chunk[i]` is a byte `skip_ordinary` stops at.
#[cfg(target_arch = "x86_64")]
fn special_mask_sse2<const STOP_AT_ED: bool>(chunk: &[u8; 16]) -> i32 {
    use std::arch::x86_64::_mm_loadu_si128;
    // SAFETY: SSE2 is part of the x86_64 baseline, and the load reads exactly the 16 bytes of
    // `chunk` (`loadu` needs no alignment).
    special_mask_of::<STOP_AT_ED>(unsafe { _mm_loadu_si128(chunk.as_ptr().cast()) })
}

/// Bit `i` set when byte `i` of `bytes` is one `skip_ordinary` stops at.
#[cfg(target_arch = "x86_64")]
#[inline]
pub(super) fn special_mask_of<const STOP_AT_ED: bool>(bytes: std::arch::x86_64::__m128i) -> i32 {
    use std::arch::x86_64::{_mm_cmpeq_epi8, _mm_max_epu8, _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8};
    // SAFETY: SSE2 is part of the x86_64 baseline; these work on registers only.
    unsafe {
        let below_0x20 = {
            // max(byte, 0x1F) == 0x1F exactly when byte <= 0x1F (unsigned).
            let last_control = _mm_set1_epi8(0x1F);
            _mm_cmpeq_epi8(_mm_max_epu8(bytes, last_control), last_control)
        };
        let quote = _mm_cmpeq_epi8(bytes, _mm_set1_epi8(0x22)); // '"'
        let backslash = _mm_cmpeq_epi8(bytes, _mm_set1_epi8(0x5C)); // '\\'
        let mut special = _mm_or_si128(below_0x20, _mm_or_si128(quote, backslash));
        if STOP_AT_ED {
            special = _mm_or_si128(special, _mm_cmpeq_epi8(bytes, _mm_set1_epi8(i8::from_ne_bytes([0xED]))));
        }
        _mm_movemask_epi8(special)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skip_ordinary_stops_at_each_special_byte_wherever_it_is() {
        for length in [0, 1, 15, 16, 17, 31, 32, 33, 70] {
            for at in 0..length {
                for byte in 0..=255u8 {
                    let mut bytes = vec![b'a'; length];
                    bytes[at] = byte;
                    for start in [0, at.min(3), at] {
                        let plain = byte >= 0x20 && byte != b'"' && byte != b'\\';
                        let expected = if plain { length } else { at };
                        assert_eq!(super::skip_ordinary::<false>(&bytes, start), expected, "{bytes:?} from {start}");
                        let expected = if plain && byte != 0xED { length } else { at };
                        assert_eq!(super::skip_ordinary::<true>(&bytes, start), expected, "{bytes:?} from {start}");
                    }
                }
            }
        }
    }

    /// `string_text` and `string_units` (as the decoder reads a long string: its room full, widened,
    /// closed) against `string` and `unescape_into`, on strings whose escapes, controls and non-ASCII
    /// bytes sit anywhere around the 16-byte chunks.
    #[test]
    fn string_text_and_string_units_read_what_string_and_unescape_read() {
        use crate::json::{StrText, Width};
        let pieces = [
            "a",
            "\\n",
            "\\\\",
            "\\\"",
            "\\/",
            "\\t",
            "\\u00e9",
            "\\u2014",
            "\\ud83d\\ude00",
            "\\ud800",
            "\\udc00x",
            "\u{e9}",
            "\u{2014}",
            "\u{1f600}",
            "\u{7f}",
            "\\u0000",
            "0123456789abcdef",
            "\\x",
            "\t",
            "\\u12",
            "\\ud83d\\ude00\\u6f22\\u00e9",
            "\u{6f22}\u{5b57}",
            "0123456789abcdef0123456789",
        ];
        let mut texts = vec![String::new()];
        for first in pieces {
            for second in pieces {
                for pad in [0, 3, 13, 15, 16, 17] {
                    texts.push(format!("{}{first}{}{second}", "p".repeat(pad), "q".repeat(pad / 2)));
                }
            }
        }
        for body in texts {
            for tail in ["\"", "", "\"]"] {
                let text = format!("\"{body}{tail}");
                let expected = Scanner::new(&text, 8).string().map(|string| {
                    let (decoded, has_surrogate) = string.decode();
                    (decoded.into_owned(), has_surrogate, string.escaped)
                });
                let mut out = Vec::new();
                let mut scanner = Scanner::new(&text, 8);
                let got = scanner.string_text(&mut out, usize::MAX).map(|read| read.expect("no limit"));
                string_units_read_what_string_and_unescape_read(&text, expected.as_ref());
                // With a limit: the same, or (with escapes only, or an error further on: `string_units`
                // then finds it) refused without moving.
                let mut short = Scanner::new(&text, 8);
                match short.string_text(&mut Vec::new(), 4) {
                    Ok(None) => {
                        assert!(expected.as_ref().map_or(true, |(_, _, escaped)| *escaped), "{text:?}");
                        assert_eq!(short.pos, 0, "{text:?}");
                    }
                    Ok(Some(_)) => assert!(expected.is_ok(), "{text:?}"),
                    Err(error) => assert_eq!(Err(&error), expected.as_ref().map(|_| ()), "{text:?}"),
                }
                match (expected, got) {
                    (
                        Ok((decoded, has_surrogate, escaped)),
                        Ok(StrText { unescaped, width, has_surrogate: got_surrogate }),
                    ) => {
                        let got_text = unescaped.map_or(out.clone(), |raw| raw.as_bytes().to_vec());
                        assert_eq!(got_text, decoded, "{text:?}");
                        assert_eq!(unescaped.is_none(), escaped, "{text:?}");
                        assert_eq!(got_surrogate, has_surrogate, "{text:?}");
                        let widest = String::from_utf8_lossy(&decoded).chars().map(u32::from).max().unwrap_or(0);
                        let widest = if has_surrogate { widest.max(0xD800) } else { widest };
                        assert_eq!(width, Width::of_code_point(widest), "{text:?}");
                    }
                    (Err(expected), Err(got)) => assert_eq!(got, expected, "{text:?}"),
                    (expected, got) => panic!("{text:?}: {expected:?} against {got:?}"),
                }
            }
        }
    }

    /// `string_units` read as the decoder reads it (from ASCII storage widened as wider characters come,
    /// `room` units at first and `room` more each time they are full): the text's code points, its width.
    fn read_units(text: &str, room: usize) -> crate::json::Result<(Vec<u32>, crate::json::Width, usize)> {
        use crate::json::{UnitsStop, Width};
        let mut scanner = Scanner::new(text, 8);
        let mut cursor = scanner.string_cursor();
        let mut width = Width::Ascii;
        // The storage of each width, as the units written so far (`u32` for all: converted on the way).
        let (mut narrow, mut ucs2, mut ucs4) = (vec![0u8; room], Vec::<u16>::new(), Vec::<u32>::new());
        loop {
            let stop = match width {
                Width::Ascii | Width::Latin1 => scanner.string_units(&mut cursor, &mut narrow, width)?,
                Width::Ucs2 => scanner.string_units(&mut cursor, &mut ucs2, width)?,
                Width::Ucs4 => scanner.string_units(&mut cursor, &mut ucs4, width)?,
            };
            let written: Vec<u32> = match width {
                Width::Ascii | Width::Latin1 => narrow[..cursor.at].iter().map(|&unit| u32::from(unit)).collect(),
                Width::Ucs2 => ucs2[..cursor.at].iter().map(|&unit| u32::from(unit)).collect(),
                Width::Ucs4 => ucs4[..cursor.at].to_vec(),
            };
            assert!(written.iter().all(|&cp| cp <= width.max_char()), "{text:?}");
            match stop {
                UnitsStop::Closed => return Ok((written, width, scanner.pos)),
                UnitsStop::Full => {
                    let room = cursor.at + room;
                    narrow.resize(room, 0);
                    ucs2.resize(room, 0);
                    ucs4.resize(room, 0);
                }
                UnitsStop::Wider(wider) => {
                    assert!(wider > width, "{text:?}");
                    width = wider;
                    let room = narrow.len();
                    ucs2 = written.iter().map(|&cp| u16::try_from(cp).unwrap_or(0)).collect();
                    ucs4 = written.clone();
                    ucs2.resize(room, 0);
                    ucs4.resize(room, 0);
                }
            }
        }
    }

    /// `string_units` on `text` against what `string` and `unescape_into` read, with room for 3, 16
    /// and 1000 units at first.
    fn string_units_read_what_string_and_unescape_read(
        text: &str,
        expected: std::result::Result<&(Vec<u8>, bool, bool), &crate::errors::SyntaxError>,
    ) {
        use crate::json::{count_chars, widen_wtf8, Width};
        for room in [3, 16, 1000] {
            match (expected, read_units(text, room)) {
                (Ok((decoded, _, _)), Ok((units, width, pos))) => {
                    let mut expected_units = vec![0u32; count_chars(decoded)];
                    widen_wtf8(decoded, &mut expected_units);
                    assert_eq!(units, expected_units, "{text:?}");
                    let widest = expected_units.iter().copied().max().unwrap_or(0);
                    assert_eq!(width, Width::of_code_point(widest), "{text:?}");
                    assert_eq!(&text[pos - 1..pos], "\"", "{text:?}");
                    assert_eq!(Scanner::new(text, 8).string().map(|string| string.raw.len() + 2), Ok(pos), "{text:?}");
                }
                (Err(expected), Err(got)) => assert_eq!(&got, expected, "{text:?}"),
                (expected, got) => panic!("{text:?} (room {room}): {expected:?} against {got:?}"),
            }
        }
    }
}

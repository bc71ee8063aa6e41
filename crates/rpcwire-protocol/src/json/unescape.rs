//! A JSON string's text out of its raw content: escapes resolved to WTF-8 (`unescape_into`), and WTF-8
//! written straight into a Python string's storage units (`widen_wtf8`: Latin-1, UCS-2 or UCS-4, the
//! `StrUnit`s), with the `Width` and character count that storage needs; the pieces of an escape
//! (`hex4`, `escape_u`) and of a character (`wtf8_char`) the scanner reads with. Callers pass content
//! the scanner validated: nothing here fails.

/// How Python stores a text: the widest character's kind, which its largest code point decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Width {
    /// Every character below U+0080.
    Ascii,
    /// Below U+0100: one byte a character.
    Latin1,
    /// Below U+10000 (surrogates included): two bytes a character.
    Ucs2,
    /// Four bytes a character.
    Ucs4,
}

impl Width {
    /// The width of a (WTF-8) text whose largest byte is `byte`: a lead byte's value orders the code
    /// points it starts (0xC2-0xC3 up to U+00FF, up to 0xEF within the BMP), and continuation bytes
    /// (0x80-0xBF) are below every lead byte of more than one byte.
    pub fn of_utf8(byte: u8) -> Self {
        match byte {
            0..=0x7F => Self::Ascii,
            0x80..=0xC3 => Self::Latin1,
            0xC4..=0xEF => Self::Ucs2,
            _ => Self::Ucs4,
        }
    }

    /// The width of a text holding code point `cp`.
    pub fn of_code_point(cp: u32) -> Self {
        match cp {
            0..=0x7F => Self::Ascii,
            0x80..=0xFF => Self::Latin1,
            0x100..=0xFFFF => Self::Ucs2,
            _ => Self::Ucs4,
        }
    }

    /// The largest code point of this width (what `PyUnicode_New` takes).
    pub fn max_char(self) -> u32 {
        match self {
            Self::Ascii => 0x7F,
            Self::Latin1 => 0xFF,
            Self::Ucs2 => 0xFFFF,
            Self::Ucs4 => 0x10_FFFF,
        }
    }
}

/// The characters of a WTF-8 text (its bytes that do not continue a character: 0x80-0xBF).
#[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))] // `pos` moves in the SSE2 loop only
pub fn count_chars(text: &[u8]) -> usize {
    let mut continuations = 0;
    let mut pos = 0;
    // Sixteen byte counters (SSE2), summed every 255 chunks before one can wrap: no popcount per chunk.
    #[cfg(target_arch = "x86_64")]
    while pos + 16 <= text.len() {
        use std::arch::x86_64::{
            _mm_add_epi64, _mm_cmplt_epi8, _mm_cvtsi128_si64, _mm_loadu_si128, _mm_sad_epu8, _mm_set1_epi8,
            _mm_setzero_si128, _mm_srli_si128, _mm_sub_epi8,
        };
        let chunks = ((text.len() - pos) / 16).min(255);
        // SAFETY: SSE2 is part of the x86_64 baseline; each load reads 16 bytes of `text` at `pos`,
        // which `chunks` keeps within it.
        unsafe {
            let mut counts = _mm_setzero_si128();
            for _ in 0..chunks {
                let bytes = _mm_loadu_si128(text.as_ptr().add(pos).cast());
                // As signed bytes, 0x80-0xBF are exactly those below -64 (0xC0); a match is -1.
                counts = _mm_sub_epi8(counts, _mm_cmplt_epi8(bytes, _mm_set1_epi8(-64)));
                pos += 16;
            }
            let sums = _mm_sad_epu8(counts, _mm_setzero_si128());
            let total = _mm_cvtsi128_si64(_mm_add_epi64(sums, _mm_srli_si128::<8>(sums)));
            continuations += usize::try_from(total).unwrap_or(0);
        }
    }
    continuations += text[pos..].iter().filter(|&&byte| (0x80..0xC0).contains(&byte)).count();
    text.len() - continuations
}

/// A code unit of a Python string's storage: 1 (Latin-1), 2 (UCS-2) or 4 bytes (UCS-4).
pub trait StrUnit: Copy {
    /// The unit holding `cp` (which fits: the caller chose the width from the text's widest character).
    fn of(cp: u32) -> Self;

    /// Store the 16 bytes of `bytes` (ASCII where it counts: the caller keeps only those) as 16 units
    /// from `out` on.
    ///
    /// # Safety
    /// `out` must be valid for writing 16 units.
    #[cfg(target_arch = "x86_64")]
    unsafe fn store16(out: *mut Self, bytes: std::arch::x86_64::__m128i);

    /// Copy the ASCII bytes at the front of `text` into `units`, as units; how many.
    fn copy_ascii(text: &[u8], units: &mut [Self]) -> usize {
        let mut count = 0;
        for (unit, &byte) in units.iter_mut().zip(text).take_while(|(_, byte)| byte.is_ascii()) {
            *unit = Self::of(u32::from(byte));
            count += 1;
        }
        count
    }
}

impl StrUnit for u8 {
    #[allow(clippy::cast_possible_truncation)] // fits, by the caller's choice of width
    fn of(cp: u32) -> Self {
        cp as u8
    }

    #[cfg(target_arch = "x86_64")]
    unsafe fn store16(out: *mut Self, bytes: std::arch::x86_64::__m128i) {
        // SAFETY: the caller's: `out` is valid for 16 bytes.
        unsafe { std::arch::x86_64::_mm_storeu_si128(out.cast(), bytes) }
    }

    /// Sixteen bytes at a time (SSE2): each chunk stored whole, then the count moved to its first byte
    /// that ends the run (the bytes stored past it are written over next), so that a short run (a text
    /// with a character beyond ASCII every few bytes) costs no call to `memcpy`.
    #[cfg(target_arch = "x86_64")]
    fn copy_ascii(text: &[u8], units: &mut [Self]) -> usize {
        use std::arch::x86_64::{_mm_loadu_si128, _mm_movemask_epi8, _mm_storeu_si128};
        let mut count = 0;
        while let (Some(chunk), Some(out)) = (text.get(count..count + 16), units.get_mut(count..count + 16)) {
            // SAFETY: SSE2 is part of the x86_64 baseline; the load reads the 16 bytes of `chunk` and the
            // store writes the 16 units of `out`.
            let stop = unsafe {
                let bytes = _mm_loadu_si128(chunk.as_ptr().cast());
                _mm_storeu_si128(out.as_mut_ptr().cast(), bytes);
                _mm_movemask_epi8(bytes)
            };
            if stop != 0 {
                return count + stop.trailing_zeros() as usize;
            }
            count += 16;
        }
        let rest = ascii_prefix(&text[count..]).min(units.len() - count);
        units[count..count + rest].copy_from_slice(&text[count..count + rest]);
        count + rest
    }

    #[cfg(not(target_arch = "x86_64"))]
    fn copy_ascii(text: &[u8], units: &mut [Self]) -> usize {
        let count = ascii_prefix(text).min(units.len());
        units[..count].copy_from_slice(&text[..count]);
        count
    }
}

impl StrUnit for u16 {
    #[allow(clippy::cast_possible_truncation)] // fits, by the caller's choice of width
    fn of(cp: u32) -> Self {
        cp as u16
    }

    #[cfg(target_arch = "x86_64")]
    unsafe fn store16(out: *mut Self, bytes: std::arch::x86_64::__m128i) {
        use std::arch::x86_64::{_mm_setzero_si128, _mm_storeu_si128, _mm_unpackhi_epi8, _mm_unpacklo_epi8};
        // SAFETY: the caller's: `out` is valid for 16 units (32 bytes); SSE2 is part of the x86_64 baseline.
        unsafe {
            let zero = _mm_setzero_si128();
            _mm_storeu_si128(out.cast(), _mm_unpacklo_epi8(bytes, zero));
            _mm_storeu_si128(out.add(8).cast(), _mm_unpackhi_epi8(bytes, zero));
        }
    }

    /// Sixteen bytes at a time, each widened to its unit (SSE2).
    #[cfg(target_arch = "x86_64")]
    fn copy_ascii(text: &[u8], units: &mut [Self]) -> usize {
        use std::arch::x86_64::{
            _mm_loadu_si128, _mm_movemask_epi8, _mm_setzero_si128, _mm_storeu_si128, _mm_unpackhi_epi8,
            _mm_unpacklo_epi8,
        };
        let mut count = 0;
        while let (Some(chunk), Some(out)) = (text.get(count..count + 16), units.get_mut(count..count + 16)) {
            // SAFETY: SSE2 is part of the x86_64 baseline; the load reads the 16 bytes of `chunk` and
            // the two stores write the 16 units (32 bytes) of `out`.
            let ascii = unsafe {
                let bytes = _mm_loadu_si128(chunk.as_ptr().cast());
                let zero = _mm_setzero_si128();
                _mm_storeu_si128(out.as_mut_ptr().cast(), _mm_unpacklo_epi8(bytes, zero));
                _mm_storeu_si128(out.as_mut_ptr().add(8).cast(), _mm_unpackhi_epi8(bytes, zero));
                _mm_movemask_epi8(bytes)
            };
            if ascii != 0 {
                // The units past the first non-ASCII byte are written over next.
                return count + ascii.trailing_zeros() as usize;
            }
            count += 16;
        }
        for (unit, &byte) in units[count..].iter_mut().zip(&text[count..]).take_while(|(_, byte)| byte.is_ascii()) {
            *unit = u16::from(byte);
            count += 1;
        }
        count
    }
}

impl StrUnit for u32 {
    fn of(cp: u32) -> Self {
        cp
    }

    #[cfg(target_arch = "x86_64")]
    unsafe fn store16(out: *mut Self, bytes: std::arch::x86_64::__m128i) {
        use std::arch::x86_64::{
            _mm_setzero_si128, _mm_storeu_si128, _mm_unpackhi_epi16, _mm_unpackhi_epi8, _mm_unpacklo_epi16,
            _mm_unpacklo_epi8,
        };
        // SAFETY: the caller's: `out` is valid for 16 units (64 bytes); SSE2 is part of the x86_64 baseline.
        unsafe {
            let zero = _mm_setzero_si128();
            let (low, high) = (_mm_unpacklo_epi8(bytes, zero), _mm_unpackhi_epi8(bytes, zero));
            _mm_storeu_si128(out.cast(), _mm_unpacklo_epi16(low, zero));
            _mm_storeu_si128(out.add(4).cast(), _mm_unpackhi_epi16(low, zero));
            _mm_storeu_si128(out.add(8).cast(), _mm_unpacklo_epi16(high, zero));
            _mm_storeu_si128(out.add(12).cast(), _mm_unpackhi_epi16(high, zero));
        }
    }
}

/// How many bytes at the front of `text` are ASCII.
#[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))] // `pos` moves in the SSE2 loop only
fn ascii_prefix(text: &[u8]) -> usize {
    let mut pos = 0;
    #[cfg(target_arch = "x86_64")]
    while let Some(chunk) = text.get(pos..pos + 16) {
        use std::arch::x86_64::{_mm_loadu_si128, _mm_movemask_epi8};
        // SAFETY: SSE2 is part of the x86_64 baseline; the load reads the 16 bytes of `chunk`.
        let stop = unsafe { _mm_movemask_epi8(_mm_loadu_si128(chunk.as_ptr().cast())) };
        if stop != 0 {
            return pos + stop.trailing_zeros() as usize;
        }
        pos += 16;
    }
    pos + text[pos..].iter().take_while(|byte| byte.is_ascii()).count()
}

/// Write the characters of the WTF-8 `text` into `units` (`count_chars(text)` of them), one unit each:
/// a Python string's storage filled straight from the decoder's bytes, without Python's UTF-8 decoder
/// (which finds the width again, and widens what it wrote when a wider character comes). Runs of
/// ASCII go through `T::copy_ascii`; a lone surrogate's WTF-8 form becomes its code unit. Returns how
/// many units it wrote (never more than `units` holds).
pub fn widen_wtf8<T: StrUnit>(text: &[u8], units: &mut [T]) -> usize {
    let (mut pos, mut at) = (0, 0);
    while let (Some(&byte), Some(unit)) = (text.get(pos), units.get_mut(at)) {
        if byte >= 0x80 {
            let (cp, length) = wtf8_char(text, pos);
            *unit = T::of(cp);
            at += 1;
            pos += length;
        } else {
            // A run of ASCII (this byte at least), copied a chunk at a time.
            let ascii = T::copy_ascii(&text[pos..], &mut units[at..]);
            pos += ascii;
            at += ascii;
        }
    }
    at
}

/// The code point of the (WTF-8) character at `text[pos]` and its length in bytes; a continuation cut
/// short counts as zero bits (callers pass validated text).
#[inline]
pub(super) fn wtf8_char(text: &[u8], pos: usize) -> (u32, usize) {
    let lead = text[pos];
    let continuation = |offset: usize| u32::from(text.get(pos + offset).copied().unwrap_or(0x80) & 0x3F);
    match lead {
        0..=0x7F => (u32::from(lead), 1),
        0x80..=0xDF => ((u32::from(lead & 0x1F) << 6) | continuation(1), 2),
        0xE0..=0xEF => ((u32::from(lead & 0x0F) << 12) | (continuation(1) << 6) | continuation(2), 3),
        _ => ((u32::from(lead & 0x07) << 18) | (continuation(1) << 12) | (continuation(2) << 6) | continuation(3), 4),
    }
}

/// The code point of the `\u` escape whose four hex digits start at `at` (the `u` is at `at - 1`),
/// joined with a `\uDC00`-`\uDFFF` escape right after it when it is a high surrogate; and how many
/// bytes from the `u` on it took (5 or 11). Digits that are missing or not hex count as 0: callers
/// pass text the scanner validated.
#[inline]
pub(super) fn escaped_code_point(raw: &[u8], at: usize) -> (u32, usize) {
    escape_u(raw, at).unwrap_or((0, 5))
}

/// As [`escaped_code_point`], `None` when the four bytes at `at` are not hex digits (or not there): the
/// scanner's check and the decoding in one step. A surrogate pair is read in one go (the low half's
/// `\u` compared as two bytes at once, its digits by the same table), without a second trip through
/// the caller's loop.
#[inline]
pub(super) fn escape_u(raw: &[u8], at: usize) -> Option<(u32, usize)> {
    let cp = hex4(raw.get(at..at + 4)?)?;
    if (0xD800..0xDC00).contains(&cp) {
        if let Some(next) = raw.get(at + 4..at + 10) {
            if next[..2] == *b"\\u" {
                if let Some(low @ 0xDC00..=0xDFFF) = hex4(&next[2..]) {
                    return Some((0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00), 11));
                }
            }
        }
    }
    Some((cp, 5))
}

/// Each byte's value as a hex digit, -1 for the bytes that are not one.
static HEX_DIGIT: [i8; 256] = {
    let mut table = [-1; 256];
    let mut byte = 0;
    while byte < 256 {
        #[allow(clippy::cast_possible_truncation, clippy::cast_possible_wrap)] // below 16
        match byte as u8 {
            digit @ b'0'..=b'9' => table[byte] = (digit - b'0') as i8,
            digit @ b'a'..=b'f' => table[byte] = (digit - b'a' + 10) as i8,
            digit @ b'A'..=b'F' => table[byte] = (digit - b'A' + 10) as i8,
            _ => {}
        }
        byte += 1;
    }
    table
};

/// The value of four hex digits (the first four bytes of `digits`, which has at least four), `None` when
/// one is not a hex digit. One table look-up a digit and no branch per digit: a digit that is not one is
/// -1, whose sign survives the shifts and ORs, so one test of the sum's sign checks all four.
#[inline]
pub(super) fn hex4(digits: &[u8]) -> Option<u32> {
    let digit = |index: usize| i32::from(HEX_DIGIT[usize::from(digits[index])]);
    let value = (digit(0) << 12) | (digit(1) << 8) | (digit(2) << 4) | digit(3);
    u32::try_from(value).ok()
}

/// Push the code point `cp` as (generalised) UTF-8: a surrogate becomes its 3-byte WTF-8 form.
pub(super) fn push_code_point(out: &mut Vec<u8>, cp: u32) {
    if let Some(ch) = char::from_u32(cp) {
        out.extend_from_slice(ch.encode_utf8(&mut [0; 4]).as_bytes());
    } else {
        let [_, _, high, low] = cp.to_be_bytes();
        out.extend_from_slice(&[0xE0 | (high >> 4), 0x80 | ((high & 0x0F) << 2) | (low >> 6), 0x80 | (low & 0x3F)]);
    }
}

/// Decode the content of a valid JSON string into `out` as WTF-8; true if it held a lone surrogate.
pub fn unescape_into(raw: &[u8], out: &mut Vec<u8>) -> bool {
    let mut has_surrogate = false;
    let mut rest = raw;
    while let Some(backslash) = memchr::memchr(b'\\', rest) {
        out.extend_from_slice(&rest[..backslash]);
        let escape = rest[backslash + 1];
        rest = &rest[backslash + 2..];
        let simple = match escape {
            b'b' => 0x08,
            b'f' => 0x0C,
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            b'u' => {
                let (cp, length) = escaped_code_point(rest, 0);
                rest = &rest[(length - 1).min(rest.len())..];
                has_surrogate |= (0xD800..0xE000).contains(&cp);
                push_code_point(out, cp);
                continue;
            }
            other => other, // '"', '\\' and '/' stand for themselves
        };
        out.push(simple);
    }
    out.extend_from_slice(rest);
    has_surrogate
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wtf8_is_widened_to_its_code_points() {
        use crate::json::{count_chars, widen_wtf8};
        let mut texts: Vec<Vec<u8>> = ["", "abc", "caf\u{e9}", "\u{2014} \u{e9}\u{1f600}x", "\u{10ffff}"]
            .iter()
            .map(|text| text.as_bytes().to_vec())
            .collect();
        for pad in 0..40 {
            texts.push(
                format!("{}\u{e9}{}\u{2014}{}", "a".repeat(pad), "b".repeat(pad % 17), "c".repeat(pad)).into_bytes(),
            );
        }
        texts.push("\u{e9}\u{2014}a".repeat(2000).into_bytes()); // past 255 chunks of 16 bytes
        texts.push(vec![b'a', 0xED, 0xA0, 0x80, b'b']); // a lone surrogate's WTF-8 form
        for text in texts {
            let expected: Vec<u32> = if text.contains(&0xED) {
                vec![u32::from(b'a'), 0xD800, u32::from(b'b')]
            } else {
                std::str::from_utf8(&text).unwrap().chars().map(u32::from).collect()
            };
            assert_eq!(count_chars(&text), expected.len(), "{text:?}");
            let mut wide = vec![0u32; expected.len()];
            widen_wtf8(&text, &mut wide);
            assert_eq!(wide, expected, "{text:?}");
            if expected.iter().all(|&cp| cp <= 0xFFFF) {
                let mut units = vec![0u16; expected.len()];
                widen_wtf8(&text, &mut units);
                assert_eq!(units.iter().map(|&unit| u32::from(unit)).collect::<Vec<_>>(), expected, "{text:?}");
            }
            if expected.iter().all(|&cp| cp <= 0xFF) {
                let mut units = vec![0u8; expected.len()];
                widen_wtf8(&text, &mut units);
                assert_eq!(units.iter().map(|&unit| u32::from(unit)).collect::<Vec<_>>(), expected, "{text:?}");
            }
        }
    }

    #[test]
    fn unescapes_to_wtf8() {
        let decode = |raw: &str| {
            let mut out = Vec::new();
            let surrogate = unescape_into(raw.as_bytes(), &mut out);
            (out, surrogate)
        };
        assert_eq!(decode(r"a\nb\u00e9\/"), ("a\nbé/".as_bytes().to_vec(), false));
        assert_eq!(decode(r"\ud83d\ude00"), ("😀".as_bytes().to_vec(), false));
        assert_eq!(decode(r"\ud800x"), (vec![0xED, 0xA0, 0x80, b'x'], true));
        assert_eq!(decode(r"\udc00\ud800"), (vec![0xED, 0xB0, 0x80, 0xED, 0xA0, 0x80], true));
    }
}

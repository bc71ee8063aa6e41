//! JSON text without Python: a strict RFC 8259 scanner, string unescaping and escaping, and
//! Python's float formatting.
//!
//! The scanner validates as it walks and hands out borrowed pieces of the input (a string's raw
//! content, a number's text, a value's span), so that the envelope is checked without building
//! anything and only `params` are later turned into Python objects (see `codec`). It accepts
//! exactly what `json.loads` accepts with NaN and Infinity refused, so both implementations agree
//! on every byte: lone surrogate escapes are allowed (strings are handled as WTF-8 here), numbers
//! of any length are allowed (the longest integer is recorded for Python's digit limit), and the
//! nesting depth is bounded by `max_depth`, and by the stack left to the thread (`stack`), before
//! any recursion.

use std::borrow::Cow;

use crate::decimal::eisel_lemire;
use crate::errors::SyntaxError;
use crate::stack::StackFloor;

type Result<T> = std::result::Result<T, SyntaxError>;

/// The kind of a JSON value, as far as the envelope needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Null,
    Bool,
    Integer,
    Float,
    String,
    Array,
    Object,
}

/// A string's content between its quotes, exactly as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JsonStr<'a> {
    pub raw: &'a str,
    /// Whether `raw` contains a backslash escape (if not, `raw` is already the decoded text).
    pub escaped: bool,
}

impl<'a> JsonStr<'a> {
    /// The decoded string as WTF-8 (UTF-8 that may hold lone surrogates), and whether it does.
    pub fn decode(&self) -> (Cow<'a, [u8]>, bool) {
        if !self.escaped {
            return (Cow::Borrowed(self.raw.as_bytes()), false);
        }
        let mut out = Vec::with_capacity(self.raw.len());
        let has_surrogate = unescape_into(self.raw.as_bytes(), &mut out);
        (Cow::Owned(out), has_surrogate)
    }

    /// Whether the decoded string equals `expected`.
    #[inline]
    pub fn decodes_to(&self, expected: &str) -> bool {
        if self.escaped {
            self.decode().0.as_ref() == expected.as_bytes()
        } else {
            self.raw == expected
        }
    }
}

/// Bytes that stand for themselves inside a JSON string: all but `"`, `\\` and control characters.
static ORDINARY_IN_STRING: [bool; 256] = {
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
fn skip_ordinary<const STOP_AT_ED: bool>(bytes: &[u8], mut pos: usize) -> usize {
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

    /// Copy the ASCII bytes at the front of `text` into `units`, as units (stopping at a backslash too
    /// with `STOP_AT_BACKSLASH`); how many.
    fn copy_ascii<const STOP_AT_BACKSLASH: bool>(text: &[u8], units: &mut [Self]) -> usize {
        let mut count = 0;
        for (unit, &byte) in units.iter_mut().zip(text).take_while(|(_, &byte)| plain::<STOP_AT_BACKSLASH>(byte)) {
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

    fn copy_ascii<const STOP_AT_BACKSLASH: bool>(text: &[u8], units: &mut [Self]) -> usize {
        let count = ascii_prefix::<STOP_AT_BACKSLASH>(text).min(units.len());
        units[..count].copy_from_slice(&text[..count]);
        count
    }
}

impl StrUnit for u16 {
    #[allow(clippy::cast_possible_truncation)] // fits, by the caller's choice of width
    fn of(cp: u32) -> Self {
        cp as u16
    }

    /// Sixteen bytes at a time, each widened to its unit (SSE2).
    #[cfg(target_arch = "x86_64")]
    fn copy_ascii<const STOP_AT_BACKSLASH: bool>(text: &[u8], units: &mut [Self]) -> usize {
        use std::arch::x86_64::{
            _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_set1_epi8, _mm_setzero_si128, _mm_storeu_si128,
            _mm_unpackhi_epi8, _mm_unpacklo_epi8,
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
                let backslashes =
                    if STOP_AT_BACKSLASH { _mm_movemask_epi8(_mm_cmpeq_epi8(bytes, _mm_set1_epi8(0x5C))) } else { 0 };
                _mm_movemask_epi8(bytes) | backslashes
            };
            if ascii != 0 {
                // The units past the first non-ASCII byte are written over next.
                return count + ascii.trailing_zeros() as usize;
            }
            count += 16;
        }
        for (unit, &byte) in
            units[count..].iter_mut().zip(&text[count..]).take_while(|(_, &byte)| plain::<STOP_AT_BACKSLASH>(byte))
        {
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
}

/// Whether `byte` is ASCII (and, with `STOP_AT_BACKSLASH`, not a backslash).
#[inline]
fn plain<const STOP_AT_BACKSLASH: bool>(byte: u8) -> bool {
    byte.is_ascii() && !(STOP_AT_BACKSLASH && byte == b'\\')
}

/// How many bytes at the front of `text` are ASCII (and, with `STOP_AT_BACKSLASH`, not a backslash).
#[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))] // `pos` moves in the SSE2 loop only
fn ascii_prefix<const STOP_AT_BACKSLASH: bool>(text: &[u8]) -> usize {
    let mut pos = 0;
    #[cfg(target_arch = "x86_64")]
    while let Some(chunk) = text.get(pos..pos + 16) {
        use std::arch::x86_64::{_mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_set1_epi8};
        // SAFETY: SSE2 is part of the x86_64 baseline; the load reads the 16 bytes of `chunk`.
        let stop = unsafe {
            let bytes = _mm_loadu_si128(chunk.as_ptr().cast());
            let backslashes =
                if STOP_AT_BACKSLASH { _mm_movemask_epi8(_mm_cmpeq_epi8(bytes, _mm_set1_epi8(0x5C))) } else { 0 };
            _mm_movemask_epi8(bytes) | backslashes
        };
        if stop != 0 {
            return pos + stop.trailing_zeros() as usize;
        }
        pos += 16;
    }
    pos + text[pos..].iter().take_while(|&&byte| plain::<STOP_AT_BACKSLASH>(byte)).count()
}

/// Write the characters of the WTF-8 `text` into `units` (`count_chars(text)` of them), one unit each:
/// a Python string's storage filled straight from the decoder's bytes, without Python's UTF-8 decoder
/// (which finds the width again, and widens what it wrote when a wider character comes). Runs of
/// ASCII go through `T::copy_ascii`; a lone surrogate's WTF-8 form becomes its code unit. Returns how
/// many units it wrote (never more than `units` holds).
pub fn widen_wtf8<T: StrUnit>(text: &[u8], units: &mut [T]) -> usize {
    fill_units::<T, false>(text, units)
}

/// The code point of the (WTF-8) character at `text[pos]` and its length in bytes; a continuation cut
/// short counts as zero bits (callers pass validated text).
#[inline]
fn wtf8_char(text: &[u8], pos: usize) -> (u32, usize) {
    let lead = text[pos];
    let continuation = |offset: usize| u32::from(text.get(pos + offset).copied().unwrap_or(0x80) & 0x3F);
    match lead {
        0..=0x7F => (u32::from(lead), 1),
        0x80..=0xDF => ((u32::from(lead & 0x1F) << 6) | continuation(1), 2),
        0xE0..=0xEF => ((u32::from(lead & 0x0F) << 12) | (continuation(1) << 6) | continuation(2), 3),
        _ => ((u32::from(lead & 0x07) << 18) | (continuation(1) << 12) | (continuation(2) << 6) | continuation(3), 4),
    }
}

/// Write the text of a JSON string's content `raw` (as [`Scanner::string_shape`] validated and measured
/// it) into `units`, one unit a character: the escapes resolved (a surrogate pair escape is one
/// character, a lone surrogate escape its code unit), the runs between them widened as by [`widen_wtf8`].
/// Returns how many units it wrote (never more than `units` holds: `string_shape`'s `chars` of them
/// when `units` has room).
///
/// This is the decoder's second pass over a long string: the first measured it, so the text goes
/// straight into the Python string's storage, with no buffer of the whole text in between.
pub fn unescape_units<T: StrUnit>(raw: &[u8], units: &mut [T]) -> usize {
    fill_units::<T, true>(raw, units)
}

/// [`widen_wtf8`] (without `ESCAPES`) and [`unescape_units`] (with): one loop over runs of ASCII
/// (copied a chunk at a time), characters beyond ASCII and (with `ESCAPES`) escapes, which are
/// frequent (source text has an escaped newline every line).
fn fill_units<T: StrUnit, const ESCAPES: bool>(raw: &[u8], units: &mut [T]) -> usize {
    let (mut pos, mut at) = (0, 0);
    while pos < raw.len() && at < units.len() {
        let ascii = T::copy_ascii::<ESCAPES>(&raw[pos..], &mut units[at..]);
        pos += ascii;
        at += ascii;
        if pos == raw.len() || at == units.len() {
            break;
        }
        if !ESCAPES || raw[pos] != b'\\' {
            let (cp, length) = wtf8_char(raw, pos);
            units[at] = T::of(cp);
            at += 1;
            pos += length;
            continue;
        }
        pos += 1;
        let (cp, length) = match raw.get(pos) {
            Some(b'b') => (0x08, 1),
            Some(b'f') => (0x0C, 1),
            Some(b'n') => (u32::from(b'\n'), 1),
            Some(b'r') => (u32::from(b'\r'), 1),
            Some(b't') => (u32::from(b'\t'), 1),
            Some(b'u') => escaped_code_point(raw, pos + 1),
            // '"', '\\' and '/' stand for themselves.
            Some(&other) => (u32::from(other), 1),
            None => break,
        };
        units[at] = T::of(cp);
        at += 1;
        pos = (pos + length).min(raw.len());
    }
    at
}

/// The code point of the `\u` escape whose four hex digits start at `at` (the `u` is at `at - 1`),
/// joined with a `\uDC00`-`\uDFFF` escape right after it when it is a high surrogate; and how many
/// bytes from the `u` on it took (5 or 11). Digits that are missing or not hex count as 0: callers
/// pass text the scanner validated.
fn escaped_code_point(raw: &[u8], at: usize) -> (u32, usize) {
    let hex = |from: usize| raw.get(from..from + 4).filter(|digits| is_hex4(digits)).map(hex4);
    let cp = hex(at).unwrap_or(0);
    if (0xD800..0xDC00).contains(&cp) && raw.get(at + 4..at + 6) == Some(b"\\u") {
        if let Some(low @ 0xDC00..=0xDFFF) = hex(at + 6) {
            return (0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00), 11);
        }
    }
    (cp, 5)
}

/// A JSON string as [`Scanner::string_shape`] measured it, for [`unescape_units`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StrShape<'a> {
    /// The content between the quotes, exactly as written (escapes and all).
    pub raw: &'a str,
    /// The characters of its text (Python's `len`).
    pub chars: usize,
    /// How Python stores the text (exact: the narrowest kind that holds it).
    pub width: Width,
    /// Whether the text holds a lone surrogate (only an escape writes one).
    pub has_surrogate: bool,
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
fn special_mask_of<const STOP_AT_ED: bool>(bytes: std::arch::x86_64::__m128i) -> i32 {
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

/// A number as `Scanner::number_value` read it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Number<'a> {
    /// An integer of at most 18 digits.
    Int(i64),
    /// A number with a fraction or an exponent whose value was exact to compute.
    Float(f64),
    /// Any other number, as written: a longer integer, or a float for `str::parse`.
    Text { text: &'a str, integer: bool },
}

/// 10^0 to 10^22: the powers of ten that are doubles exactly.
const EXACT_POWERS_OF_TEN: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20,
    1e21, 1e22,
];

/// A cursor over one JSON text that validates as it goes.
pub struct Scanner<'a> {
    text: &'a str,
    pos: usize,
    depth: usize,
    max_depth: usize,
    /// Where this thread's stack must stop: a container is entered only above it.
    stack: StackFloor,
    /// Digits of the longest integer literal seen (Python refuses to parse very long ones).
    pub longest_integer: usize,
}

impl<'a> Scanner<'a> {
    pub fn new(text: &'a str, max_depth: usize) -> Self {
        Self { text, pos: 0, depth: 0, max_depth, stack: StackFloor::new(), longest_integer: 0 }
    }

    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    fn error(&self, what: &'static str) -> SyntaxError {
        SyntaxError { what, position: self.pos }
    }

    pub fn skip_whitespace(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.bytes().get(self.pos) {
            self.pos += 1;
        }
    }

    /// The next byte after any whitespace, not consumed.
    pub fn peek(&mut self) -> Option<u8> {
        self.skip_whitespace();
        self.bytes().get(self.pos).copied()
    }

    /// The current position, after any whitespace: where the next value starts.
    pub fn value_start(&mut self) -> usize {
        self.skip_whitespace();
        self.pos
    }

    /// The text not read yet (whitespace included).
    #[inline]
    pub fn rest(&self) -> &'a [u8] {
        &self.bytes()[self.pos..]
    }

    /// Consume `literal` if the text goes on with exactly these bytes (no whitespace skipped first);
    /// `literal` must be whole tokens (`"name":`, `"2.0"`), so that what follows is scanned as usual.
    #[inline]
    pub fn eat(&mut self, literal: &[u8]) -> bool {
        let matched = self.rest().starts_with(literal);
        if matched {
            self.pos += literal.len();
        }
        matched
    }

    /// The text from `start` to the current position.
    pub fn span_from(&self, start: usize) -> &'a str {
        &self.text[start..self.pos]
    }

    /// Succeeds only if nothing but whitespace is left.
    pub fn finish(&mut self) -> Result<()> {
        match self.peek() {
            None => Ok(()),
            Some(_) => Err(self.error("extra data after the JSON value")),
        }
    }

    fn expect(&mut self, byte: u8, what: &'static str) -> Result<()> {
        if self.peek() == Some(byte) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.error(what))
        }
    }

    /// Consume `[` or `{` and enter it; `Ok(true)` if it has items, `Ok(false)` if it was empty
    /// (then its closing bracket is consumed too).
    pub fn open(&mut self, bracket: u8) -> Result<bool> {
        self.expect(bracket, "expected '[' or '{'")?;
        if self.depth == self.max_depth {
            return Err(self.error("nesting deeper than the limit"));
        }
        // The only recursion of the walks over JSON text (here and in `codec`) is through `open`.
        if !self.stack.has_room(self.depth) {
            return Err(self.error("nesting deeper than this thread's stack allows"));
        }
        self.depth += 1;
        let close = if bracket == b'[' { b']' } else { b'}' };
        if self.peek() == Some(close) {
            self.pos += 1;
            self.depth -= 1;
            return Ok(false);
        }
        Ok(true)
    }

    /// After an item: `Ok(true)` if a `,` announces another, `Ok(false)` at the closing bracket.
    pub fn more(&mut self, close: u8) -> Result<bool> {
        match self.peek() {
            Some(b',') => {
                self.pos += 1;
                Ok(true)
            }
            Some(byte) if byte == close => {
                self.pos += 1;
                self.depth -= 1;
                Ok(false)
            }
            _ => Err(self.error("expected ',' or a closing bracket")),
        }
    }

    /// An object member's name and the `:` after it.
    pub fn key(&mut self) -> Result<JsonStr<'a>> {
        if self.peek() != Some(b'"') {
            return Err(self.error("expected a member name in double quotes"));
        }
        let key = self.string()?;
        self.expect(b':', "expected ':' after a member name")?;
        Ok(key)
    }

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
                        Some(b'u') if bytes.get(pos + 1..pos + 5).is_some_and(is_hex4) => pos += 5,
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
    /// the cursor has not moved (what `out` holds then is of no use), and [`string_shape`](Self::string_shape)
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
                Some(b'u') if bytes.get(pos + 1..pos + 5).is_some_and(is_hex4) => {
                    let mut cp = hex4(&bytes[pos + 1..pos + 5]);
                    pos += 5;
                    if (0xD800..0xDC00).contains(&cp)
                        && bytes.get(pos..pos + 2) == Some(b"\\u")
                        && bytes.get(pos + 2..pos + 6).is_some_and(is_hex4)
                    {
                        let low = hex4(&bytes[pos + 2..pos + 6]);
                        if (0xDC00..0xE000).contains(&low) {
                            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
                            pos += 6;
                        }
                    }
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

    /// A string measured without being unescaped: the cursor is at its opening quote. Accepts exactly
    /// what [`string`](Self::string) accepts, with the same errors, in one walk that validates it and
    /// counts its characters and finds its [`Width`], so that the caller can make the Python string at
    /// its final size and kind and fill it with [`unescape_units`] (a second walk, over `raw` only).
    pub fn string_shape(&mut self) -> Result<StrShape<'a>> {
        let bytes = self.bytes();
        let start = self.pos + 1;
        // `escaped_bytes`: the bytes of the escapes beyond one a character, so that the characters are
        // those of the whole content (one count, a chunk at a time) less these.
        let (mut widest, mut width, mut has_surrogate, mut escaped_bytes) = (0, Width::Ascii, false, 0);
        // A local cursor (not `self.pos`) lets the loop keep it in a register.
        let mut pos = start;
        loop {
            pos = skip_ordinary_widest(bytes, pos, &mut widest);
            match bytes.get(pos) {
                Some(b'"') => break,
                Some(b'\\') => {}
                None => return Err(SyntaxError { what: "unterminated string", position: pos }),
                Some(_) => return Err(SyntaxError { what: "control character in string", position: pos }),
            }
            // At a backslash.
            pos += 1;
            match bytes.get(pos) {
                Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => {
                    pos += 1;
                    escaped_bytes += 1;
                }
                Some(b'u') if bytes.get(pos + 1..pos + 5).is_some_and(is_hex4) => {
                    let (cp, length) = escaped_code_point(bytes, pos + 1);
                    has_surrogate |= (0xD800..0xE000).contains(&cp);
                    width = width.max(Width::of_code_point(cp));
                    pos += length;
                    escaped_bytes += length;
                }
                _ => return Err(SyntaxError { what: "invalid escape in string", position: pos }),
            }
        }
        self.pos = pos + 1;
        let raw = &self.text[start..pos];
        let chars = if widest < 0x80 { raw.len() } else { count_chars(raw.as_bytes()) } - escaped_bytes;
        Ok(StrShape { raw, chars, width: width.max(Width::of_utf8(widest)), has_surrogate })
    }

    /// A number; returns its text and whether it is an integer (no fraction, no exponent).
    pub fn number(&mut self) -> Result<(&'a str, bool)> {
        let bytes = self.bytes();
        let start = self.pos;
        if bytes.get(self.pos) == Some(&b'-') {
            self.pos += 1;
        }
        let digits_start = self.pos;
        match bytes.get(self.pos) {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => self.skip_digits(),
            _ => return Err(self.error("invalid number")),
        }
        let integer_digits = self.pos - digits_start;
        let mut integer = true;
        if bytes.get(self.pos) == Some(&b'.') {
            integer = false;
            self.pos += 1;
            self.require_digits()?;
        }
        if let Some(b'e' | b'E') = bytes.get(self.pos) {
            integer = false;
            self.pos += 1;
            if let Some(b'+' | b'-') = bytes.get(self.pos) {
                self.pos += 1;
            }
            self.require_digits()?;
        }
        if integer {
            self.longest_integer = self.longest_integer.max(integer_digits);
        }
        Ok((&self.text[start..self.pos], integer))
    }

    /// A number, with its value when a machine number holds it exactly: the cursor is at its
    /// first byte. Accepts exactly what `number` accepts, in one walk over the digits that also
    /// gathers them (eight at a time: `gather_digits`): the codec no longer reads them twice, once
    /// here and once in `str::parse`.
    pub fn number_value(&mut self) -> Result<Number<'a>> {
        let bytes = self.bytes();
        let start = self.pos;
        // A local cursor: the loops keep it in a register.
        let mut pos = start;
        let negative = bytes.get(pos) == Some(&b'-');
        if negative {
            pos += 1;
        }
        let mut mantissa: u64 = 0;
        let digits_start = pos;
        match bytes.get(pos) {
            Some(b'0') => pos += 1,
            Some(b'1'..=b'9') => pos = gather_digits(bytes, pos, &mut mantissa),
            _ => return Err(SyntaxError { what: "invalid number", position: pos }),
        }
        let integer_digits = pos - digits_start;
        let mut fraction_digits = 0;
        if bytes.get(pos) == Some(&b'.') {
            pos += 1;
            let fraction_start = pos;
            pos = gather_digits(bytes, pos, &mut mantissa);
            fraction_digits = pos - fraction_start;
            if fraction_digits == 0 {
                return Err(SyntaxError { what: "invalid number", position: pos });
            }
        }
        let mut exponent: i64 = 0;
        let has_exponent = matches!(bytes.get(pos), Some(b'e' | b'E'));
        if has_exponent {
            pos += 1;
            let negative_exponent = bytes.get(pos) == Some(&b'-');
            if let Some(b'+' | b'-') = bytes.get(pos) {
                pos += 1;
            }
            let exponent_start = pos;
            while let Some(&digit @ b'0'..=b'9') = bytes.get(pos) {
                // Saturates far beyond any double's range; such numbers go to `str::parse`.
                exponent = (exponent * 10 + i64::from(digit - b'0')).min(1 << 20);
                pos += 1;
            }
            if pos == exponent_start {
                return Err(SyntaxError { what: "invalid number", position: pos });
            }
            if negative_exponent {
                exponent = -exponent;
            }
        }
        self.pos = pos;
        // The text is sliced only for the numbers handed out as text (a slice of a `str` checks its ends).
        let text = || &self.text[start..pos];
        if fraction_digits == 0 && !has_exponent {
            self.longest_integer = self.longest_integer.max(integer_digits);
            // At most 18 digits: the mantissa did not wrap, and fits an `i64` with its sign.
            if integer_digits <= 18 {
                #[allow(clippy::cast_possible_wrap)] // below 10^18
                let magnitude = mantissa as i64;
                return Ok(Number::Int(if negative { -magnitude } else { magnitude }));
            }
            return Ok(Number::Text { text: text(), integer: true });
        }
        let scale = exponent - i64::try_from(fraction_digits).unwrap_or(i64::MAX);
        if integer_digits + fraction_digits <= 19 {
            // Clinger's fast path: a mantissa below 2^53 and a power of ten up to 10^22 are both
            // doubles exactly, so one multiplication or division rounds correctly, as parsing must.
            let value = if mantissa <= 1 << 53 && (-22..=22).contains(&scale) {
                #[allow(clippy::cast_precision_loss)] // below 2^53: exact
                let magnitude = mantissa as f64;
                #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // within -22..=22
                let power = EXACT_POWERS_OF_TEN[scale.unsigned_abs() as usize];
                Some(if scale < 0 { magnitude / power } else { magnitude * power })
            } else {
                // The full-precision numbers (17 digits) that repr() writes: Eisel-Lemire, from the
                // digits gathered above rather than a second parse of the text.
                eisel_lemire(scale, mantissa)
            };
            if let Some(value) = value {
                return Ok(Number::Float(if negative { -value } else { value }));
            }
        }
        Ok(Number::Text { text: text(), integer: false })
    }

    fn skip_digits(&mut self) {
        while self.bytes().get(self.pos).is_some_and(u8::is_ascii_digit) {
            self.pos += 1;
        }
    }

    fn require_digits(&mut self) -> Result<()> {
        let start = self.pos;
        self.skip_digits();
        if self.pos == start {
            Err(self.error("invalid number"))
        } else {
            Ok(())
        }
    }

    fn literal(&mut self, word: &'static [u8]) -> Result<()> {
        if self.bytes()[self.pos..].starts_with(word) {
            self.pos += word.len();
            Ok(())
        } else {
            Err(self.error("expected a value"))
        }
    }

    /// Validate and skip one value of any kind.
    pub fn value(&mut self) -> Result<Kind> {
        match self.peek() {
            Some(b'"') => self.string().map(|_| Kind::String),
            Some(b'-' | b'0'..=b'9') => {
                self.number().map(|(_, integer)| if integer { Kind::Integer } else { Kind::Float })
            }
            Some(b'n') => self.literal(b"null").map(|()| Kind::Null),
            Some(b't') => self.literal(b"true").map(|()| Kind::Bool),
            Some(b'f') => self.literal(b"false").map(|()| Kind::Bool),
            Some(b'[') => {
                if self.open(b'[')? {
                    loop {
                        self.value()?;
                        if !self.more(b']')? {
                            break;
                        }
                    }
                }
                Ok(Kind::Array)
            }
            Some(b'{') => {
                if self.open(b'{')? {
                    loop {
                        self.key()?;
                        self.value()?;
                        if !self.more(b'}')? {
                            break;
                        }
                    }
                }
                Ok(Kind::Object)
            }
            _ => Err(self.error("expected a value")),
        }
    }
}

/// Append the decimal digits from `pos` on to `mantissa` (which wraps past 19 digits: callers
/// count the digits); where they stop. Eight at a time while eight are digits (SWAR, as
/// `fast_float` does), and the last one to seven from the same load of eight bytes when there
/// are eight left in the text; one at a time only near its end.
#[inline]
fn gather_digits(bytes: &[u8], mut pos: usize, mantissa: &mut u64) -> usize {
    while let Some(chunk) = bytes.get(pos..pos + 8) {
        let word = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
        let not_digits = not_digits(word);
        if not_digits == 0 {
            *mantissa = mantissa.wrapping_mul(100_000_000).wrapping_add(u64::from(digits_value(word)));
            pos += 8;
            continue;
        }
        // The text's first byte is the word's lowest: the digits before the first other byte are
        // moved to the top of the word, below them '0's, and the eight read as one number.
        let count = not_digits.trailing_zeros() / 8;
        if count > 0 {
            let padded = (word << (64 - 8 * count)) | (0x3030_3030_3030_3030 >> (8 * count));
            *mantissa =
                mantissa.wrapping_mul(POWERS_OF_TEN_U64[count as usize]).wrapping_add(u64::from(digits_value(padded)));
        }
        return pos + count as usize;
    }
    while let Some(&digit @ b'0'..=b'9') = bytes.get(pos) {
        *mantissa = mantissa.wrapping_mul(10).wrapping_add(u64::from(digit - b'0'));
        pos += 1;
    }
    pos
}

/// 10^0 to 10^7.
const POWERS_OF_TEN_U64: [u64; 8] = [1, 10, 100, 1_000, 10_000, 100_000, 1_000_000, 10_000_000];

const ONES: u64 = 0x0101_0101_0101_0101;

/// The top bit of each byte of `word` (eight bytes of text, the first the lowest) that is not an
/// ASCII digit, at least up to the first one: a byte below '0' borrows, one above '9' carries into
/// its top bit, and a digit neither borrows nor carries, so the lowest bit set is the first non-digit's.
#[inline]
fn not_digits(word: u64) -> u64 {
    let below = word.wrapping_sub(0x30 * ONES);
    let above = word.wrapping_add(0x46 * ONES);
    (below | above) & (0x80 * ONES)
}

/// The value of eight ASCII digits read as a little-endian word.
#[inline]
fn digits_value(word: u64) -> u32 {
    let digits = word.wrapping_sub(0x30 * ONES);
    // Pairs, then quadruples, then the eight: each step multiplies the higher half (the later
    // digit in little-endian order is the lower one) and adds.
    let pairs = digits.wrapping_mul(10).wrapping_add(digits >> 8) & 0x00FF_00FF_00FF_00FF;
    let quads = pairs.wrapping_mul(100).wrapping_add(pairs >> 16) & 0x0000_FFFF_0000_FFFF;
    let eight = quads.wrapping_mul(10_000).wrapping_add(quads >> 32) & 0xFFFF_FFFF;
    #[allow(clippy::cast_possible_truncation)] // below 10^8
    let eight = eight as u32;
    eight
}

/// The value of eight ASCII digits read as a little-endian word, if all eight are digits.
#[cfg(test)]
fn eight_digits(word: u64) -> Option<u32> {
    (not_digits(word) == 0).then(|| digits_value(word))
}

fn is_hex4(digits: &[u8]) -> bool {
    digits.iter().all(u8::is_ascii_hexdigit)
}

fn hex4(digits: &[u8]) -> u32 {
    digits.iter().fold(0, |acc, &digit| (acc << 4) | char::from(digit).to_digit(16).unwrap_or(0))
}

/// Push the code point `cp` as (generalised) UTF-8: a surrogate becomes its 3-byte WTF-8 form.
fn push_code_point(out: &mut Vec<u8>, cp: u32) {
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
                let mut cp = hex4(&rest[..4]);
                rest = &rest[4..];
                if (0xD800..0xDC00).contains(&cp) && rest.len() >= 6 && rest.starts_with(b"\\u") {
                    let low = hex4(&rest[2..6]);
                    if (0xDC00..0xE000).contains(&low) {
                        cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
                        rest = &rest[6..];
                    }
                }
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

/// Append ASCII `text` as a JSON string, quotes included, as `write_escaped_str` would.
///
/// Most strings a payload holds are short ASCII with nothing to escape (keys, names, enum-like
/// values). Up to 32 bytes, they are checked and copied as two overlapping fixed-size pieces (from
/// 8 bytes on, loaded once into SSE2 registers, tested there and stored from them; below, words
/// tested as SWAR), with no loop and no call to `memcpy`. Longer strings, and those with a byte to
/// escape, go to `write_escaped_code_points` (ASCII is Latin-1 too), which needs no look for WTF-8
/// surrogates.
#[inline]
pub fn write_ascii_str(out: &mut Vec<u8>, text: &[u8]) {
    let len = text.len();
    #[cfg(target_arch = "x86_64")]
    if (8..=32).contains(&len) {
        out.reserve(len + 2);
        // SAFETY: `reserve` made room for `len + 2` bytes past the length, all written before
        // `set_len` if the text needs no escape.
        unsafe {
            let target = out.as_mut_ptr().add(out.len());
            if store_short_plain(text, target.add(1)) {
                *target = b'"';
                *target.add(len + 1) = b'"';
                out.set_len(out.len() + len + 2);
                return;
            }
        }
        write_long_ascii_str(out, text);
        return;
    }
    if len > 32 || needs_escape_short(text) {
        write_long_ascii_str(out, text);
        return;
    }
    out.reserve(len + 2);
    let start = out.len();
    // SAFETY: `reserve` made room for `len + 2` bytes past `start`, all written before `set_len`.
    unsafe {
        let target = out.as_mut_ptr().add(start);
        *target = b'"';
        copy_short(text, target.add(1));
        *target.add(len + 1) = b'"';
        out.set_len(start + len + 2);
    }
}

/// `write_ascii_str` for a text longer than 32 bytes or with a byte to escape: out of line, so
/// that the short texts' path stays small enough to be inlined where strings are written.
#[inline(never)]
fn write_long_ascii_str(out: &mut Vec<u8>, text: &[u8]) {
    debug_assert!(text.is_ascii(), "write_ascii_str takes ASCII");
    write_escaped_code_points(out, text);
}

/// If ASCII `text` (8 to 32 bytes) needs no escape, copy it to `target` and say so: its first and
/// last 8 or 16 bytes (overlapping) are loaded once, tested with SSE2, and stored as they are.
///
/// # Safety
/// `text` holds 8 to 32 bytes and `target` has room for as many.
#[cfg(target_arch = "x86_64")]
#[inline]
unsafe fn store_short_plain(text: &[u8], target: *mut u8) -> bool {
    use std::arch::x86_64::{_mm_loadl_epi64, _mm_loadu_si128, _mm_storel_epi64, _mm_storeu_si128};
    let len = text.len();
    let source = text.as_ptr();
    // SAFETY: SSE2 is part of the x86_64 baseline; the loads read inside `text` (two pieces of 16
    // or 8 bytes, overlapping, never past its end) and the stores write inside the `len` bytes at
    // `target` (the caller's). An 8-byte load fills the upper 8 bytes with NULs: only the lower 8
    // bytes' bits of the mask are looked at.
    unsafe {
        if len >= 16 {
            let (head, tail) = (_mm_loadu_si128(source.cast()), _mm_loadu_si128(source.add(len - 16).cast()));
            if special_mask_of::<false>(head) | special_mask_of::<false>(tail) != 0 {
                return false;
            }
            _mm_storeu_si128(target.cast(), head);
            _mm_storeu_si128(target.add(len - 16).cast(), tail);
        } else {
            let (head, tail) = (_mm_loadl_epi64(source.cast()), _mm_loadl_epi64(source.add(len - 8).cast()));
            if (special_mask_of::<false>(head) | special_mask_of::<false>(tail)) & 0xFF != 0 {
                return false;
            }
            _mm_storel_epi64(target.cast(), head);
            _mm_storel_epi64(target.add(len - 8).cast(), tail);
        }
    }
    true
}

/// Append `text`, a number's digits or another short text, without a call to `memcpy` when it is
/// at most 32 bytes long.
#[inline]
pub fn write_short(out: &mut Vec<u8>, text: &[u8]) {
    if text.len() > 32 {
        out.extend_from_slice(text);
        return;
    }
    out.reserve(32);
    // SAFETY: `reserve` made room for the text, all of it written before `set_len`.
    unsafe {
        copy_short(text, out.as_mut_ptr().add(out.len()));
        out.set_len(out.len() + text.len());
    }
}

/// Copy `source` (at most 32 bytes) to `target` as two overlapping fixed-size pieces: no loop and
/// no call to `memcpy`, which costs more than the copy for such short texts.
///
/// # Safety
/// `target` has room for `source.len()` bytes.
#[inline]
unsafe fn copy_short(source: &[u8], target: *mut u8) {
    let len = source.len();
    debug_assert!(len <= 32, "copy_short copies at most 32 bytes");
    let from = source.as_ptr();
    // SAFETY: each copy reads inside `source` (the pieces overlap, never exceed it) and writes
    // inside the `len` bytes at `target` (the caller's).
    unsafe {
        match len {
            16..=32 => {
                std::ptr::copy_nonoverlapping(from, target, 16);
                std::ptr::copy_nonoverlapping(from.add(len - 16), target.add(len - 16), 16);
            }
            8..=15 => {
                std::ptr::copy_nonoverlapping(from, target, 8);
                std::ptr::copy_nonoverlapping(from.add(len - 8), target.add(len - 8), 8);
            }
            4..=7 => {
                std::ptr::copy_nonoverlapping(from, target, 4);
                std::ptr::copy_nonoverlapping(from.add(len - 4), target.add(len - 4), 4);
            }
            1..=3 => {
                *target = *from;
                *target.add(len / 2) = *from.add(len / 2);
                *target.add(len - 1) = *from.add(len - 1);
            }
            _ => {}
        }
    }
}

/// Whether ASCII `text` of at most 32 bytes holds a byte that a JSON string escapes: a control
/// character, `"` or `\\`.
#[inline]
fn needs_escape_short(text: &[u8]) -> bool {
    let word = |at: usize| u64::from_le_bytes(text[at..at + 8].try_into().expect("8 bytes"));
    match text.len() {
        0 => false,
        len @ 1..=3 => {
            [text[0], text[len / 2], text[len - 1]].iter().any(|&byte| !ORDINARY_IN_STRING[usize::from(byte)])
        }
        len @ 4..=7 => {
            let half = |at: usize| u64::from(u32::from_le_bytes(text[at..at + 4].try_into().expect("4 bytes")));
            word_needs_escape(half(0) | half(len - 4) << 32)
        }
        len @ 8..=16 => word_needs_escape(word(0)) || word_needs_escape(word(len - 8)),
        len => {
            word_needs_escape(word(0))
                || word_needs_escape(word(8))
                || word_needs_escape(word(len - 16))
                || word_needs_escape(word(len - 8))
        }
    }
}

/// Whether a word of eight ASCII bytes holds a control character, `"` or `\\` (the classic
/// "has a byte less than n" and "has a zero byte" tests: exact as yes-or-no answers).
#[inline]
fn word_needs_escape(word: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let control = word.wrapping_sub(0x20 * ONES) & !word;
    let quote = (word ^ (0x22 * ONES)).wrapping_sub(ONES) & !(word ^ (0x22 * ONES));
    let backslash = (word ^ (0x5C * ONES)).wrapping_sub(ONES) & !(word ^ (0x5C * ONES));
    (control | quote | backslash) & HIGH != 0
}

/// Append `text` (WTF-8) as a JSON string, quotes included, escaped as Python's `json` does with
/// `ensure_ascii=False`; a lone surrogate is written as its `\udxxx` escape.
pub fn write_escaped_str(out: &mut Vec<u8>, text: &[u8]) {
    out.reserve(text.len() + 2);
    out.push(b'"');
    let mut run_start = 0;
    let mut i = 0;
    loop {
        i = skip_ordinary::<true>(text, i);
        let Some(&byte) = text.get(i) else { break };
        // In WTF-8 a surrogate is 0xED followed by 0xA0..=0xBF (UTF-8 allows only 0x80..=0x9F there).
        let is_surrogate = byte == 0xED && text.get(i + 1).is_some_and(|&next| next >= 0xA0);
        if byte == 0xED && !is_surrogate {
            i += 1;
            continue;
        }
        out.extend_from_slice(&text[run_start..i]);
        if is_surrogate {
            let code_point = 0xD000 | (u32::from(text[i + 1] & 0x3F) << 6) | u32::from(text[i + 2] & 0x3F);
            write_unicode_escape(out, code_point);
            i += 3;
        } else {
            write_ascii_escape(out, byte);
            i += 1;
        }
        run_start = i;
    }
    out.extend_from_slice(&text[run_start..]);
    out.push(b'"');
}

/// Append a JSON string of Unicode code points (a Python `str`'s own storage: Latin-1, UCS-2 or
/// UCS-4 units), encoded as UTF-8 and escaped exactly as `write_escaped_str` does; a lone
/// surrogate becomes `\udxxx`.
///
/// Encoding from the `str`'s storage spares Python's UTF-8 copy of a non-ASCII string, which it
/// would also keep on the object for as long as the object lives. One pass, writing straight into
/// `out`'s spare room: a block of 16 units (of any width) is narrowed to bytes and
/// stored whole, then only its plain ASCII prefix is kept, and the unit that ended it (an escape,
/// or a character beyond ASCII) is written in place; no call and no capacity check per unit.
pub fn write_escaped_code_points<T: CodeUnit>(out: &mut Vec<u8>, units: &[T]) {
    out.reserve(units.len() + 2 + SPECIAL_ROOM);
    out.push(b'"');
    let mut len = out.len();
    let mut index = 0;
    // SAFETY: a block read from any `index` below `units.len() + 1 - BLOCK` is inside `units`, and
    // a block's plain prefix ends at `units.len()` at the latest.
    unsafe { escape_blocks(out, &mut len, units, &mut index, (units.len() + 1).saturating_sub(T::BLOCK), units.len()) };
    if index < units.len() && units.len() >= T::BLOCK {
        // The last units, fewer than a block: the last block (over units already written) is
        // narrowed once into `narrowed`, whose NULs after it stop every plain prefix, and its
        // bytes from `index` on are escaped as Latin-1 blocks, each special unit read from `units`.
        let base = units.len() - T::BLOCK;
        let mut narrowed = [0u8; 32];
        // SAFETY: the last block is inside `units`, and `narrowed` has room for 16 bytes.
        unsafe { T::store_block(units.as_ptr().add(base), narrowed.as_mut_ptr()) };
        let mut at = index - base;
        while at < T::BLOCK {
            if out.capacity() - len < SPECIAL_ROOM {
                // SAFETY: the bytes up to `len` were written.
                unsafe { out.set_len(len) };
                out.reserve(T::BLOCK + SPECIAL_ROOM);
            }
            // SAFETY: a block read from `at` (below 16) is inside `narrowed`, and `SPECIAL_ROOM`
            // bytes are spare past `len` (as in `escape_blocks`).
            unsafe {
                let plain = u8::store_block(narrowed.as_ptr().add(at), out.as_mut_ptr().add(len)).min(T::BLOCK - at);
                len += plain;
                at += plain;
                if at < T::BLOCK {
                    len += write_special_unit(out.as_mut_ptr().add(len), units[base + at].into());
                    at += 1;
                }
            }
        }
    } else if index < units.len() {
        // A string shorter than a block: copied to a block of its own that a NUL (a control
        // character, which stops a block's plain prefix) ends, and escaped as the others.
        let rest = units.len() - index;
        let mut padded = [[T::default(); 16]; 2];
        padded.as_flattened_mut()[..rest].copy_from_slice(&units[index..]);
        let mut at = 0;
        // SAFETY: a block read from any `at` below `rest` (less than a block) is inside `padded`
        // (two blocks); the NUL at `rest` ends every plain prefix there.
        unsafe { escape_blocks(out, &mut len, padded.as_flattened(), &mut at, rest, rest) };
    }
    // SAFETY: the bytes up to `len` were written by `escape_blocks`.
    unsafe { out.set_len(len) };
    out.push(b'"');
}

/// Escape the first `count` units of `units` from `index` on into `out` from byte `len` on (`out`'s
/// own length is left behind, and set only when it must grow), a block at a time, until `index`
/// reaches `end` or a block's plain prefix ends past it.
///
/// # Safety
/// A block (`T::BLOCK` units) read from any index below `end` is inside `units`, and the plain
/// prefix of such a block ends at `count` at the latest (a special unit, or the end).
#[inline(always)]
#[allow(clippy::inline_always)] // the loop of `write_escaped_code_points`, written once for its two parts
unsafe fn escape_blocks<T: CodeUnit>(
    out: &mut Vec<u8>,
    len: &mut usize,
    units: &[T],
    index: &mut usize,
    end: usize,
    count: usize,
) {
    while *index < end {
        if out.capacity() - *len < SPECIAL_ROOM {
            // SAFETY: the bytes up to `len` were written below.
            unsafe { out.set_len(*len) };
            out.reserve(count - *index + SPECIAL_ROOM);
        }
        // SAFETY: at least `SPECIAL_ROOM` bytes are spare past `len`: a block's store (16 bytes)
        // and a special unit's writing (at most 8) fit in them; the block read is the caller's.
        unsafe {
            let plain = T::store_block(units.as_ptr().add(*index), out.as_mut_ptr().add(*len));
            *len += plain;
            *index += plain;
            if plain < T::BLOCK && *index < count {
                *len += write_special_unit(out.as_mut_ptr().add(*len), units[*index].into());
                *index += 1;
            }
        }
    }
}

/// Spare room `write_escaped_code_points` keeps in `out` for one step: a block of bytes stored
/// whole, and the unit after its plain prefix.
const SPECIAL_ROOM: usize = 32;

/// Each ASCII character's escape in a JSON string (`\"`, `\n`, `\u001f`...), with its length in the
/// last byte: 0 for a character written as itself.
static ASCII_ESCAPES: [[u8; 8]; 128] = {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut table = [[0u8; 8]; 128];
    let mut byte = 0;
    while byte < 0x20 {
        table[byte] = [b'\\', b'u', b'0', b'0', HEX[byte >> 4], HEX[byte & 0xF], 0, 6];
        byte += 1;
    }
    table[b'"' as usize] = [b'\\', b'"', 0, 0, 0, 0, 0, 2];
    table[b'\\' as usize] = [b'\\', b'\\', 0, 0, 0, 0, 0, 2];
    table[b'\n' as usize] = [b'\\', b'n', 0, 0, 0, 0, 0, 2];
    table[b'\r' as usize] = [b'\\', b'r', 0, 0, 0, 0, 0, 2];
    table[b'\t' as usize] = [b'\\', b't', 0, 0, 0, 0, 0, 2];
    table[0x08] = [b'\\', b'b', 0, 0, 0, 0, 0, 2];
    table[0x0C] = [b'\\', b'f', 0, 0, 0, 0, 0, 2];
    table
};

/// Write the code point of a unit that is not plain ASCII at `target`: its escape, or its UTF-8
/// (a lone surrogate: its `\udxxx` escape); how many bytes that took.
///
/// # Safety
/// `target` has room for 8 bytes (an ASCII escape is copied as a whole table row).
#[inline(always)]
#[allow(clippy::inline_always)] // once per escape or non-ASCII character: a call would cost more than it
unsafe fn write_special_unit(target: *mut u8, code_point: u32) -> usize {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let byte = |value: u32| value.to_le_bytes()[0];
    // SAFETY: (the caller's) every write below is within the 8 bytes at `target`.
    unsafe {
        match code_point {
            0..=0x7F => {
                let escape = &ASCII_ESCAPES[code_point as usize];
                std::ptr::copy_nonoverlapping(escape.as_ptr(), target, 8);
                usize::from(escape[7])
            }
            0x80..=0x7FF => {
                *target = 0xC0 | byte(code_point >> 6);
                *target.add(1) = 0x80 | byte(code_point & 0x3F);
                2
            }
            0xD800..=0xDFFF => {
                let escape = [
                    b'\\',
                    b'u',
                    HEX[(code_point >> 12) as usize & 0xF],
                    HEX[(code_point >> 8) as usize & 0xF],
                    HEX[(code_point >> 4) as usize & 0xF],
                    HEX[code_point as usize & 0xF],
                ];
                std::ptr::copy_nonoverlapping(escape.as_ptr(), target, 6);
                6
            }
            0x800..=0xFFFF => {
                *target = 0xE0 | byte(code_point >> 12);
                *target.add(1) = 0x80 | byte((code_point >> 6) & 0x3F);
                *target.add(2) = 0x80 | byte(code_point & 0x3F);
                3
            }
            _ => {
                *target = 0xF0 | byte(code_point >> 18);
                *target.add(1) = 0x80 | byte((code_point >> 12) & 0x3F);
                *target.add(2) = 0x80 | byte((code_point >> 6) & 0x3F);
                *target.add(3) = 0x80 | byte(code_point & 0x3F);
                4
            }
        }
    }
}

/// A unit of a Python `str`'s storage: Latin-1 (`u8`), UCS-2 (`u16`) or UCS-4 (`u32`).
pub trait CodeUnit: Copy + Default + Into<u32> {
    /// How many units `store_block` takes.
    const BLOCK: usize;

    /// Store the `BLOCK` units at `units` narrowed to bytes at `target` (and maybe bytes after
    /// them, up to 16 in all), and say how many of them, from the first, are plain ASCII (written
    /// as themselves in a JSON string): those bytes are their text.
    ///
    /// # Safety
    /// `units` points to `BLOCK` units and `target` has room for 16 bytes.
    unsafe fn store_block(units: *const Self, target: *mut u8) -> usize;
}

/// Units that are not plain ASCII each stop a block; without SSE2, a block is one unit.
#[cfg(not(target_arch = "x86_64"))]
macro_rules! scalar_code_unit {
    ($($unit:ty),*) => {$(
        impl CodeUnit for $unit {
            const BLOCK: usize = 1;

            unsafe fn store_block(units: *const Self, target: *mut u8) -> usize {
                // SAFETY: (the caller's)
                let unit = u32::from(unsafe { *units });
                unsafe { *target = unit.to_le_bytes()[0] };
                usize::from(unit < 0x80 && ORDINARY_IN_STRING[unit as usize])
            }
        }
    )*};
}
#[cfg(not(target_arch = "x86_64"))]
scalar_code_unit!(u8, u16, u32);

/// Store the first `block` bytes of `narrowed` (units narrowed so that every unit that is not
/// ASCII became a byte with its top bit set, or a control character) at `target`; how many of
/// them, from the first, are plain ASCII.
///
/// # Safety
/// `target` has room for 16 bytes.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
#[allow(clippy::inline_always)] // the whole of each block's work: it belongs in the caller's loop
unsafe fn store_narrowed(narrowed: std::arch::x86_64::__m128i, block: usize, target: *mut u8) -> usize {
    use std::arch::x86_64::{_mm_movemask_epi8, _mm_storeu_si128};
    // SAFETY: SSE2 is part of the x86_64 baseline; the store writes the 16 bytes at `target`
    // (the caller's), unaligned.
    let special = unsafe {
        _mm_storeu_si128(target.cast(), narrowed);
        special_mask_of::<false>(narrowed) | _mm_movemask_epi8(narrowed)
    };
    // A bit past the block ends the count there.
    (special | (1 << block)).trailing_zeros() as usize
}

#[cfg(target_arch = "x86_64")]
#[allow(clippy::inline_always)] // a block's load: it belongs in the caller's loop
impl CodeUnit for u8 {
    const BLOCK: usize = 16;

    #[inline(always)]
    unsafe fn store_block(units: *const Self, target: *mut u8) -> usize {
        // SAFETY: (the caller's) 16 bytes at `units`, loaded unaligned.
        unsafe { store_narrowed(std::arch::x86_64::_mm_loadu_si128(units.cast()), Self::BLOCK, target) }
    }
}

#[cfg(target_arch = "x86_64")]
#[allow(clippy::inline_always)] // a block's load: it belongs in the caller's loop
impl CodeUnit for u16 {
    const BLOCK: usize = 16;

    #[inline(always)]
    unsafe fn store_block(units: *const Self, target: *mut u8) -> usize {
        use std::arch::x86_64::{_mm_loadu_si128, _mm_packus_epi16};
        // SAFETY: (the caller's) 16 units (32 bytes) at `units`, loaded unaligned. Units above 0xFF
        // saturate to 0xFF and those above 0x7FFF (negative as i16) to 0: every unit beyond ASCII
        // becomes a byte that stops the count.
        unsafe {
            let narrowed = _mm_packus_epi16(_mm_loadu_si128(units.cast()), _mm_loadu_si128(units.add(8).cast()));
            store_narrowed(narrowed, Self::BLOCK, target)
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[allow(clippy::inline_always)] // a block's load: it belongs in the caller's loop
impl CodeUnit for u32 {
    const BLOCK: usize = 16;

    #[inline(always)]
    unsafe fn store_block(units: *const Self, target: *mut u8) -> usize {
        use std::arch::x86_64::{_mm_loadu_si128, _mm_packs_epi32, _mm_packus_epi16};
        // SAFETY: (the caller's) 16 units (64 bytes) at `units`, loaded unaligned. Code points are
        // below 2^31, so signed saturation takes those above 0x7FFF to 0x7FFF, and the unsigned
        // one then those above 0xFF to 0xFF: every unit beyond ASCII becomes 0xFF.
        unsafe {
            let load = |at: usize| _mm_loadu_si128(units.add(at).cast());
            let narrowed = _mm_packus_epi16(_mm_packs_epi32(load(0), load(4)), _mm_packs_epi32(load(8), load(12)));
            store_narrowed(narrowed, Self::BLOCK, target)
        }
    }
}

fn write_ascii_escape(out: &mut Vec<u8>, byte: u8) {
    match byte {
        b'"' => out.extend_from_slice(b"\\\""),
        b'\\' => out.extend_from_slice(b"\\\\"),
        b'\n' => out.extend_from_slice(b"\\n"),
        b'\r' => out.extend_from_slice(b"\\r"),
        b'\t' => out.extend_from_slice(b"\\t"),
        0x08 => out.extend_from_slice(b"\\b"),
        0x0C => out.extend_from_slice(b"\\f"),
        other => write_unicode_escape(out, u32::from(other)),
    }
}

/// `\uxxxx` with lowercase hex digits, as Python writes it.
fn write_unicode_escape(out: &mut Vec<u8>, code_point: u32) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.extend_from_slice(b"\\u");
    for shift in [12, 8, 4, 0] {
        out.push(HEX[((code_point >> shift) & 0xF) as usize]);
    }
}

/// Append a finite float exactly as Python's `repr(float)` writes it.
///
/// Żmij (`zmij`, a Schubfach-based port of Victor Zverovich's algorithm) gives the shortest digits
/// that round-trip and, of those, the nearest to the exact value, as Python's `dtoa` does (Rust's
/// own `{:e}` rounds exact ties up: 15 in 25,000 random doubles came out different; Żmij's digits
/// matched `repr` on 2,000,000 doubles: random bits, uniform, short decimals, every magnitude).
/// Only the layout is Python's: positional when `-4 <= exponent < 16`, else `1e+16` style with a
/// signed exponent of at least two digits, and a `.0` on integral values.
///
/// One path: a hand-written one for short decimals, a little quicker on them, is gone, for one
/// path and a fuzzed oracle (bench/README.md).
#[inline]
pub fn write_float_repr(out: &mut Vec<u8>, value: f64) {
    // Where Python writes positional digits, Żmij does too and in the same layout ("0.0001",
    // "123.0"), so its text is used as is, written where it goes.
    if value == 0.0 || (1e-4..1e16).contains(&value.abs()) {
        write_zmij_in_place(out, value);
    } else {
        write_float_scientific(out, value);
    }
}

/// Append Żmij's text of a finite `value`, formatted straight into `out`'s spare room (a
/// `zmij::Buffer` laid over it) rather than into a buffer on the stack and then copied.
#[inline]
fn write_zmij_in_place(out: &mut Vec<u8>, value: f64) {
    const ROOM: usize = std::mem::size_of::<zmij::Buffer>();
    // A `Buffer` is its bytes alone: any address may hold one.
    const _: () = assert!(std::mem::align_of::<zmij::Buffer>() == 1);
    out.reserve(ROOM);
    // SAFETY: `reserve` made `ROOM` bytes of room past the length, the size of a `Buffer`, whose
    // alignment is 1 and which holds only `MaybeUninit` bytes (uninitialised memory is a valid
    // one); Żmij writes inside it and hands out text inside it, which is copied to the front of
    // the room (where Żmij writes it: the copy is then skipped) before `set_len` counts it.
    unsafe {
        let room = out.as_mut_ptr().add(out.len());
        let buffer = &mut *room.cast::<zmij::Buffer>();
        let text = buffer.format_finite(value);
        let (at, len) = (text.as_ptr(), text.len());
        if at != room.cast_const() {
            std::ptr::copy(at, room, len);
        }
        out.set_len(out.len() + len);
    }
}

/// `write_float_repr` outside the positional range: `1e+16` style, with Python's exponent (a sign,
/// at least two digits) and Żmij's digits, trailing zeros dropped.
#[cold]
fn write_float_scientific(out: &mut Vec<u8>, value: f64) {
    let mut buffer = zmij::Buffer::new();
    let formatted = buffer.format_finite(value.abs()).as_bytes();
    let (mantissa, exponent) = match formatted.iter().position(|&b| b == b'e') {
        Some(e_at) => (&formatted[..e_at], parse_exponent(&formatted[e_at + 1..])),
        None => (formatted, 0),
    };
    let integer_len = mantissa.iter().position(|&b| b == b'.').unwrap_or(mantissa.len());
    let all_digits = mantissa.iter().copied().filter(u8::is_ascii_digit);
    let leading_zeros = mantissa.iter().take_while(|&&b| b == b'0' || b == b'.').filter(|&&b| b == b'0').count();
    // Żmij writes at most 17 significant digits.
    let mut digit_buffer = [0u8; 24];
    let mut count = 0;
    for digit in all_digits.skip(leading_zeros) {
        digit_buffer[count] = digit;
        count += 1;
    }
    while count > 1 && digit_buffer[count - 1] == b'0' {
        count -= 1;
    }
    let mut digits = &digit_buffer[..count];
    // Where the decimal point goes: after `point` digits (negative: that many zeros before them).
    let mut point = i32::try_from(integer_len).unwrap_or(0) + exponent - i32::try_from(leading_zeros).unwrap_or(0);
    if digits.is_empty() {
        digits = b"0";
        point = 1;
    }

    if value.is_sign_negative() {
        out.push(b'-');
    }
    let n_digits = i32::try_from(digits.len()).unwrap_or(i32::MAX);
    let scientific_exponent = point - 1;
    if !(-4..16).contains(&scientific_exponent) {
        out.push(digits[0]);
        if digits.len() > 1 {
            out.push(b'.');
            out.extend_from_slice(&digits[1..]);
        }
        out.push(b'e');
        out.push(if scientific_exponent < 0 { b'-' } else { b'+' });
        if scientific_exponent.abs() < 10 {
            out.push(b'0');
        }
        out.extend_from_slice(itoa::Buffer::new().format(scientific_exponent.abs()).as_bytes());
    } else if point <= 0 {
        out.extend_from_slice(b"0.");
        out.extend(std::iter::repeat_n(b'0', point.unsigned_abs() as usize));
        out.extend_from_slice(digits);
    } else if point >= n_digits {
        out.extend_from_slice(digits);
        out.extend(std::iter::repeat_n(b'0', (point - n_digits).unsigned_abs() as usize));
        out.extend_from_slice(b".0");
    } else {
        let split = point.unsigned_abs() as usize;
        out.extend_from_slice(&digits[..split]);
        out.push(b'.');
        out.extend_from_slice(&digits[split..]);
    }
}

fn parse_exponent(text: &[u8]) -> i32 {
    std::str::from_utf8(text).ok().and_then(|text| text.parse().ok()).unwrap_or(0)
}

#[cfg(test)]
mod tests {

    #[test]
    fn code_points_are_written_as_their_utf8_is_escaped() {
        let specials = [0x41, 0x22, 0x5C, 0x0A, 0x1F, 0x7F, 0x80, 0xFF, 0x100, 0x7FF, 0x800, 0xD800, 0xDFFF, 0xFFFF];
        for length in [1, 7, 8, 9, 16, 17, 30] {
            for at in 0..length {
                for &special in &specials {
                    let mut units = vec![u16::from(b'a'); length];
                    units[at] = special;
                    let mut expected = Vec::new();
                    let wtf8: String = units
                        .iter()
                        .map(|&unit| char::from_u32(u32::from(unit)).map_or(format!("\\u{unit:04x}"), String::from))
                        .collect();
                    // Lone surrogates are not chars: the reference writes their escape directly.
                    let mut direct = Vec::new();
                    super::write_escaped_str(&mut direct, wtf8.as_bytes());
                    expected.extend(String::from_utf8(direct).unwrap().replace("\\\\u", "\\u").bytes());
                    let mut got = Vec::new();
                    super::write_escaped_code_points(&mut got, &units);
                    assert_eq!(String::from_utf8_lossy(&got), String::from_utf8_lossy(&expected), "{units:x?}");
                    let wide: Vec<u32> = units.iter().copied().map(u32::from).collect();
                    let mut got_wide = Vec::new();
                    super::write_escaped_code_points(&mut got_wide, &wide);
                    assert_eq!(got_wide, got);
                }
            }
        }
    }
    #[test]
    fn every_unit_width_writes_each_code_point_as_its_utf8_escaped() {
        // Each code point a unit can hold, alone and in blocks (first, last, after a full block).
        let points: Vec<u32> = (0..0x180)
            .chain([0x7FF, 0x800, 0xD7FF, 0xD800, 0xDBFF, 0xDC00, 0xDFFF, 0xE000, 0xFFFF])
            .chain([0x1_0000, 0x1_F600, 0x10_FFFF])
            .collect();
        for &point in &points {
            let expected_text = char::from_u32(point).map_or(format!("\\u{point:04x}"), |c| {
                let mut one = Vec::new();
                super::write_escaped_str(&mut one, c.to_string().as_bytes());
                String::from_utf8(one[1..one.len() - 1].to_vec()).unwrap()
            });
            for length in [1, 3, 4, 5, 8, 9, 16, 17, 33] {
                for at in [0, length / 2, length - 1] {
                    let mut wide = vec![u32::from(b'x'); length];
                    wide[at] = point;
                    let expected = format!("\"{}{expected_text}{}\"", "x".repeat(at), "x".repeat(length - at - 1));
                    let mut got = Vec::new();
                    super::write_escaped_code_points(&mut got, &wide);
                    assert_eq!(String::from_utf8_lossy(&got), expected, "{point:x} at {at} of {length}");
                    if let Ok(unit) = u16::try_from(point) {
                        let units: Vec<u16> = wide.iter().map(|&w| u16::try_from(w).unwrap()).collect();
                        let mut got = Vec::new();
                        super::write_escaped_code_points(&mut got, &units);
                        assert_eq!(String::from_utf8_lossy(&got), expected, "{unit:x} at {at} of {length}");
                    }
                    if let Ok(unit) = u8::try_from(point) {
                        let units: Vec<u8> = wide.iter().map(|&w| u8::try_from(w).unwrap()).collect();
                        let mut got = Vec::new();
                        super::write_escaped_code_points(&mut got, &units);
                        assert_eq!(String::from_utf8_lossy(&got), expected, "{unit:x} at {at} of {length}");
                    }
                }
            }
        }
    }

    #[test]
    fn output_longer_than_the_room_reserved_grows_as_it_goes() {
        // Six bytes out per unit in: `out` must grow many times inside one string.
        for text in ["\u{1}\"\u{1f}".repeat(700), "\u{1F600}\u{1}a\u{800}".repeat(500), "\u{e9}\n".repeat(900)] {
            let mut expected = Vec::new();
            super::write_escaped_str(&mut expected, text.as_bytes());
            let wide: Vec<u32> = text.chars().map(u32::from).collect();
            let mut got = Vec::new();
            super::write_escaped_code_points(&mut got, &wide);
            assert_eq!(got, expected);
            if let Ok(units) = wide.iter().map(|&w| u16::try_from(w)).collect::<Result<Vec<u16>, _>>() {
                let mut got = Vec::new();
                super::write_escaped_code_points(&mut got, &units);
                assert_eq!(got, expected);
            }
            if let Ok(units) = wide.iter().map(|&w| u8::try_from(w)).collect::<Result<Vec<u8>, _>>() {
                let mut got = Vec::new();
                super::write_escaped_code_points(&mut got, &units);
                assert_eq!(got, expected);
            }
        }
    }

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

    use super::{unescape_into, write_escaped_str, write_float_repr, Kind, Scanner};

    fn skim(text: &str, max_depth: usize) -> Result<Kind, String> {
        let mut scanner = Scanner::new(text, max_depth);
        let kind = scanner.value().map_err(|e| e.to_string())?;
        scanner.finish().map_err(|e| e.to_string())?;
        Ok(kind)
    }

    #[test]
    fn accepts_exactly_rfc_8259() {
        for good in
            ["0", "-0", "1.5e-3", "1E+2", " [1, {\"a\": [true, false, null]}] ", "\"\\ud800\"", "\"\\u00e9\\/\""]
        {
            assert!(skim(good, 128).is_ok(), "{good}");
        }
        for bad in [
            "",
            "01",
            "1.",
            ".5",
            "-",
            "1e",
            "+1",
            "NaN",
            "Infinity",
            "-Infinity",
            "[1,]",
            "{\"a\":1,}",
            "{'a':1}",
            "[1] [2]",
            "\"\t\"",
            "\"\\x\"",
            "\"\\u12\"",
            "tru",
            "nul",
            "{\"a\" 1}",
            "{1:2}",
            "[",
            "\"abc",
        ] {
            assert!(skim(bad, 128).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn eight_digits_at_a_time_read_like_one_at_a_time() {
        for text in ["00000000", "12345678", "99999999", "10000001", "90817263"] {
            assert_eq!(super::eight_digits(u64::from_le_bytes(text.as_bytes().try_into().unwrap())), text.parse().ok());
        }
        for text in [b"1234567a", b"/2345678", b":2345678", b"1234 678", b"\x80\xB9\xBA\xFF0000", b"0000000\xB0"] {
            assert_eq!(super::eight_digits(u64::from_le_bytes(*text)), None, "{text:?}");
        }
    }

    #[test]
    fn digits_are_gathered_as_one_at_a_time_would_gather_them() {
        // Every count of digits (across the eight-byte steps), stopped by every byte that is not a
        // digit, with and without eight bytes of text left after the digits.
        let digits = b"98765432109876543210123";
        for count in 0..=digits.len() {
            for stop in (0..=255u8).filter(|byte| !byte.is_ascii_digit()) {
                for tail in [&b""[..], b"xxxxxxxxxx"] {
                    let mut text = b"-".to_vec();
                    text.extend_from_slice(&digits[..count]);
                    text.push(stop);
                    text.extend_from_slice(tail);
                    let mut expected = 0u64;
                    for &digit in &digits[..count] {
                        expected = expected.wrapping_mul(10).wrapping_add(u64::from(digit - b'0'));
                    }
                    let mut mantissa = 7;
                    let end = super::gather_digits(&text, 1, &mut mantissa);
                    assert_eq!(end, 1 + count, "{count} digits then {stop}");
                    let seven = (0..count).fold(7u64, |m, _| m.wrapping_mul(10));
                    assert_eq!(mantissa, seven.wrapping_add(expected), "{count} digits then {stop}");
                }
            }
        }
        // Digits up to the text's end.
        for count in 1..=digits.len() {
            let mut mantissa = 0;
            assert_eq!(super::gather_digits(&digits[..count], 0, &mut mantissa), count);
        }
    }

    #[test]
    fn numbers_have_the_value_str_parse_gives() {
        use super::Number;
        let cases = [
            "0",
            "-0",
            "7",
            "-12",
            "123456789012345678",
            "-999999999999999999",
            "1234567890123456789",
            "0.0",
            "-0.0",
            "1.5",
            "-73.5",
            "0.1",
            "0.3",
            "123.456",
            "1e22",
            "1e23",
            "9007199254740993.0",
            "9007199254740992.0",
            "4.35",
            "1.7976931348623157e308",
            "5e-324",
            "2.2250738585072014e-308",
            "-598.1234567890123",
            "123.45678901234568",
            "0.000001",
            "1E+2",
            "12345678.12345678",
            "1234567812345678.5",
            "1e-22",
            "3e-23",
            "1e308",
            "-1e308",
            "1e309",
            "4.9e-324",
            "2e-324",
            "2.5e-324",
            "-1e-400",
            "2.225073858507201e-308",
            "0e0",
            "-0e-5",
            "-0.0e400",
            "9007199254740993e0",
            "1.00000000000000011102230246251565404236316680908203125",
            "0.30000000000000004",
            "-831.2297419384171",
            "9999999999999999999.0",
            "99999999999999999999.0",
            "1234567890123456789e-319",
        ];
        // Every double's shortest form (and its exponent form), from a fixed pseudo-random walk.
        let mut state = 0x2545_F491_4F6C_DD1D_u64;
        let mut random = Vec::new();
        for _ in 0..200_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let value = f64::from_bits(state);
            if value.is_finite() {
                random.push(format!("{value:?}"));
                random.push(format!("{:e}", value / 1e3));
            }
        }
        for text in cases.iter().copied().chain(random.iter().map(String::as_str)) {
            let mut scanner = Scanner::new(text, 8);
            let number = scanner.number_value().unwrap();
            scanner.finish().unwrap();
            match number {
                Number::Int(value) => assert_eq!(Some(value), text.parse().ok(), "{text}"),
                Number::Float(value) => assert_eq!(value.to_bits(), text.parse::<f64>().unwrap().to_bits(), "{text}"),
                Number::Text { text: got, integer } => {
                    assert_eq!(got, text);
                    assert_eq!(integer, !text.contains(['.', 'e', 'E']), "{text}");
                }
            }
        }
        for bad in ["-", "01", "1.", ".5", "1e", "1e+", "-a"] {
            let mut scanner = Scanner::new(bad, 8);
            assert!(scanner.number_value().is_err() || scanner.finish().is_err(), "{bad}");
        }
    }

    #[test]
    fn depth_is_bounded_before_recursing() {
        let nested = |depth: usize| "[".repeat(depth) + &"]".repeat(depth);
        assert_eq!(skim(&nested(128), 128), Ok(Kind::Array));
        assert!(skim(&nested(129), 128).unwrap_err().contains("nesting"));
        assert!(skim(&"[".repeat(1_000_000), 128).is_err());
    }

    #[test]
    fn records_the_longest_integer() {
        let mut scanner = Scanner::new("[12345, -1.5e300, 1234567, 0.12345678901234]", 8);
        scanner.value().unwrap();
        assert_eq!(scanner.longest_integer, 7);
    }

    /// `string_text` against `string` and `unescape_into`, on strings whose escapes, controls and
    /// non-ASCII bytes sit anywhere around the 16-byte chunks.
    #[test]
    fn string_text_reads_what_string_and_unescape_read() {
        use super::{StrText, Width};
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
                string_shape_reads_what_string_and_unescape_read(&text, expected.as_ref());
                // With a limit: the same, or (with escapes only, or an error further on: `string_shape`
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

    /// `string_shape` and `unescape_units` on `text` against what `string` and `unescape_into` read
    /// (`expected`: the decoded text, whether it holds a lone surrogate, whether it had escapes).
    fn string_shape_reads_what_string_and_unescape_read(
        text: &str,
        expected: std::result::Result<&(Vec<u8>, bool, bool), &crate::errors::SyntaxError>,
    ) {
        use super::{count_chars, unescape_units, widen_wtf8, StrShape, Width};
        let mut scanner = Scanner::new(text, 8);
        match (expected, scanner.string_shape()) {
            (Ok((decoded, has_surrogate, _)), Ok(StrShape { raw, chars, width, has_surrogate: got_surrogate })) => {
                assert_eq!(scanner.pos, raw.len() + 2, "{text:?}");
                assert_eq!(chars, count_chars(decoded), "{text:?}");
                assert_eq!(got_surrogate, *has_surrogate, "{text:?}");
                let mut expected_units = vec![0u32; chars];
                widen_wtf8(decoded, &mut expected_units);
                let widest = expected_units.iter().copied().max().unwrap_or(0);
                assert_eq!(width, Width::of_code_point(widest), "{text:?}");
                let mut units = vec![0u32; chars];
                assert_eq!(unescape_units(raw.as_bytes(), &mut units), chars, "{text:?}");
                assert_eq!(units, expected_units, "{text:?}");
                if width <= Width::Ucs2 {
                    let mut units = vec![0u16; chars];
                    assert_eq!(unescape_units(raw.as_bytes(), &mut units), chars, "{text:?}");
                    assert!(units.iter().map(|&unit| u32::from(unit)).eq(expected_units.iter().copied()), "{text:?}");
                }
                if width <= Width::Latin1 {
                    let mut units = vec![0u8; chars];
                    assert_eq!(unescape_units(raw.as_bytes(), &mut units), chars, "{text:?}");
                    assert!(units.iter().map(|&unit| u32::from(unit)).eq(expected_units.iter().copied()), "{text:?}");
                }
                // Too little room: filled up to it, never past it.
                let mut units = vec![0u32; chars / 2];
                assert_eq!(unescape_units(raw.as_bytes(), &mut units), chars / 2, "{text:?}");
                assert_eq!(units, expected_units[..chars / 2], "{text:?}");
            }
            (Err(expected), Err(got)) => assert_eq!(&got, expected, "{text:?}"),
            (expected, got) => panic!("{text:?}: {expected:?} against {got:?}"),
        }
    }

    #[test]
    fn wtf8_is_widened_to_its_code_points() {
        use super::{count_chars, widen_wtf8};
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

    #[test]
    fn short_ascii_is_written_as_write_escaped_str_writes_it() {
        let mut cases: Vec<String> =
            ["", "a", "id", "item 17", "a\"b", "tab\there", "\u{1}", "back\\", "\u{7f}"].map(String::from).to_vec();
        for length in 1..=34 {
            for at in 0..length {
                for special in ['"', '\\', '\n', '\u{1f}', ' ', '!', '#', '[', ']', '\u{7f}'] {
                    let mut text = "abcdefghijklmnopqrstuvwxyz0123456789".chars().take(length).collect::<Vec<_>>();
                    text[at] = special;
                    cases.push(text.into_iter().collect());
                }
            }
        }
        for text in &cases {
            let mut expected = b"[".to_vec();
            write_escaped_str(&mut expected, text.as_bytes());
            let mut got = b"[".to_vec();
            super::write_ascii_str(&mut got, text.as_bytes());
            assert_eq!(String::from_utf8(got).unwrap(), String::from_utf8(expected).unwrap(), "{text:?}");
        }
    }

    #[test]
    fn escapes_like_python_json() {
        let mut out = Vec::new();
        write_escaped_str(&mut out, "q\"b\\n\n\u{1}\u{7f}é\u{2028}".as_bytes());
        assert_eq!(String::from_utf8(out).unwrap(), "\"q\\\"b\\\\n\\n\\u0001\u{7f}é\u{2028}\"");
        let mut out = Vec::new();
        write_escaped_str(&mut out, &[b'a', 0xED, 0xA0, 0x80, 0xED, 0xBF, 0xBF]);
        assert_eq!(out, b"\"a\\ud800\\udfff\"");
    }

    #[test]
    fn floats_look_like_python_repr() {
        let cases: &[(f64, &str)] = &[
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (1.0, "1.0"),
            (0.1, "0.1"),
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (123_456_789.123, "123456789.123"),
            (1e-4, "0.0001"),
            (1e-5, "1e-05"),
            (1.5e-7, "1.5e-07"),
            (5e-324, "5e-324"),
            (f64::MAX, "1.7976931348623157e+308"),
            (123_456_789_012_345_678.0, "1.2345678901234568e+17"),
            (-1_113_178_120_592_002.2, "-1113178120592002.2"),
            (111_659_285_584_252.12, "111659285584252.12"),
            (1e22, "1e+22"),
            (1.5e300, "1.5e+300"),
            (0.000_123, "0.000123"),
            (-2.5, "-2.5"),
        ];
        for &(value, expected) in cases {
            let mut out = Vec::new();
            write_float_repr(&mut out, value);
            assert_eq!(String::from_utf8(out).unwrap(), expected, "{value}");
        }
    }
}

//! The escaping writer: text appended as a JSON string exactly as Python's `json` writes it with
//! `ensure_ascii=False` (`\"`, `\\`, `\n`..., other control characters and lone surrogates as
//! `\u00xx`/`\udxxx`), from WTF-8 (`write_escaped_str`), from short ASCII without a loop
//! (`write_ascii_str`, `write_short`), or from a Python `str`'s own storage units
//! (`write_escaped_code_points`, the `CodeUnit`s), a block of 16 units at a time.

use super::scan_string::{skip_ordinary, special_mask_of, ORDINARY_IN_STRING};

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

#[cfg(test)]
mod tests {
    use super::*;

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
}

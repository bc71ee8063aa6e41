//! A message's bytes as text: [`message_text`], `std::str::from_utf8`'s answer in fewer steps for
//! the large, mostly ASCII bodies LSP frames carry.
//!
//! A client's `json.dumps` escapes every non-ASCII character, so an escaped body is ASCII through and
//! through, and source text sent as UTF-8 is ASCII for long stretches. Whole blocks of ASCII are told
//! apart by OR-ing their bytes (AVX2 or SSE2 on `x86_64`, words elsewhere) and one test of the high bits, at
//! a fraction of what the standard validation costs a byte; only the stretches from a block with a
//! byte above 0x7F go through `std::str::from_utf8`; once such a stretch is followed by less than a
//! stretch's length of ASCII, the text is dense with non-ASCII and the whole rest goes to
//! `std::str::from_utf8` in one call, so the check never costs much more than the standard one.

use std::str::Utf8Error;

/// The bytes one step of the ASCII walk looks at.
const BLOCK: usize = 64;

/// The bytes the standard validation is handed from a block with a byte above 0x7F on (and on to
/// where a character starts): text that is not ASCII tends to come in stretches, and a few calls on
/// long stretches cost less than one call a block.
const WINDOW: usize = 2048;

/// `message` as text, or the error `std::str::from_utf8(message)` gives.
///
/// Runs of ASCII blocks are skipped; from a block with a byte above 0x7F, a window is validated by
/// `std::str::from_utf8` on its own. When a window is followed by fewer than a window's bytes of ASCII
/// blocks, the rest is validated in one call: a short run skipped saves less than a call costs (each
/// call starts its own word-aligned ASCII steps anew). Each piece starts where a character does (after
/// an ASCII byte, or at a byte that is not a continuation byte), so the whole is UTF-8 exactly when
/// each piece is.
/// On an error the whole is validated again by the standard function, for its exact position.
pub fn message_text(message: &[u8]) -> Result<&str, Utf8Error> {
    // `message[..at]` is known to be UTF-8, ending where a character does.
    let mut at = 0;
    let mut after_window = false;
    loop {
        let run = ascii_blocks(&message[at..]);
        if after_window && run < WINDOW {
            break;
        }
        at += run;
        if message.len() - at < BLOCK {
            break;
        }
        let mut end = (at + WINDOW).min(message.len());
        while end < message.len() && is_continuation(message[end]) {
            end += 1;
        }
        if std::str::from_utf8(&message[at..end]).is_err() {
            return std::str::from_utf8(message);
        }
        at = end;
        after_window = true;
    }
    if std::str::from_utf8(&message[at..]).is_err() {
        return std::str::from_utf8(message);
    }
    // SAFETY: every byte was checked above: whole blocks of ASCII, and the pieces between them (and
    // the rest, from the tail or from a window followed by a short run) by `from_utf8`, cut where
    // characters start.
    Ok(unsafe { std::str::from_utf8_unchecked(message) })
}

/// `0b10xx_xxxx`: never the first byte of a character.
#[inline]
fn is_continuation(byte: u8) -> bool {
    byte & 0xC0 == 0x80
}

/// The length of the run of whole `BLOCK`s of ASCII at the front of `bytes` (a multiple of `BLOCK`).
#[cfg(target_arch = "x86_64")]
#[inline]
fn ascii_blocks(bytes: &[u8]) -> usize {
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2.
        unsafe { ascii_blocks_avx2(bytes) }
    } else {
        ascii_blocks_sse2(bytes)
    }
}

/// [`ascii_blocks`] 32 bytes a load.
///
/// # Safety
/// The CPU must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn ascii_blocks_avx2(bytes: &[u8]) -> usize {
    use std::arch::x86_64::{_mm256_loadu_si256, _mm256_movemask_epi8, _mm256_or_si256};
    let mut at = 0;
    while bytes.len() - at >= BLOCK {
        let block = bytes[at..at + BLOCK].as_ptr();
        // SAFETY: the CPU has AVX2 (the caller's promise); the two loads read the `BLOCK` (64) bytes
        // of `block` (`loadu` needs no alignment).
        let any_high = unsafe {
            _mm256_movemask_epi8(_mm256_or_si256(
                _mm256_loadu_si256(block.cast()),
                _mm256_loadu_si256(block.add(32).cast()),
            ))
        };
        if any_high != 0 {
            break;
        }
        at += BLOCK;
    }
    at
}

/// [`ascii_blocks`] 16 bytes a load.
#[cfg(target_arch = "x86_64")]
fn ascii_blocks_sse2(bytes: &[u8]) -> usize {
    use std::arch::x86_64::{_mm_loadu_si128, _mm_movemask_epi8, _mm_or_si128};
    let mut at = 0;
    while bytes.len() - at >= BLOCK {
        let block = bytes[at..at + BLOCK].as_ptr();
        // SAFETY: SSE2 is part of the x86_64 baseline; the four loads read the `BLOCK` (64) bytes of
        // `block` (`loadu` needs no alignment).
        let all = unsafe {
            let low = _mm_or_si128(_mm_loadu_si128(block.cast()), _mm_loadu_si128(block.add(16).cast()));
            let high = _mm_or_si128(_mm_loadu_si128(block.add(32).cast()), _mm_loadu_si128(block.add(48).cast()));
            _mm_or_si128(low, high)
        };
        // SAFETY: SSE2 is part of the x86_64 baseline; a register only.
        if unsafe { _mm_movemask_epi8(all) } != 0 {
            break;
        }
        at += BLOCK;
    }
    at
}

/// The length of the run of whole `BLOCK`s of ASCII at the front of `bytes` (a multiple of `BLOCK`).
#[cfg(not(target_arch = "x86_64"))]
fn ascii_blocks(bytes: &[u8]) -> usize {
    bytes
        .chunks_exact(BLOCK)
        .take_while(|block| {
            let words = block.chunks_exact(8).map(|word| u64::from_ne_bytes(word.try_into().unwrap_or([0; 8])));
            words.fold(0, |all, word| all | word) & 0x8080_8080_8080_8080 == 0
        })
        .count()
        * BLOCK
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agrees_with_from_utf8_wherever_the_blocks_fall() {
        let ascii = b"{\"text\":\"def f(x):\\n    return x\"}".repeat(8);
        let mut cases: Vec<Vec<u8>> = vec![Vec::new(), ascii.clone()];
        let inserts: [&[u8]; 8] = [
            "é".as_bytes(),
            "漢字".as_bytes(),
            "😀".as_bytes(),
            b"\xC3",             // cut short
            b"\x80",             // a continuation byte alone
            b"\xED\xA0\x80",     // a surrogate
            b"\xF4\x90\x80\x80", // past U+10FFFF
            b"\xC0\xAF",         // overlong
        ];
        for insert in inserts {
            for at in [0, 1, 62, 63, 64, 65, 127, 128, 200, ascii.len() - 1, ascii.len()] {
                let mut case = ascii.clone();
                case.splice(at..at, insert.iter().copied());
                cases.push(case.clone());
                // Non-ASCII in every block from here on, and a second one far away.
                let mut dense = case.clone();
                for k in (at..dense.len()).step_by(40).rev() {
                    dense.splice(k..k, "ü".bytes());
                }
                cases.push(dense);
                case.splice(case.len() - 3..case.len() - 3, insert.iter().copied());
                cases.push(case);
            }
        }
        // Long text: pieces of the window's size, cut inside characters of every length.
        let long: Vec<u8> = "ab😀c漢d\u{e9}".repeat(2000).into_bytes();
        for at in [0, 100, 2047, 2048, 2049, 5000, long.len() - 2] {
            for bad in [b'\x80', b'\xFF', b'a'] {
                let mut case = long.clone();
                case[at] = bad;
                cases.push(case);
            }
        }
        cases.push(long);
        // A window followed by a short ASCII run hands the rest to `from_utf8` in one call: an ASCII
        // stretch, one window, then dense text with a bad byte far into it (or none); and a window
        // followed by a long ASCII run, then another window.
        let mut mixed = b"x".repeat(4096);
        mixed.extend("é".repeat(1500).bytes());
        mixed.extend("漢a".repeat(3000).bytes());
        for at in [4096 + 2048, 4096 + 2049, 4096 + 3000, 9000, mixed.len() - 1] {
            for bad in [b'\x80', b'\xFF', b'\xC3'] {
                let mut case = mixed.clone();
                case[at] = bad;
                cases.push(case);
            }
        }
        cases.push(mixed);
        let mut apart = b"y".repeat(1000);
        apart.extend("é".repeat(1100).bytes());
        apart.extend(b"z".repeat(4000));
        apart.extend("漢".repeat(1000).bytes());
        for at in [1000, 3200, 5000, 7300, apart.len() - 2] {
            let mut case = apart.clone();
            case[at] = b'\xE0';
            cases.push(case);
        }
        cases.push(apart);
        for case in &cases {
            assert_eq!(message_text(case), std::str::from_utf8(case), "{:?}", String::from_utf8_lossy(case));
            #[cfg(target_arch = "x86_64")]
            assert_eq!(ascii_blocks_sse2(case), ascii_blocks(case));
        }
    }
}

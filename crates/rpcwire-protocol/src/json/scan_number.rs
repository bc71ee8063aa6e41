//! The scanner's numbers: validated as RFC 8259 writes them (no leading zero, no NaN or Infinity),
//! of any length (the longest integer is recorded for Python's digit limit), and, for the decoder,
//! valued in the same walk (`Scanner::number_value`): digits gathered eight at a time (SWAR), an
//! integer of up to 18 digits, a float by Clinger's fast path or Eisel-Lemire (`decimal`), anything
//! else handed out as text for an exact parse.

use super::scan::Scanner;
use super::Result;
use crate::decimal::eisel_lemire;
use crate::errors::SyntaxError;

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

impl<'a> Scanner<'a> {
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
    ///
    /// Inline wherever it is called: the caller's `match` on the `Number` then folds into this walk,
    /// so that an integer goes from its digits straight to its `i64` (and a float to its `f64`) with
    /// no `Number` or `Result` made in between (the codec calls it from one place).
    #[inline(always)]
    #[allow(clippy::inline_always)] // see above: the point is the folding, not the call saved
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

    /// An integer of at most 15 digits at the cursor (no whitespace before it), its cursor moved
    /// past it; `None`, the cursor left where it was, for anything else: a fraction or an exponent,
    /// a longer integer, a leading zero, no digit, or fewer than 16 bytes of text left after the
    /// sign. `number_value` then reads (or refuses) it as always.
    ///
    /// The integers' own path, before `number_value`'s walk: the 16 bytes after the sign are
    /// loaded as two words once, the first byte that is not a digit found in them (SWAR, as
    /// `gather_digits`), and the digits before it valued from those words, with no loop, no
    /// fraction or exponent walk and no `Number` made.
    #[inline(always)]
    #[allow(clippy::inline_always)] // once per integer, in the decoder's loop over an array's numbers
    pub fn short_int(&mut self) -> Option<i64> {
        let bytes = self.bytes();
        let negative = bytes.get(self.pos) == Some(&b'-');
        let start = self.pos + usize::from(negative);
        let chunk: &[u8; 16] = bytes.get(start..start + 16)?.try_into().ok()?;
        let low = u64::from_le_bytes(chunk[..8].try_into().expect("8 bytes"));
        let low_stop = not_digits(low);
        let (count, magnitude) = if low_stop == 0 {
            let high = u64::from_le_bytes(chunk[8..].try_into().expect("8 bytes"));
            let high_stop = not_digits(high);
            if high_stop == 0 {
                return None;
            }
            let count = (high_stop.trailing_zeros() / 8) as usize;
            let rest = if count == 0 { 0 } else { u64::from(digits_value(pad_digits(high, count))) };
            (8 + count, u64::from(digits_value(low)) * POWERS_OF_TEN_U64[count] + rest)
        } else {
            let count = (low_stop.trailing_zeros() / 8) as usize;
            if count == 0 {
                return None;
            }
            (count, u64::from(digits_value(pad_digits(low, count))))
        };
        // '.' and 'e'/'E' (with the 0x20 bit set) begin a float's rest; 0x0E, which also matches, is
        // no JSON and goes to `number_value`'s error.
        if (chunk[0] == b'0' && count > 1) || matches!(chunk[count] | 0x20, b'.' | b'e') {
            return None;
        }
        self.pos = start + count;
        self.longest_integer = self.longest_integer.max(count);
        #[allow(clippy::cast_possible_wrap)] // below 10^15
        let magnitude = magnitude as i64;
        Some(if negative { -magnitude } else { magnitude })
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
}

/// Append the decimal digits from `pos` on to `mantissa` (which wraps past 19 digits: callers
/// count the digits); where they stop. Eight at a time while eight are digits (SWAR, as
/// `fast_float` does), and the last one to seven from the same load of eight bytes when there
/// are eight left in the text; one at a time only near its end.
#[inline(always)]
#[allow(clippy::inline_always)] // inside `number_value`'s walk, up to twice a number
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
            let padded = pad_digits(word, count as usize);
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

/// The first `count` (1 to 7) bytes of `word` (digits, the first the lowest) moved to its top, '0's
/// below them: eight digits of the same value, for `digits_value`.
#[inline(always)]
#[allow(clippy::inline_always)] // a shift and an or, once per short integer
fn pad_digits(word: u64, count: usize) -> u64 {
    (word << (64 - 8 * count)) | (0x3030_3030_3030_3030 >> (8 * count))
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

#[cfg(test)]
mod tests {
    use super::*;

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
        use crate::json::Number;
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
    fn short_ints_read_as_number_value_reads_them() {
        // Every length around the two words, signs, leading zeros, floats' rests and stops, each
        // with text after it (16 bytes are needed) and at the text's end (left to `number_value`).
        let mut cases = Vec::new();
        for digits in ["0", "7", "42", "100", "123456789", "12345678", "1234567890123", "123456789012345"] {
            for more in ["", "1", "0", "12"] {
                for stop in [",", "]", ".5", "e3", "E-2", " ", "}", "x"] {
                    cases.push(format!("{digits}{more}{stop}"));
                    cases.push(format!("-{digits}{more}{stop}"));
                }
            }
        }
        cases.extend(
            ["01,", "-01,", "-,", "-", "1234567890123456,", "9999999999999999999,", "00", "-0,"].map(String::from),
        );
        for case in &cases {
            for tail in ["", ",1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16"] {
                let text = format!("{case}{tail}");
                let mut fast = Scanner::new(&text, 8);
                let mut slow = Scanner::new(&text, 8);
                let expected = slow.number_value();
                match fast.short_int() {
                    Some(value) => {
                        assert_eq!(expected, Ok(Number::Int(value)), "{text}");
                        assert_eq!(fast.pos, slow.pos, "{text}");
                        assert_eq!(fast.longest_integer, slow.longest_integer, "{text}");
                    }
                    None => assert_eq!(fast.pos, 0, "{text}"),
                }
            }
        }
    }

    #[test]
    fn records_the_longest_integer() {
        let mut scanner = Scanner::new("[12345, -1.5e300, 1234567, 0.12345678901234]", 8);
        scanner.value().unwrap();
        assert_eq!(scanner.longest_integer, 7);
    }
}

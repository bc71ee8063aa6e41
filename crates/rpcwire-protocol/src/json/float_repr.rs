//! A finite float written exactly as Python's `repr(float)` writes it (the shortest digits that
//! round-trip, by Żmij, in Python's layout), so that both cores write the same bytes.

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
    use super::write_float_repr;

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

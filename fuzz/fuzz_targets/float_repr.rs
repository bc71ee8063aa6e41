//! `write_float_repr` (Python's `repr(float)`, written with Żmij) for every finite double, against
//! Ryu's shortest digits: the text reads back as the same double, carries exactly Ryu's significant
//! digits (two implementations of the shortest round trip must agree), and is laid out as Python
//! lays it out: positional from 1e-4 up to 1e16 (`.0` on integral values), else `1.5e+16`, `1e-05`.
#![no_main]

use libfuzzer_sys::fuzz_target;

use rpcwire_protocol::json;

/// The significant digits of a float literal and the decimal exponent of the first one.
fn decompose(text: &str) -> (String, i32) {
    let unsigned = text.trim_start_matches('-');
    let (mantissa, exponent) = match unsigned.split_once(['e', 'E']) {
        Some((mantissa, exponent)) => (mantissa, exponent.parse::<i32>().expect("an exponent")),
        None => (unsigned, 0),
    };
    let (integer, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let all = format!("{integer}{fraction}");
    let leading_zeros = all.len() - all.trim_start_matches('0').len();
    let digits = all.trim_start_matches('0').trim_end_matches('0');
    if digits.is_empty() {
        return ("0".to_owned(), 0);
    }
    let position = i32::try_from(integer.len()).expect("short") - i32::try_from(leading_zeros).expect("short");
    (digits.to_owned(), position + exponent - 1)
}

fuzz_target!(|data: &[u8]| {
    let Some(bytes) = data.get(..8) else { return };
    let value = f64::from_le_bytes(bytes.try_into().expect("8 bytes"));
    if !value.is_finite() {
        return;
    }
    let mut out = Vec::new();
    json::write_float_repr(&mut out, value);
    let text = std::str::from_utf8(&out).expect("ASCII");
    let back: f64 = text.parse().expect("a float literal");
    assert_eq!(back.to_bits(), value.to_bits(), "{text} does not read back as {value:e}");
    assert_eq!(text.starts_with('-'), value.is_sign_negative(), "{text}");
    let (digits, exponent) = decompose(text);
    let shortest = decompose(ryu::Buffer::new().format_finite(value));
    assert_eq!((&digits, exponent), (&shortest.0, shortest.1), "{text}: not Ryu's digits");

    let unsigned = text.trim_start_matches('-');
    if value != 0.0 && !(-4..16).contains(&exponent) {
        let (mantissa, exp) = unsigned.split_once('e').unwrap_or_else(|| panic!("{text}: expected an exponent"));
        assert!(exp.len() >= 3 && (exp.starts_with('+') || exp.starts_with('-')), "{text}: exponent {exp}");
        let mut parts = mantissa.split('.');
        assert_eq!(parts.next().map(str::len), Some(1), "{text}: one digit before the point");
        if let Some(fraction) = parts.next() {
            assert!(!fraction.is_empty() && !fraction.ends_with('0'), "{text}: fraction {fraction}");
        }
    } else {
        assert!(!unsigned.contains('e'), "{text}: expected positional");
        let (integer, fraction) = unsigned.split_once('.').unwrap_or_else(|| panic!("{text}: expected a point"));
        assert!(!integer.is_empty() && (integer == "0" || !integer.starts_with('0')), "{text}");
        assert!(fraction == "0" || !fraction.ends_with('0'), "{text}: fraction {fraction}");
    }
});

//! A Python `str` written as a JSON string (`encode_str`): read from `CPython`'s own storage where the
//! interpreter's layout is known (no UTF-8 copy made), through the public C API elsewhere (the
//! `public-str-api` feature measures that path on `CPython`), lone surrogates escaped as `\udxxx`.

use pyo3::prelude::*;
use pyo3::types::PyString;
use pyo3::{ffi, intern};

#[cfg(not(any(Py_3_14, PyPy, GraalPy, Py_LIMITED_API, feature = "public-str-api")))]
use rpcwire_protocol::json::write_escaped_code_points;
use rpcwire_protocol::json::{write_ascii_str, write_escaped_str};

/// Append a Python `str` as a JSON string.
pub(crate) fn encode_str(out: &mut Vec<u8>, text: &Bound<'_, PyString>) -> PyResult<()> {
    // SAFETY: GIL held (`text` is bound) and `text` is a live `str`.
    if unsafe { write_str(out, text.as_ptr()) } {
        return Ok(());
    }
    encode_str_public(out, text)
}

/// Append the `str` (or `str` subclass) `text` as a JSON string if that needs no Python code: `false`
/// (nothing written) for a string that needs `encode_str_public`.
///
/// Inline, the test for the usual `str` (compact ASCII: keys, names, most values) and its
/// writing; out of line, everything else (bench/README.md).
///
/// This reads `CPython`'s `str` layout (`PyUnicode_IS_COMPACT`, `_IS_ASCII`, `_KIND`, `_DATA`),
/// which pyo3 exposes for `CPython` 3.10 to 3.13 only: 3.14 (whose bitfields pyo3 no longer reads),
/// `PyPy`, `GraalPy` and the limited API get the public C API's path instead, as does the
/// `public-str-api` feature (to measure and test that path on `CPython`).
///
/// # Safety
/// The GIL is held and `text` points to a live `str`.
#[cfg(not(any(Py_3_14, PyPy, GraalPy, Py_LIMITED_API, feature = "public-str-api")))]
#[inline]
pub(super) unsafe fn write_str(out: &mut Vec<u8>, text: *mut ffi::PyObject) -> bool {
    // SAFETY: (the caller's) a `str` is immutable: a compact ASCII string's length and data
    // pointer describe its bytes for as long as the reference lives.
    unsafe {
        if ffi::PyUnicode_IS_READY(text) != 0
            && ffi::PyUnicode_IS_COMPACT(text) != 0
            && ffi::PyUnicode_IS_ASCII(text) != 0
        {
            let length = usize::try_from(ffi::PyUnicode_GET_LENGTH(text)).unwrap_or(0);
            write_ascii_str(out, std::slice::from_raw_parts(ffi::PyUnicode_DATA(text).cast::<u8>(), length));
            return true;
        }
        write_any_str(out, text)
    }
}

/// `write_str` for any `str`: `false` for one that is not ready (a legacy string before 3.12).
///
/// # Safety
/// As `write_str`.
#[cfg(not(any(Py_3_14, PyPy, GraalPy, Py_LIMITED_API, feature = "public-str-api")))]
#[inline(never)]
unsafe fn write_any_str(out: &mut Vec<u8>, text: *mut ffi::PyObject) -> bool {
    // SAFETY: (the caller's) a ready string's kind, length and data pointer describe its code
    // points for as long as the reference lives; a non-ASCII one (compact or not) begins with a
    // `PyCompactUnicodeObject`, whose UTF-8 pointer, once set, keeps its bytes as long as the string.
    unsafe {
        if ffi::PyUnicode_IS_READY(text) == 0 {
            return false;
        }
        // A non-ASCII `str` whose UTF-8 form CPython already keeps (made by an earlier
        // `PyUnicode_AsUTF8`: another encoder, a C API parse, pyo3's `to_str`) is escaped from
        // those bytes, which need no narrowing; none is made for it here. Not without the GIL
        // (3.13t): another thread may be filling that cache, its pointer and length read half-set.
        #[cfg(not(Py_GIL_DISABLED))]
        if ffi::PyUnicode_IS_ASCII(text) == 0 {
            let compact = &*text.cast::<ffi::PyCompactUnicodeObject>();
            if !compact.utf8.is_null() {
                let utf8_length = usize::try_from(compact.utf8_length).unwrap_or(0);
                write_escaped_str(out, std::slice::from_raw_parts(compact.utf8.cast::<u8>(), utf8_length));
                return true;
            }
        }
        let length = usize::try_from(ffi::PyUnicode_GET_LENGTH(text)).unwrap_or(0);
        let data = ffi::PyUnicode_DATA(text);
        match ffi::PyUnicode_KIND(text) {
            ffi::PyUnicode_1BYTE_KIND if ffi::PyUnicode_IS_ASCII(text) != 0 => {
                write_ascii_str(out, std::slice::from_raw_parts(data.cast::<u8>(), length));
            }
            ffi::PyUnicode_1BYTE_KIND => {
                write_escaped_code_points(out, std::slice::from_raw_parts(data.cast::<u8>(), length));
            }
            ffi::PyUnicode_2BYTE_KIND => {
                write_escaped_code_points(out, std::slice::from_raw_parts(data.cast::<u16>(), length));
            }
            _ => write_escaped_code_points(out, std::slice::from_raw_parts(data.cast::<u32>(), length)),
        }
    }
    true
}

/// `write_str` through the public C API: `PyUnicode_AsUTF8AndSize` gives a compact ASCII string's
/// own bytes, and for any other string its UTF-8 form, made once and kept by the `str` (as
/// `str.encode` would make it, held as long as the string lives). `false` for a string with lone
/// surrogates, which has no UTF-8 form.
///
/// # Safety
/// As the internals' `write_str`.
#[cfg(any(Py_3_14, PyPy, GraalPy, Py_LIMITED_API, feature = "public-str-api"))]
#[inline]
pub(super) unsafe fn write_str(out: &mut Vec<u8>, text: *mut ffi::PyObject) -> bool {
    let mut length: ffi::Py_ssize_t = 0;
    // SAFETY: (the caller's) the result is NULL with an exception set, or the string's UTF-8
    // bytes, kept by the string for as long as it lives.
    unsafe {
        let data = ffi::PyUnicode_AsUTF8AndSize(text, &raw mut length);
        if data.is_null() {
            ffi::PyErr_Clear();
            return false;
        }
        let bytes = std::slice::from_raw_parts(data.cast::<u8>(), usize::try_from(length).unwrap_or(0));
        // `write_ascii_str` is the short ASCII strings' fast path; it sends longer ones to `write_escaped_str`.
        if bytes.len() <= 32 && bytes.is_ascii() {
            write_ascii_str(out, bytes);
        } else {
            write_escaped_str(out, bytes);
        }
    }
    true
}

/// `encode_str` for a string `write_str` did not write: its WTF-8 form, lone surrogates escaped as
/// `\udxxx`.
#[cold]
fn encode_str_public(out: &mut Vec<u8>, text: &Bound<'_, PyString>) -> PyResult<()> {
    if let Ok(utf8) = text.to_str() {
        write_escaped_str(out, utf8.as_bytes());
        return Ok(());
    }
    let wtf8 = text.call_method1(intern!(text.py(), "encode"), ("utf-8", "surrogatepass"))?;
    write_escaped_str(out, wtf8.cast::<pyo3::types::PyBytes>()?.as_bytes());
    Ok(())
}

//! JSON strings into Python `str` objects: from the caller's `StringCache` for a short key or name, made
//! straight from the scanner's output otherwise, at their final width (`PyUnicode_New` filled by the
//! protocol crate's `widen_wtf8` / `Scanner::string_units`, no second pass through Python's UTF-8 decoder), lone
//! surrogates kept as `json.loads` keeps them.

use pyo3::exceptions::PyValueError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyString;

#[cfg(not(any(Py_3_14, PyPy, GraalPy, Py_LIMITED_API, feature = "public-str-api")))]
use rpcwire_protocol::json::{count_chars, widen_wtf8, UnitsStop, Width};
use rpcwire_protocol::json::{unescape_into, JsonStr, Scanner, StrText};

use crate::errors::Error;
use crate::strings::StringCache;

/// A JSON string (as the scanner saw it) as a Python `str`, from `strings` when it is given.
pub(crate) fn decode_str<'py>(
    py: Python<'py>,
    text: JsonStr<'_>,
    strings: Option<&mut StringCache>,
) -> PyResult<Bound<'py, PyString>> {
    cached_str_from_json(py, text.raw, text.escaped, strings, &mut Vec::new())
}

/// A JSON string's content `raw` (as written; `escaped` if it holds an escape: `JsonStr`'s fields) as a
/// `str`: from `strings` when it is given and `raw` has no escapes, else made anew.
///
/// The parts apart, not a `JsonStr`: three words would go through the caller's stack (`Decoder::value`
/// stores a member name there for every key), its fields go in registers.
pub(super) fn cached_str_from_json<'py>(
    py: Python<'py>,
    raw: &str,
    escaped: bool,
    strings: Option<&mut StringCache>,
    scratch: &mut Vec<u8>,
) -> PyResult<Bound<'py, PyString>> {
    match strings {
        Some(strings) if !escaped => Ok(strings.get(py, raw)),
        _ => str_from_json(py, JsonStr { raw, escaped }, scratch),
    }
}

fn str_from_json<'py>(py: Python<'py>, text: JsonStr<'_>, scratch: &mut Vec<u8>) -> PyResult<Bound<'py, PyString>> {
    if !text.escaped {
        return Ok(PyString::new(py, text.raw));
    }
    scratch.clear();
    let has_surrogate = unescape_into(text.raw.as_bytes(), scratch);
    str_from_wtf8(py, scratch, has_surrogate)
}

/// The `str` whose WTF-8 form is `text` (UTF-8 unless `has_surrogate`: the scanner's output).
fn str_from_wtf8<'py>(py: Python<'py>, text: &[u8], has_surrogate: bool) -> PyResult<Bound<'py, PyString>> {
    let length = ffi::Py_ssize_t::try_from(text.len()).map_err(|e| PyValueError::new_err(e.to_string()))?;
    // Lone surrogates: only Python's "surrogatepass" handler turns their WTF-8 form into a `str`.
    let errors = if has_surrogate { c"surrogatepass".as_ptr() } else { std::ptr::null() };
    // SAFETY: the pointer and length describe `text`, which outlives the call; the handler name is
    // NULL (strict) or a NUL-terminated literal. The result is a new reference or NULL with an exception.
    unsafe {
        let decoded = ffi::PyUnicode_DecodeUTF8(text.as_ptr().cast(), length, errors);
        Ok(Bound::from_owned_ptr_or_err(py, decoded)?.cast_into_unchecked())
    }
}

/// A string the scanner read with [`Scanner::string_text`] (its text in `scratch` unless it had no
/// escape) as a `str`.
pub(super) fn str_from_text<'py>(py: Python<'py>, text: StrText<'_>, scratch: &[u8]) -> PyResult<Bound<'py, PyString>> {
    #[cfg(not(any(Py_3_14, PyPy, GraalPy, Py_LIMITED_API, feature = "public-str-api")))]
    if text.width != Width::Ascii && scratch.len().max(text.unescaped.map_or(0, str::len)) >= WIDE_DIRECT_MIN {
        return new_wide_str(py, text.unescaped.map_or(scratch, str::as_bytes), text.width);
    }
    #[cfg(not(any(Py_3_14, PyPy, GraalPy, Py_LIMITED_API, feature = "public-str-api")))]
    if text.width == Width::Ascii {
        let ascii = text.unescaped.map_or(scratch, str::as_bytes);
        // One character: Python's decoder hands out its cached one. Longer: a copy into the new
        // `str`, without the decoder's walk that finds again what the scanner found (all ASCII).
        if ascii.len() > 1 {
            return new_str_filled(py, ascii.len(), Width::Ascii, |units| match units {
                Units::Narrow(units) => {
                    units.copy_from_slice(ascii);
                    units.len()
                }
                Units::Ucs2(_) | Units::Ucs4(_) => 0,
            });
        }
    }
    match text.unescaped {
        Some(raw) => Ok(PyString::new(py, raw)),
        None => str_from_wtf8(py, scratch, text.has_surrogate),
    }
}

/// Texts of at least this many bytes with a character beyond ASCII are stored by [`new_wide_str`];
/// shorter ones by Python's decoder, which hands out its cached one-character strings.
#[cfg(not(any(Py_3_14, PyPy, GraalPy, Py_LIMITED_API, feature = "public-str-api")))]
const WIDE_DIRECT_MIN: usize = 32;

/// The `str` of the WTF-8 `text`, whose widest character has `width` (not ASCII): made with
/// `PyUnicode_New` at that width and filled by `widen_wtf8`, without Python's UTF-8 decoder (which
/// would find the width again, and copy what it wrote each time a wider character comes).
#[cfg(not(any(Py_3_14, PyPy, GraalPy, Py_LIMITED_API, feature = "public-str-api")))]
fn new_wide_str<'py>(py: Python<'py>, text: &[u8], width: Width) -> PyResult<Bound<'py, PyString>> {
    let chars = count_chars(text);
    // `widen_wtf8` writes one unit per character of `text`: all `chars` of them.
    new_str_filled(py, chars, width, |units| match units {
        Units::Narrow(units) => widen_wtf8(text, units),
        Units::Ucs2(units) => widen_wtf8(text, units),
        Units::Ucs4(units) => widen_wtf8(text, units),
    })
}

/// Strings whose text takes more bytes than this (escapes resolved) are not unescaped into the
/// decoder's scratch buffer but read again from their start straight into the `str` ([`long_str`]): a
/// long document is then held once as text, not twice. Below it the one walk through the buffer is kept
/// (a `str` made at its final size: no storage grown or shrunk). Small, because a long string's first
/// bytes go to the buffer before it is known to be long, and the pages the buffer touched count in the
/// peak memory.
#[cfg(not(any(Py_3_14, PyPy, GraalPy, Py_LIMITED_API, feature = "public-str-api")))]
pub(super) const LONG_TEXT: usize = 4096;
/// Without `PyUnicode_New` every string is unescaped into the scratch buffer.
#[cfg(any(Py_3_14, PyPy, GraalPy, Py_LIMITED_API, feature = "public-str-api"))]
pub(super) const LONG_TEXT: usize = usize::MAX;

/// The most characters a long string's `str` has room for at first; a longer text grows it (by
/// `realloc`, which moves large blocks without copying them). Below it the room is what the JSON text
/// left can hold (one byte at least a character): never too little, so the storage is not moved while
/// it is written. Pages of it that are never written are never touched, and the end is given back
/// when the `str` is cut to its length: a frame's peak memory holds the text once (growing from less
/// room, each `realloc` that copies held it twice for a moment).
#[cfg(not(any(Py_3_14, PyPy, GraalPy, Py_LIMITED_API, feature = "public-str-api")))]
const FIRST_ROOM: usize = 1 << 24;

/// The string at the scanner's cursor (its opening quote) as a `str`, read in one walk straight into the
/// `str`'s storage by `Scanner::string_units`: the storage starts ASCII and is made wider when a wider
/// character comes (what was written copied over, once a width), with room for as many characters as
/// the JSON text left can hold (up to `FIRST_ROOM`, grown when full), and is cut to its length at the
/// end. Every escape is read once, and the text is held nowhere but in the `str`.
///
/// Out of line: `Decoder::value`, which recurses for every value, keeps its stack frame small.
#[cfg(not(any(Py_3_14, PyPy, GraalPy, Py_LIMITED_API, feature = "public-str-api")))]
#[inline(never)]
pub(super) fn long_str<'py>(py: Python<'py>, scanner: &mut Scanner<'_>) -> Result<Bound<'py, PyString>, Error> {
    let mut cursor = scanner.string_cursor();
    let mut width = Width::Ascii;
    let mut room = scanner.string_room(&cursor).min(FIRST_ROOM);
    let mut string = new_str(py, room, width)?;
    loop {
        // SAFETY: `string` is a new `str` of `room` characters of kind `width`, not shared yet.
        let stop = unsafe {
            let data = ffi::PyUnicode_DATA(string.as_ptr());
            match width {
                Width::Ascii | Width::Latin1 => {
                    scanner.string_units(&mut cursor, std::slice::from_raw_parts_mut(data.cast::<u8>(), room), width)
                }
                Width::Ucs2 => {
                    scanner.string_units(&mut cursor, std::slice::from_raw_parts_mut(data.cast::<u16>(), room), width)
                }
                Width::Ucs4 => {
                    scanner.string_units(&mut cursor, std::slice::from_raw_parts_mut(data.cast::<u32>(), room), width)
                }
            }
        }?;
        match stop {
            UnitsStop::Closed => break,
            UnitsStop::Full => {
                room = cursor.at + scanner.string_room(&cursor).min(room * 3);
                string = resize_str(string, room)?;
            }
            UnitsStop::Wider(wider) => {
                room = room.min(cursor.at + scanner.string_room(&cursor));
                let widened = new_str(py, room, wider)?;
                copy_units(&string, &widened, cursor.at)?;
                (string, width) = (widened, wider);
            }
        }
    }
    let string = resize_str(string, cursor.at)?;
    // SAFETY: `new_str` and `resize_str` make `str`s.
    Ok(unsafe { string.cast_into_unchecked() })
}

/// Never called: `LONG_TEXT` sends no string here without `PyUnicode_New`.
#[cfg(any(Py_3_14, PyPy, GraalPy, Py_LIMITED_API, feature = "public-str-api"))]
pub(super) fn long_str<'py>(py: Python<'py>, scanner: &mut Scanner<'_>) -> Result<Bound<'py, PyString>, Error> {
    Ok(str_from_json(py, scanner.string()?, &mut Vec::new())?)
}

/// A new `str` of `chars` characters of kind `width`, its storage not written yet.
#[cfg(not(any(Py_3_14, PyPy, GraalPy, Py_LIMITED_API, feature = "public-str-api")))]
fn new_str(py: Python<'_>, chars: usize, width: Width) -> PyResult<Bound<'_, PyAny>> {
    let length = ffi::Py_ssize_t::try_from(chars).map_err(|e| PyValueError::new_err(e.to_string()))?;
    // SAFETY: `PyUnicode_New` returns a new reference or NULL with an exception.
    unsafe { Bound::from_owned_ptr_or_err(py, ffi::PyUnicode_New(length, width.max_char())) }
}

/// `string` (a new `str` no one else holds, whose hash was never asked) at `chars` characters: its storage
/// reallocated, its first characters kept.
#[cfg(not(any(Py_3_14, PyPy, GraalPy, Py_LIMITED_API, feature = "public-str-api")))]
fn resize_str(string: Bound<'_, PyAny>, chars: usize) -> PyResult<Bound<'_, PyAny>> {
    let py = string.py();
    let length = ffi::Py_ssize_t::try_from(chars).map_err(|e| PyValueError::new_err(e.to_string()))?;
    let mut pointer = string.into_ptr();
    // SAFETY: `pointer` is the one reference to a `str`; `PyUnicode_Resize` replaces it with the resized
    // string's (the same object, or a new one and the old released) or, failing, leaves it and sets an
    // exception. Either way it is a reference this function owns.
    unsafe {
        let status = ffi::PyUnicode_Resize(&raw mut pointer, length);
        let string = Bound::from_owned_ptr(py, pointer);
        if status != 0 {
            return Err(PyErr::fetch(py));
        }
        Ok(string)
    }
}

/// Copy the first `chars` characters of `from` into `to` (a new `str` of a width that holds them).
#[cfg(not(any(Py_3_14, PyPy, GraalPy, Py_LIMITED_API, feature = "public-str-api")))]
fn copy_units(from: &Bound<'_, PyAny>, to: &Bound<'_, PyAny>, chars: usize) -> PyResult<()> {
    let length = ffi::Py_ssize_t::try_from(chars).map_err(|e| PyValueError::new_err(e.to_string()))?;
    // SAFETY: both are `str`s of at least `chars` characters; `to` is new and not shared, and its kind
    // holds every character of `from`. Returns the count copied or -1 with an exception.
    if unsafe { ffi::PyUnicode_CopyCharacters(to.as_ptr(), 0, from.as_ptr(), 0, length) } < 0 {
        return Err(PyErr::fetch(from.py()));
    }
    Ok(())
}

/// The storage of a new `str`, by kind.
#[cfg(not(any(Py_3_14, PyPy, GraalPy, Py_LIMITED_API, feature = "public-str-api")))]
enum Units<'s> {
    Narrow(&'s mut [u8]),
    Ucs2(&'s mut [u16]),
    Ucs4(&'s mut [u32]),
}

/// A new `str` of `chars` characters of kind `width` (its exact widest: Python's canonical form),
/// its storage written by `fill`, which returns how many units it wrote. Should it write fewer than
/// `chars` (it must not), the rest is zeros rather than whatever the allocator left there.
#[cfg(not(any(Py_3_14, PyPy, GraalPy, Py_LIMITED_API, feature = "public-str-api")))]
fn new_str_filled(
    py: Python<'_>,
    chars: usize,
    width: Width,
    fill: impl FnOnce(Units<'_>) -> usize,
) -> PyResult<Bound<'_, PyString>> {
    let length = ffi::Py_ssize_t::try_from(chars).map_err(|e| PyValueError::new_err(e.to_string()))?;
    // SAFETY: `PyUnicode_New` returns a new, compact, not yet shared string of `chars` characters
    // whose kind holds `width.max_char()`, or NULL with an exception. Its data is `chars` units of
    // that kind (the slices below), each written before the string is handed out: by `fill`, and the
    // units it did not write are zeroed.
    unsafe {
        let string = Bound::from_owned_ptr_or_err(py, ffi::PyUnicode_New(length, width.max_char()))?;
        let data = ffi::PyUnicode_DATA(string.as_ptr());
        match width {
            Width::Ascii | Width::Latin1 => {
                let units = std::slice::from_raw_parts_mut(data.cast::<u8>(), chars);
                let written = fill(Units::Narrow(units)).min(chars);
                units[written..].fill(0);
            }
            Width::Ucs2 => {
                let units = std::slice::from_raw_parts_mut(data.cast::<u16>(), chars);
                let written = fill(Units::Ucs2(units)).min(chars);
                units[written..].fill(0);
            }
            Width::Ucs4 => {
                let units = std::slice::from_raw_parts_mut(data.cast::<u32>(), chars);
                let written = fill(Units::Ucs4(units)).min(chars);
                units[written..].fill(0);
            }
        }
        Ok(string.cast_into_unchecked())
    }
}

//! JSON ⇄ Python, each in one pass with no intermediate tree.
//!
//! Decoding walks text that the envelope check already validated and builds Python objects as it
//! goes (as `json.loads` would build them: `int` of any size, `float`, `str` possibly holding lone
//! surrogates, `list`, `dict` where the last duplicate key wins).
//!
//! Encoding writes the exact bytes of `json.dumps(value, ensure_ascii=False, separators=(",", ":"),
//! allow_nan=False)`: the same type checks in the same order, the same key coercions, the same
//! error types and messages, the same guard against circular containers and deep recursion. Both
//! implementations therefore write identical bytes and fail identically.

use pyo3::exceptions::{PyRecursionError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use pyo3::{ffi, intern, Borrowed};

use smallvec::SmallVec;

#[cfg(not(any(Py_3_14, PyPy, GraalPy, Py_LIMITED_API, feature = "public-str-api")))]
use rpcwire_protocol::json::write_escaped_code_points;
#[cfg(not(any(PyPy, GraalPy, Py_LIMITED_API)))]
use rpcwire_protocol::json::write_short;
#[cfg(not(any(Py_3_14, PyPy, GraalPy, Py_LIMITED_API, feature = "public-str-api")))]
use rpcwire_protocol::json::{count_chars, unescape_units, widen_wtf8, StrShape, Width};
use rpcwire_protocol::json::{
    unescape_into, write_ascii_str, write_escaped_str, write_float_repr, JsonStr, Number, Scanner, StrText,
};
use rpcwire_protocol::stack::StackFloor;

use crate::errors::{Error, SyntaxError};
use crate::strings::StringCache;

/// Integer literals with at most this many digits fit an `i64`; longer ones go through `int()`.
const I64_SAFE_DIGITS: usize = 18;

/// Turn one JSON text into Python objects; object keys come from `strings` when it is given.
pub(crate) fn decode<'py>(
    py: Python<'py>,
    text: &str,
    max_depth: usize,
    strings: Option<&mut StringCache>,
) -> Result<Bound<'py, PyAny>, Error> {
    let mut scanner = Scanner::new(text, max_depth);
    let value = decode_value(py, &mut scanner, strings)?;
    scanner.finish()?;
    Ok(value)
}

/// Turn the value at the scanner's position into Python objects, validating it as it goes.
pub(crate) fn decode_value<'py>(
    py: Python<'py>,
    scanner: &mut Scanner<'_>,
    strings: Option<&mut StringCache>,
) -> Result<Bound<'py, PyAny>, Error> {
    Decoder { py, scanner, scratch: Vec::new(), strings, items: ItemStack::take() }.value()
}

/// Whether an integer literal of `digits` digits is more than Python's `int()` accepts
/// (`sys.get_int_max_str_digits()`; `CPython` never allows fewer than 640). `CPython` 3.10.0 to
/// 3.10.6 have no such function and `int()` no limit: its absence means no limit.
pub(crate) fn exceeds_int_digit_limit(py: Python<'_>, digits: usize) -> PyResult<bool> {
    if digits <= 640 {
        return Ok(false);
    }
    let Some(get_limit) = py.import("sys")?.getattr_opt(intern!(py, "get_int_max_str_digits"))? else {
        return Ok(false);
    };
    let limit: usize = get_limit.call0()?.extract()?;
    Ok(limit != 0 && digits > limit)
}

/// A JSON string (as the scanner saw it) as a Python `str`, from `strings` when it is given.
pub(crate) fn decode_str<'py>(
    py: Python<'py>,
    text: JsonStr<'_>,
    strings: Option<&mut StringCache>,
) -> PyResult<Bound<'py, PyString>> {
    cached_str_from_json(py, text, strings, &mut Vec::new())
}

/// `text` as a `str`: from `strings` when it is given and `text` has no escapes, else made anew.
fn cached_str_from_json<'py>(
    py: Python<'py>,
    text: JsonStr<'_>,
    strings: Option<&mut StringCache>,
    scratch: &mut Vec<u8>,
) -> PyResult<Bound<'py, PyString>> {
    match strings {
        Some(strings) if !text.escaped => Ok(strings.get(py, text.raw)),
        _ => str_from_json(py, text, scratch),
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
fn str_from_text<'py>(py: Python<'py>, text: StrText<'_>, scratch: &[u8]) -> PyResult<Bound<'py, PyString>> {
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
/// decoder's scratch buffer but measured first and then written straight into the `str`
/// ([`long_str`]): a long document is then held once as text, not twice. Below it the one walk
/// through the buffer is kept (fewer instructions on text with an escape every few bytes: two walks
/// pay the cost of each run twice). Small, because a long string's first bytes go to the buffer
/// before it is known to be long, and the pages the buffer touched count in the peak memory.
#[cfg(not(any(Py_3_14, PyPy, GraalPy, Py_LIMITED_API, feature = "public-str-api")))]
const LONG_TEXT: usize = 4096;
/// Without `PyUnicode_New` every string is unescaped into the scratch buffer.
#[cfg(any(Py_3_14, PyPy, GraalPy, Py_LIMITED_API, feature = "public-str-api"))]
const LONG_TEXT: usize = usize::MAX;

/// The `str` of a long escaped string that [`Scanner::string_shape`] measured: made at its final
/// length and kind, and filled by `unescape_units` from the JSON text itself.
#[cfg(not(any(Py_3_14, PyPy, GraalPy, Py_LIMITED_API, feature = "public-str-api")))]
fn long_str<'py>(py: Python<'py>, shape: StrShape<'_>) -> PyResult<Bound<'py, PyString>> {
    let raw = shape.raw.as_bytes();
    // `unescape_units` writes one unit per character `string_shape` counted: all `chars` of them.
    new_str_filled(py, shape.chars, shape.width, |units| match units {
        Units::Narrow(units) => unescape_units(raw, units),
        Units::Ucs2(units) => unescape_units(raw, units),
        Units::Ucs4(units) => unescape_units(raw, units),
    })
}

/// Never called: `LONG_TEXT` sends no string here without `PyUnicode_New`.
#[cfg(any(Py_3_14, PyPy, GraalPy, Py_LIMITED_API, feature = "public-str-api"))]
fn long_str<'py>(py: Python<'py>, shape: rpcwire_protocol::json::StrShape<'_>) -> PyResult<Bound<'py, PyString>> {
    str_from_json(py, JsonStr { raw: shape.raw, escaped: true }, &mut Vec::new())
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

/// A JSON integer literal as a Python `int` (any size, within Python's digit limit).
pub(crate) fn int_from_json<'py>(py: Python<'py>, digits: &str) -> PyResult<Bound<'py, PyAny>> {
    if digits.len() <= I64_SAFE_DIGITS {
        if let Ok(small) = digits.parse::<i64>() {
            return Ok(small.into_pyobject(py)?.into_any());
        }
    }
    py.get_type::<PyInt>().call1((digits,))
}

/// A JSON number with a fraction or an exponent as a Python `float`.
pub(crate) fn float_from_json<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyAny>> {
    // Rust's parse is correctly rounded like Python's; "1e400" becomes inf in both.
    let value: f64 = text.parse().map_err(|e: std::num::ParseFloatError| PyValueError::new_err(e.to_string()))?;
    Ok(PyFloat::new(py, value).into_any())
}

struct Decoder<'s, 'a, 'py, 'c> {
    py: Python<'py>,
    scanner: &'s mut Scanner<'a>,
    /// Reused for unescaping strings.
    scratch: Vec<u8>,
    strings: Option<&'c mut StringCache>,
    /// The items of the arrays being read, the innermost array's last.
    items: ItemStack,
}

/// The items of the arrays being decoded (strong references), the innermost array's last: one stack
/// shared by every level, so that each list is made at its final length once its `]` is read, and
/// an array of any size is gathered without a buffer of its own. Its storage is kept by the thread
/// from one decoding to the next (up to [`KEPT_ITEMS`] items), so that it grows rarely.
struct ItemStack(Vec<*mut ffi::PyObject>);

/// The most items whose storage a thread keeps for its next decoding.
const KEPT_ITEMS: usize = 1 << 15;

thread_local! {
    /// The storage of the last [`ItemStack`] dropped on this thread (empty while one is in use).
    static ITEM_STORAGE: std::cell::Cell<Vec<*mut ffi::PyObject>> = const { std::cell::Cell::new(Vec::new()) };
}

impl ItemStack {
    /// The thread's kept storage, or a new one if a decoding is using it (one nested in another) or
    /// the thread's storage is gone (code run by a thread's exit).
    fn take() -> Self {
        Self(ITEM_STORAGE.try_with(std::cell::Cell::take).unwrap_or_default())
    }
}

impl Drop for ItemStack {
    /// Release the items of arrays a failed decoding left unfinished, and keep the storage.
    fn drop(&mut self) {
        for item in self.0.drain(..) {
            // SAFETY: each is a strong reference the stack owns; the GIL is held while decoding.
            unsafe { ffi::Py_DECREF(item) };
        }
        if self.0.capacity() <= KEPT_ITEMS {
            let storage = std::mem::take(&mut self.0);
            // `try_with`: nothing is kept once the thread's storage is gone (the thread is ending).
            let _ = ITEM_STORAGE.try_with(|kept| kept.set(storage));
        }
    }
}

impl<'py> Decoder<'_, '_, 'py, '_> {
    fn value(&mut self) -> Result<Bound<'py, PyAny>, Error> {
        let py = self.py;
        Ok(match self.scanner.peek() {
            Some(b'"') => self.string()?,
            Some(b'{') => {
                let dict = PyDict::new(py);
                if self.scanner.open(b'{')? {
                    loop {
                        let key = self.scanner.key()?;
                        let key = cached_str_from_json(py, key, self.strings.as_deref_mut(), &mut self.scratch)?;
                        let value = self.value()?;
                        // SAFETY: `dict` is a `dict`; key and value are live references it takes its own of.
                        if unsafe { ffi::PyDict_SetItem(dict.as_ptr(), key.as_ptr(), value.as_ptr()) } != 0 {
                            return Err(PyErr::fetch(py).into());
                        }
                        if !self.scanner.more(b'}')? {
                            break;
                        }
                    }
                }
                dict.into_any()
            }
            Some(b'[') => {
                let first = self.items.0.len();
                if self.scanner.open(b'[')? {
                    loop {
                        let item = self.value()?;
                        self.items.0.push(item.into_ptr());
                        if !self.scanner.more(b']')? {
                            break;
                        }
                    }
                }
                self.list_from(first)?
            }
            Some(b't') => {
                self.scanner.value()?;
                PyBool::new(py, true).to_owned().into_any()
            }
            Some(b'f') => {
                self.scanner.value()?;
                PyBool::new(py, false).to_owned().into_any()
            }
            Some(b'n') => {
                self.scanner.value()?;
                py.None().into_bound(py)
            }
            // A number, or no value at all: the number's scanner says which error then.
            _ => self.number()?,
        })
    }

    fn string(&mut self) -> Result<Bound<'py, PyAny>, Error> {
        // One walk over the string: validated, unescaped and measured together; two for a long one
        // with escapes (measured, then written straight into the `str`).
        self.scratch.clear();
        Ok(match self.scanner.string_text(&mut self.scratch, LONG_TEXT)? {
            Some(text) => str_from_text(self.py, text, &self.scratch)?.into_any(),
            None => long_str(self.py, self.scanner.string_shape()?)?.into_any(),
        })
    }

    fn number(&mut self) -> Result<Bound<'py, PyAny>, Error> {
        let py = self.py;
        Ok(match self.scanner.number_value()? {
            Number::Int(small) => PyInt::new(py, small).into_any(),
            Number::Float(value) => PyFloat::new(py, value).into_any(),
            Number::Text { text: digits, integer: true }
                if exceeds_int_digit_limit(py, digits.trim_start_matches('-').len())? =>
            {
                let position = self.scanner.value_start();
                return Err(
                    SyntaxError { what: "an integer longer than sys.get_int_max_str_digits()", position }.into()
                );
            }
            Number::Text { text: digits, integer: true } => int_from_json(py, digits)?,
            Number::Text { text, integer: false } => float_from_json(py, text)?,
        })
    }

    /// The list of the items gathered since `first` (taken off the stack), made at its length.
    fn list_from(&mut self, first: usize) -> PyResult<Bound<'py, PyAny>> {
        let length = self.items.0.len() - first;
        #[allow(clippy::cast_possible_wrap)] // the length of a `Vec` of pointers fits an `isize`
        // SAFETY: `PyList_New` returns a new list of `length` empty slots or NULL with an exception;
        // each slot is given one item (its reference moved into the list) before the list is handed out.
        unsafe {
            let list = Bound::from_owned_ptr_or_err(self.py, ffi::PyList_New(length as ffi::Py_ssize_t))?;
            for (index, &item) in self.items.0[first..].iter().enumerate() {
                set_list_item(list.as_ptr(), index as ffi::Py_ssize_t, item);
            }
            // Their references are the list's now.
            self.items.0.truncate(first);
            Ok(list)
        }
    }
}

/// Put `item` (a reference the list takes) into the empty slot `index` of a new `list`.
#[cfg(not(Py_LIMITED_API))]
unsafe fn set_list_item(list: *mut ffi::PyObject, index: ffi::Py_ssize_t, item: *mut ffi::PyObject) {
    // SAFETY: the caller's: a new list, an index below its length, a slot not set yet.
    unsafe { ffi::PyList_SET_ITEM(list, index, item) }
}

/// Put `item` (a reference the list takes) into the empty slot `index` of a new `list`.
#[cfg(Py_LIMITED_API)]
unsafe fn set_list_item(list: *mut ffi::PyObject, index: ffi::Py_ssize_t, item: *mut ffi::PyObject) {
    // SAFETY: the caller's: a new list, an index below its length. It cannot fail then.
    unsafe { ffi::PyList_SetItem(list, index, item) };
}

const OUT_OF_RANGE_FLOAT: &str = "Out of range float values are not JSON compliant";

/// Containers nest at most this deep in what is encoded, whatever `sys.getrecursionlimit()` says,
/// as in `rpcwire.pure` (which must stop `json`'s C encoder before the stack ends). The stack
/// actually left to the thread (`StackFloor`) may stop the encoder earlier, on a small stack.
const MAX_ENCODE_DEPTH: usize = 2_000;

/// Append `value` as compact JSON, exactly as `json.dumps` (see the module doc) would write it.
///
/// Two encoders: [`Plain`] first, which writes what needs no Python code and no guard but a depth
/// counter, and stops at anything else; then, only if it stopped, [`Encoder`] from the start again,
/// with `json`'s guards and errors. Since the first runs no Python code, starting again changes
/// nothing but the time taken.
pub(crate) fn encode(out: &mut Vec<u8>, value: &Bound<'_, PyAny>) -> PyResult<()> {
    let mark = out.len();
    if Plain::write(out, value).is_ok() {
        return Ok(());
    }
    out.truncate(mark);
    Encoder { out, containers: SmallVec::new(), stack: StackFloor::new() }.value(value)
}

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
unsafe fn write_str(out: &mut Vec<u8>, text: *mut ffi::PyObject) -> bool {
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
        if ffi::PyUnicode_IS_ASCII(text) == 0 {
            // A non-ASCII `str` whose UTF-8 form CPython already keeps (made by an earlier
            // `PyUnicode_AsUTF8`: another encoder, a C API parse, pyo3's `to_str`) is escaped from
            // those bytes, which need no narrowing; none is made for it here.
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
unsafe fn write_str(out: &mut Vec<u8>, text: *mut ffi::PyObject) -> bool {
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

/// Whether writing `value` as a key or a value runs no Python code: an exact `str`, `int` or
/// `float`, a `bool` or `None`.
fn is_plain(value: &Bound<'_, PyAny>) -> bool {
    value.is_exact_instance_of::<PyString>()
        || value.is_exact_instance_of::<PyInt>()
        || value.is_exact_instance_of::<PyFloat>()
        || value.is_exact_instance_of::<PyBool>()
        || value.is_none()
}

/// `json.JSONEncoder.default`'s error, from the same f-string: it names `o.__class__.__name__`,
/// which is what the object claims to be (a `Mock(spec=X)` claims `X`); an exception raised while
/// looking that up is raised instead, as `json` raises it.
fn not_serializable(value: &Bound<'_, PyAny>) -> PyErr {
    let py = value.py();
    let name = match value.getattr(intern!(py, "__class__")).and_then(|class| class.getattr(intern!(py, "__name__"))) {
        Ok(name) => name,
        Err(error) => return error,
    };
    // SAFETY: GIL held; a NULL format spec is the empty one (an f-string's `{x}`); the result is a
    // new reference or NULL with an exception set.
    let name = unsafe { Bound::from_owned_ptr_or_err(py, ffi::PyObject_Format(name.as_ptr(), std::ptr::null_mut())) };
    match name.and_then(|name| name.cast_into::<PyString>().map_err(PyErr::from)) {
        Ok(name) => PyTypeError::new_err(format!("Object of type {name} is not JSON serializable")),
        Err(error) => error,
    }
}

/// `json`'s error for a key it cannot write. Its C code formats the type's `tp_name` with
/// `%.100s`: the first 100 bytes of that UTF-8 name, a character cut in the middle becoming a
/// replacement character (`CPython` 3.14: left out).
///
/// Where pyo3 has no `PyTypeObject` (the limited API, `GraalPy`) or it is not `CPython`'s (`PyPy`):
/// the type's `__name__`, as `json`'s Python encoder writes it, and on `PyPy`, whose `json` encoder is
/// that Python code, the whole of it.
fn bad_key(key: &Bound<'_, PyAny>) -> PyErr {
    #[cfg(not(any(PyPy, GraalPy, Py_LIMITED_API)))]
    // SAFETY: every live object has a type whose `tp_name` is a NUL-terminated string.
    let type_name = unsafe { std::ffi::CStr::from_ptr((*ffi::Py_TYPE(key.as_ptr())).tp_name) }.to_bytes();
    #[cfg(any(PyPy, GraalPy, Py_LIMITED_API))]
    let name = match key.get_type().name() {
        Ok(name) => name.to_string(),
        Err(error) => return error,
    };
    #[cfg(any(PyPy, GraalPy, Py_LIMITED_API))]
    let type_name = name.as_bytes();
    #[cfg(not(PyPy))]
    let type_name = &type_name[..type_name.len().min(100)];
    // `CPython` 3.14's `PyUnicode_FromFormat` drops the bytes of a character cut at the end.
    #[cfg(all(Py_3_14, not(any(PyPy, GraalPy))))]
    let type_name = match std::str::from_utf8(type_name) {
        Err(error) if error.error_len().is_none() => &type_name[..error.valid_up_to()],
        _ => type_name,
    };
    let type_name = String::from_utf8_lossy(type_name);
    PyTypeError::new_err(format!("keys must be str, int, float, bool or None, not {type_name}"))
}

/// `Plain` stopped: what it met needs [`Encoder`] (Python code may run, or an error is to be raised,
/// or the nesting is deep or circular).
struct Stop;

/// How deep `Plain` nests containers; deeper, [`Encoder`] writes the whole value again. As deep as
/// both cores promise the same bytes (docs/semantics.md, "Nesting and the stack"), far deeper than
/// usual results, and well inside `Encoder`'s own cap, so that `Plain` never writes what `Encoder`
/// would refuse for its depth alone.
#[cfg_attr(any(PyPy, GraalPy, Py_LIMITED_API), allow(dead_code))] // there `Plain` always stops
const PLAIN_MAX_DEPTH: usize = 900;

/// Containers nested deeper than this are looked for among the containers around them: a circular
/// container would otherwise be written over and over until `PLAIN_MAX_DEPTH`. Found, `Encoder`
/// writes the value again and raises `json`'s error; shallower, the usual results pay nothing for
/// the check, and at most this many rounds of a circular container are written and taken back.
#[cfg_attr(any(PyPy, GraalPy, Py_LIMITED_API), allow(dead_code))] // there `Plain` always stops
const UNCHECKED_CYCLE_DEPTH: usize = 16;

/// The encoder of plain values: exact `dict`, `list` and `tuple` holding `str`, `int` (of at most
/// 64 bits), finite `float` (their subclasses too, whose values are read without Python code),
/// `bool` and `None`, with keys that `json` accepts.
///
/// It runs no Python code and makes no Python object, so nothing can change or free what it reads
/// while it writes: it walks lists and dicts as they are, with borrowed references and no snapshot,
/// and needs neither Python's recursion check (Python code is what that bounds) nor a set of the
/// containers open (a depth counter bounds its recursion, and circular containers are looked for
/// only deep down). Anything else stops it, and `encode` hands the value to [`Encoder`].
#[cfg_attr(any(PyPy, GraalPy, Py_LIMITED_API), allow(dead_code))] // there `Plain` always stops
struct Plain<'o> {
    out: &'o mut Vec<u8>,
    /// How many containers are open.
    depth: usize,
    stack: StackFloor,
    /// The containers open deeper than `UNCHECKED_CYCLE_DEPTH`, outermost first.
    deep: Vec<*mut ffi::PyObject>,
    /// This thread's `KeyCache`, for this pass alone (null until a key nested in a container is met).
    keys: *mut KeyCache,
}

/// Slots of the `KeyCache`, and the longest text (quotes included) one holds.
const KEY_SLOTS: usize = 256;
const KEY_TEXT: usize = 32;

/// The JSON text of `str` keys written before in one `Plain` pass, found by the key's address.
///
/// The members of a list of dicts share their keys (the same `str` objects, interned or made once):
/// a key met again is copied from here instead of being checked and escaped again. An address
/// stands for one `str` for the whole pass, since nothing is freed while `Plain` runs; a slot
/// written in an earlier pass is told apart by the pass number kept in its tag's top 16 bits
/// (above any user-space address), and every slot is emptied when that number wraps around.
///
/// One per thread, so that a pass neither makes nor moves it: passes never nest on a thread, since
/// no Python code (which could encode again) runs during one.
#[cfg_attr(any(PyPy, GraalPy, Py_LIMITED_API), allow(dead_code))] // there `Plain` always stops
struct KeyCache {
    /// The key's address, with the pass number in the top 16 bits; 0 for an empty slot.
    tags: [usize; KEY_SLOTS],
    lengths: [u8; KEY_SLOTS],
    /// Written up to the slot's length; the rest is never read as text (only copied with it).
    texts: [std::mem::MaybeUninit<[u8; KEY_TEXT]>; KEY_SLOTS],
    /// The number of the pass running (or last run), in the top 16 bits.
    pass: usize,
}

#[cfg_attr(any(PyPy, GraalPy, Py_LIMITED_API), allow(dead_code))] // there `Plain` always stops
const PASS_SHIFT: usize = 48;

thread_local! {
    static KEY_CACHE: std::cell::UnsafeCell<KeyCache> = const {
        std::cell::UnsafeCell::new(KeyCache {
            tags: [0; KEY_SLOTS],
            lengths: [0; KEY_SLOTS],
            texts: [std::mem::MaybeUninit::uninit(); KEY_SLOTS],
            pass: 0,
        })
    };
}

// The hot path of every key and value is written inline on purpose: measured with callgrind
// (bench/README.md), a call per key or value is what this encoder saves.
#[cfg_attr(any(PyPy, GraalPy, Py_LIMITED_API), allow(dead_code))] // there `Plain` always stops
#[allow(clippy::inline_always)]
impl KeyCache {
    /// This thread's cache, for a new pass. The pointer is valid for as long as the thread lives;
    /// the caller uses it for one pass alone.
    fn for_new_pass() -> *mut KeyCache {
        KEY_CACHE.with(|cache| {
            let cache = cache.get();
            // SAFETY: this thread's own cache, and no other pass runs on this thread (see above).
            unsafe {
                (*cache).pass = (*cache).pass.wrapping_add(1 << PASS_SHIFT);
                if (*cache).pass == 0 {
                    (*cache).pass = 1 << PASS_SHIFT;
                    (*cache).tags = [0; KEY_SLOTS];
                }
            }
            cache
        })
    }

    /// The slot of the key at `address`, and its tag in this pass. The address is mixed (Fibonacci
    /// hashing) before its top bits pick the slot: keys made one after another sit at nearby
    /// addresses, which the low bits alone would send to the same few slots.
    #[inline(always)]
    fn slot(&self, address: usize) -> (usize, usize) {
        const SLOT_BITS: u32 = KEY_SLOTS.trailing_zeros();
        let mixed = (address as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        // The top `SLOT_BITS` bits: below `KEY_SLOTS`.
        #[allow(clippy::cast_possible_truncation)]
        let slot = (mixed >> (64 - SLOT_BITS)) as usize;
        (slot, address | self.pass)
    }

    /// Append the text of the key at `address` if it is here.
    #[inline(always)]
    fn write(&self, out: &mut Vec<u8>, address: usize) -> bool {
        let (slot, tag) = self.slot(address);
        if self.tags[slot] != tag {
            return false;
        }
        let length = usize::from(self.lengths[slot]);
        out.reserve(KEY_TEXT);
        // SAFETY: `reserve` made room for `KEY_TEXT` bytes past the length; the whole slot is
        // copied (a fixed size, no call), and only its first `length` bytes, which `keep` wrote in
        // this pass, become part of `out`.
        unsafe {
            let end = out.len();
            std::ptr::copy_nonoverlapping(self.texts[slot].as_ptr().cast::<u8>(), out.as_mut_ptr().add(end), KEY_TEXT);
            out.set_len(end + length);
        }
        true
    }

    /// Keep `text`, the text just written for the key at `address`, if it is short enough.
    #[inline]
    fn keep(&mut self, address: usize, text: &[u8]) {
        if text.len() > KEY_TEXT || address >> PASS_SHIFT != 0 {
            return;
        }
        let (slot, tag) = self.slot(address);
        self.tags[slot] = tag;
        // `text.len()` is at most `KEY_TEXT`.
        #[allow(clippy::cast_possible_truncation)]
        let length = text.len() as u8;
        self.lengths[slot] = length;
        // SAFETY: `text` holds at most `KEY_TEXT` bytes, the size of the slot.
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr(), self.texts[slot].as_mut_ptr().cast::<u8>(), text.len());
        }
    }
}

#[cfg(not(any(Py_3_13, PyPy, GraalPy, Py_LIMITED_API)))]
extern "C" {
    /// `PyDict_Next` without its own call around it (`CPython` 3.10 to 3.12 export it; 3.13 made it
    /// internal); a NULL `hash` is allowed.
    fn _PyDict_Next(
        dict: *mut ffi::PyObject,
        position: *mut ffi::Py_ssize_t,
        key: *mut *mut ffi::PyObject,
        value: *mut *mut ffi::PyObject,
        hash: *mut ffi::Py_hash_t,
    ) -> std::ffi::c_int;
}

/// `PyDict_Next`: the next member of `dict` after `position`, borrowed, if there is one.
///
/// # Safety
/// The GIL is held, `dict` is a live `dict`, and the pointers are valid for writes.
#[cfg(not(any(PyPy, GraalPy, Py_LIMITED_API)))]
#[inline(always)]
#[allow(clippy::inline_always)] // once per member: the call it saves is the point
unsafe fn dict_next(
    dict: *mut ffi::PyObject,
    position: *mut ffi::Py_ssize_t,
    key: *mut *mut ffi::PyObject,
    value: *mut *mut ffi::PyObject,
) -> bool {
    // SAFETY: (the caller's)
    unsafe {
        #[cfg(not(Py_3_13))]
        return _PyDict_Next(dict, position, key, value, std::ptr::null_mut()) != 0;
        #[cfg(Py_3_13)]
        return ffi::PyDict_Next(dict, position, key, value) != 0;
    }
}

#[cfg(any(PyPy, GraalPy, Py_LIMITED_API))]
impl Plain<'_> {
    /// Where `Plain` cannot read the interpreter's objects directly, `Encoder` writes everything.
    #[allow(clippy::unnecessary_wraps)]
    fn write(_out: &mut Vec<u8>, _value: &Bound<'_, PyAny>) -> Result<(), Stop> {
        Err(Stop)
    }
}

#[cfg(not(any(PyPy, GraalPy, Py_LIMITED_API)))]
#[allow(clippy::inline_always)]
impl<'o> Plain<'o> {
    /// Append `value` if it is plain; on `Err`, part of it may have been appended.
    fn write(out: &'o mut Vec<u8>, value: &Bound<'_, PyAny>) -> Result<(), Stop> {
        let mut plain = Plain { out, depth: 0, stack: StackFloor::new(), deep: Vec::new(), keys: std::ptr::null_mut() };
        // SAFETY: the GIL is held (`value` is bound) for the whole walk, and the walk runs no Python
        // code: every object reached stays alive and unchanged, and its borrowed references valid.
        unsafe { plain.value(value.as_ptr()) }
    }

    /// # Safety
    /// The GIL is held, `value` is alive, and no Python code runs until `Plain` is done.
    #[inline(always)]
    unsafe fn value(&mut self, value: *mut ffi::PyObject) -> Result<(), Stop> {
        // The usual types first, each known by its type pointer alone; for them `json`'s order of
        // checks (`other`) does not matter, no object being two of them.
        // SAFETY: (the caller's) a live object's type, and these types' own fields.
        unsafe {
            let kind = ffi::Py_TYPE(value);
            if kind == &raw mut ffi::PyUnicode_Type {
                self.str(value)
            } else if kind == &raw mut ffi::PyLong_Type {
                self.int(value)
            } else if kind == &raw mut ffi::PyFloat_Type {
                self.float(ffi::PyFloat_AS_DOUBLE(value))
            } else if kind == &raw mut ffi::PyDict_Type {
                self.dict(value)
            } else if kind == &raw mut ffi::PyList_Type {
                self.list(value)
            } else {
                self.other(value)
            }
        }
    }

    /// The less usual plain values, checked in `json`'s order (subclasses of `str`, `int` and
    /// `float` are written as their values).
    ///
    /// # Safety
    /// As `value`.
    #[inline(never)]
    unsafe fn other(&mut self, value: *mut ffi::PyObject) -> Result<(), Stop> {
        // SAFETY: (the caller's) type checks of a live object, and the fields of its type.
        unsafe {
            let kind = ffi::Py_TYPE(value);
            if value == ffi::Py_None() {
                self.out.extend_from_slice(b"null");
            } else if kind == &raw mut ffi::PyBool_Type {
                self.out.extend_from_slice(if value == ffi::Py_True() { b"true" } else { b"false" });
            } else if kind == &raw mut ffi::PyTuple_Type {
                return self.tuple(value);
            } else if ffi::PyUnicode_Check(value) != 0 {
                return self.str(value);
            } else if ffi::PyLong_Check(value) != 0 {
                return self.int(value);
            } else if ffi::PyFloat_Check(value) != 0 {
                return self.float(ffi::PyFloat_AS_DOUBLE(value));
            } else {
                return Err(Stop);
            }
        }
        Ok(())
    }

    /// # Safety
    /// As `value`, and `text` is a `str`.
    #[inline(always)]
    unsafe fn str(&mut self, text: *mut ffi::PyObject) -> Result<(), Stop> {
        // SAFETY: (the caller's)
        if unsafe { write_str(self.out, text) } {
            Ok(())
        } else {
            Err(Stop)
        }
    }

    /// An `int` that fits 64 bits; a larger one stops `Plain` (its digits need a Python `str`).
    ///
    /// # Safety
    /// As `value`, and `int` is an `int`.
    #[inline(always)]
    unsafe fn int(&mut self, int: *mut ffi::PyObject) -> Result<(), Stop> {
        let mut overflow = 0;
        // SAFETY: (the caller's) `int` is an `int`, so its value is read without Python code and
        // without an error (the error check is there for the rule, not for a case that occurs).
        let small = unsafe { ffi::PyLong_AsLongLongAndOverflow(int, &raw mut overflow) };
        if overflow != 0 || (small == -1 && unsafe { !ffi::PyErr_Occurred().is_null() }) {
            return Err(Stop);
        }
        write_short(self.out, itoa::Buffer::new().format(small).as_bytes());
        Ok(())
    }

    #[inline]
    fn float(&mut self, value: f64) -> Result<(), Stop> {
        if !value.is_finite() {
            return Err(Stop);
        }
        write_float_repr(self.out, value);
        Ok(())
    }

    /// # Safety
    /// As `value`, and `list` is an exact `list`.
    #[inline(never)]
    unsafe fn list(&mut self, list: *mut ffi::PyObject) -> Result<(), Stop> {
        // SAFETY: (the caller's) nothing changes the list while it is written.
        unsafe { self.array(list, ffi::PyList_GET_SIZE(list), |index| ffi::PyList_GET_ITEM(list, index)) }
    }

    /// # Safety
    /// As `value`, and `tuple` is an exact `tuple`.
    #[inline(never)]
    unsafe fn tuple(&mut self, tuple: *mut ffi::PyObject) -> Result<(), Stop> {
        // SAFETY: (the caller's)
        unsafe { self.array(tuple, ffi::PyTuple_GET_SIZE(tuple), |index| ffi::PyTuple_GET_ITEM(tuple, index)) }
    }

    /// # Safety
    /// As `value`; `item(i)` is the live item `i` of `container`, for `i` below `len`.
    #[inline(always)]
    unsafe fn array(
        &mut self,
        container: *mut ffi::PyObject,
        len: ffi::Py_ssize_t,
        item: impl Fn(ffi::Py_ssize_t) -> *mut ffi::PyObject,
    ) -> Result<(), Stop> {
        self.enter(container)?;
        self.out.push(b'[');
        for index in 0..len {
            // SAFETY: (the caller's)
            unsafe { self.value(item(index))? };
            self.out.push(b',');
        }
        self.close(b']');
        self.leave();
        Ok(())
    }

    /// # Safety
    /// As `value`, and `dict` is an exact `dict`.
    #[inline(never)]
    unsafe fn dict(&mut self, dict: *mut ffi::PyObject) -> Result<(), Stop> {
        self.enter(dict)?;
        self.out.push(b'{');
        let mut position: ffi::Py_ssize_t = 0;
        let mut key: *mut ffi::PyObject = std::ptr::null_mut();
        let mut value: *mut ffi::PyObject = std::ptr::null_mut();
        // SAFETY: (the caller's) no Python code runs, so the dict does not change under
        // `PyDict_Next`, and the references it lends stay valid.
        unsafe {
            while dict_next(dict, &raw mut position, &raw mut key, &raw mut value) {
                if ffi::Py_TYPE(key) == &raw mut ffi::PyUnicode_Type {
                    self.str_key(key)?;
                } else {
                    self.key(key)?;
                }
                self.out.push(b':');
                self.value(value)?;
                self.out.push(b',');
            }
        }
        self.close(b'}');
        self.leave();
        Ok(())
    }

    /// An exact `str` key, from the `KeyCache` when it was written before.
    ///
    /// # Safety
    /// As `value`, and `key` is a `str`.
    #[inline(always)]
    unsafe fn str_key(&mut self, key: *mut ffi::PyObject) -> Result<(), Stop> {
        // The keys of the outermost dict are seldom met again: the cache is for those nested deeper,
        // and is looked up the first time one is met.
        if self.depth < 2 {
            // SAFETY: (the caller's)
            return unsafe { self.str(key) };
        }
        if self.keys.is_null() {
            self.keys = KeyCache::for_new_pass();
        }
        let address = key as usize;
        // SAFETY: (the caller's) `keys` is this thread's cache, used by this pass alone.
        unsafe {
            if (*self.keys).write(self.out, address) {
                return Ok(());
            }
            let start = self.out.len();
            self.str(key)?;
            (*self.keys).keep(address, &self.out[start..]);
        }
        Ok(())
    }

    /// A key other than an exact `str`, coerced as `json` does (see `Encoder::key`).
    ///
    /// # Safety
    /// As `value`.
    #[inline(never)]
    unsafe fn key(&mut self, key: *mut ffi::PyObject) -> Result<(), Stop> {
        // SAFETY: (the caller's) type checks of a live object, and the fields of its type.
        unsafe {
            if ffi::PyUnicode_Check(key) != 0 {
                return self.str(key);
            }
            self.out.push(b'"');
            if ffi::PyFloat_Check(key) != 0 {
                self.float(ffi::PyFloat_AS_DOUBLE(key))?;
            } else if ffi::Py_TYPE(key) == &raw mut ffi::PyBool_Type {
                self.out.extend_from_slice(if key == ffi::Py_True() { b"true" } else { b"false" });
            } else if key == ffi::Py_None() {
                self.out.extend_from_slice(b"null");
            } else if ffi::PyLong_Check(key) != 0 {
                self.int(key)?;
            } else {
                return Err(Stop);
            }
        }
        self.out.push(b'"');
        Ok(())
    }

    /// The closing bracket, in place of the comma written after the last member (a value never
    /// ends with a comma, so one there is that comma).
    #[inline(always)]
    fn close(&mut self, bracket: u8) {
        match self.out.last_mut() {
            Some(last) if *last == b',' => *last = bracket,
            _ => self.out.push(bracket),
        }
    }

    /// One more container open: within `PLAIN_MAX_DEPTH`, with room on the stack, and not circular.
    #[inline(always)]
    fn enter(&mut self, container: *mut ffi::PyObject) -> Result<(), Stop> {
        if self.depth >= UNCHECKED_CYCLE_DEPTH {
            self.enter_deep(container)?;
        }
        if !self.stack.has_room(self.depth) {
            return Err(Stop);
        }
        self.depth += 1;
        Ok(())
    }

    #[inline(never)]
    fn enter_deep(&mut self, container: *mut ffi::PyObject) -> Result<(), Stop> {
        if self.depth >= PLAIN_MAX_DEPTH || self.deep.contains(&container) {
            return Err(Stop);
        }
        self.deep.push(container);
        Ok(())
    }

    #[inline(always)]
    fn leave(&mut self) {
        self.depth -= 1;
        if self.depth >= UNCHECKED_CYCLE_DEPTH {
            self.deep.pop();
        }
    }
}

/// A container's opening and closing bytes.
type Brackets = (u8, u8);
const ARRAY: Brackets = (b'[', b']');
const OBJECT: Brackets = (b'{', b'}');

struct Encoder<'o> {
    out: &'o mut Vec<u8>,
    /// Addresses of the lists, tuples and dicts being encoded, to refuse a circular one.
    /// Inline up to 16 levels: no allocation per message for the usual results.
    containers: SmallVec<[usize; 16]>,
    /// Where this thread's stack must stop: a container is entered only above it.
    stack: StackFloor,
}

/// Python's own recursion limit around each container, as the `json` module's C encoder has.
struct RecursionGuard;

impl RecursionGuard {
    fn enter(py: Python<'_>) -> PyResult<Self> {
        // SAFETY: called with the GIL held; the message is a NUL-terminated literal.
        if unsafe { ffi::Py_EnterRecursiveCall(c" while encoding a JSON object".as_ptr()) } == 0 {
            Ok(RecursionGuard)
        } else {
            Err(PyErr::fetch(py))
        }
    }
}

impl Drop for RecursionGuard {
    fn drop(&mut self) {
        // SAFETY: paired with the successful `Py_EnterRecursiveCall` in `enter`, GIL still held.
        unsafe { ffi::Py_LeaveRecursiveCall() };
    }
}

impl Encoder<'_> {
    fn value(&mut self, value: &Bound<'_, PyAny>) -> PyResult<()> {
        // The exact built-in types first, each known by its type pointer alone (one comparison);
        // for them the order of `json`'s checks below does not matter, no type being two of them.
        // A dict was found after eight checks, among them `PyType_IsSubtype` calls for `float`'s
        // (bench/README.md).
        if let Ok(text) = value.cast_exact::<PyString>() {
            return encode_str(self.out, text);
        }
        if let Ok(int) = value.cast_exact::<PyInt>() {
            return self.int(int);
        }
        if let Ok(dict) = value.cast_exact::<PyDict>() {
            return self.dict(dict);
        }
        if let Ok(list) = value.cast_exact::<PyList>() {
            return self.list(list);
        }
        if let Ok(float) = value.cast_exact::<PyFloat>() {
            return self.float(float.value());
        }
        self.value_in_json_order(value)
    }

    /// Any value, checked in `json`'s order: subclasses of the built-in types are found here.
    fn value_in_json_order(&mut self, value: &Bound<'_, PyAny>) -> PyResult<()> {
        if value.is_none() {
            self.out.extend_from_slice(b"null");
        } else if let Ok(flag) = value.cast_exact::<PyBool>() {
            self.out.extend_from_slice(if flag.is_true() { b"true" } else { b"false" });
        } else if let Ok(text) = value.cast::<PyString>() {
            encode_str(self.out, text)?;
        } else if let Ok(int) = value.cast::<PyInt>() {
            self.int(int)?;
        } else if let Ok(float) = value.cast::<PyFloat>() {
            self.float(float.value())?;
        } else if let Ok(list) = value.cast_exact::<PyList>() {
            self.list(list)?;
        } else if let Ok(tuple) = value.cast_exact::<PyTuple>() {
            self.items(value, tuple.iter())?;
        } else if value.is_instance_of::<PyList>() || value.is_instance_of::<PyTuple>() {
            self.sequence_subclass(value)?;
        } else if let Ok(dict) = value.cast::<PyDict>() {
            self.dict(dict)?;
        } else {
            return Err(not_serializable(value));
        }
        Ok(())
    }

    fn list(&mut self, list: &Bound<'_, PyList>) -> PyResult<()> {
        self.container(list.as_any(), list.len(), ARRAY, |encoder| {
            let mut index = 0;
            // The length is read again each time: encoding an item can run Python code. (Reading
            // past the end would raise and drop an `IndexError` at the end of each list.)
            while index < list.len() {
                if index > 0 {
                    encoder.out.push(b',');
                }
                encoder.value(&list.get_item(index)?)?;
                index += 1;
            }
            Ok(())
        })
    }

    /// Brackets, recursion guard and cycle check around a container's items, in `json`'s order:
    /// recursion first, then an empty container is written without looking further (not even
    /// at a dict subclass's `items()`), then the cycle check.
    fn container(
        &mut self,
        value: &Bound<'_, PyAny>,
        len: usize,
        brackets: Brackets,
        items: impl FnOnce(&mut Self) -> PyResult<()>,
    ) -> PyResult<()> {
        let _guard = self.enter(value.py())?;
        self.brackets(value, len, brackets, items)
    }

    /// The checks before one more level of nesting: Python's recursion limit (held until the
    /// returned guard is dropped), the cap on nesting, and the stack left to this thread.
    fn enter(&mut self, py: Python<'_>) -> PyResult<RecursionGuard> {
        let guard = RecursionGuard::enter(py)?;
        if self.containers.len() >= MAX_ENCODE_DEPTH {
            return Err(PyRecursionError::new_err("maximum recursion depth exceeded while encoding a JSON object"));
        }
        if !self.stack.has_room(self.containers.len()) {
            return Err(PyRecursionError::new_err(
                "maximum recursion depth exceeded while encoding a JSON object (this thread's stack is nearly full)",
            ));
        }
        Ok(guard)
    }

    /// A container's brackets and cycle check around its items, once `enter` has let it in.
    fn brackets(
        &mut self,
        value: &Bound<'_, PyAny>,
        len: usize,
        (open, close): Brackets,
        items: impl FnOnce(&mut Self) -> PyResult<()>,
    ) -> PyResult<()> {
        self.out.push(open);
        if len > 0 {
            let address = value.as_ptr() as usize;
            if self.containers.contains(&address) {
                return Err(PyValueError::new_err("Circular reference detected"));
            }
            self.containers.push(address);
            let result = items(self);
            self.containers.pop();
            result?;
        }
        self.out.push(close);
        Ok(())
    }

    /// A list or tuple subclass, in `json`'s order: the recursion checks, then what its `__iter__`
    /// gives (`PySequence_Fast`, with its error when that fails with a `TypeError`), taken whole
    /// before the first item is written, then the brackets and items as for any array.
    fn sequence_subclass(&mut self, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let _guard = self.enter(value.py())?;
        // SAFETY: GIL held; the message is a NUL-terminated literal; a new reference or NULL
        // with an exception set.
        let items = unsafe {
            Bound::from_owned_ptr_or_err(
                value.py(),
                ffi::PySequence_Fast(value.as_ptr(), c"_iterencode_list needs a sequence".as_ptr()),
            )?
        };
        let items = items.try_iter()?.collect::<PyResult<Vec<_>>>()?;
        self.brackets(value, items.len(), ARRAY, |encoder| encoder.write_items(items.into_iter()))
    }

    fn int(&mut self, int: &Bound<'_, PyInt>) -> PyResult<()> {
        let mut overflow = 0;
        // SAFETY: GIL held and `int` is an `int`: no Python code runs, and the result is its value
        // unless `overflow` is set (an `int` cannot fail otherwise). PyO3's `extract::<i64>()`
        // checks the type again and asks for a pending error besides.
        let small = unsafe { ffi::PyLong_AsLongLongAndOverflow(int.as_ptr(), &raw mut overflow) };
        if overflow == 0 {
            if small == -1 {
                if let Some(error) = PyErr::take(int.py()) {
                    return Err(error);
                }
            }
            self.out.extend_from_slice(itoa::Buffer::new().format(small).as_bytes());
        } else {
            // `int.__repr__` (not `repr()`): an int subclass is written as its number.
            let py = int.py();
            let digits = py.get_type::<PyInt>().call_method1(intern!(py, "__repr__"), (int,))?;
            self.out.extend_from_slice(digits.cast::<PyString>()?.to_str()?.as_bytes());
        }
        Ok(())
    }

    fn float(&mut self, value: f64) -> PyResult<()> {
        if !value.is_finite() {
            return Err(PyValueError::new_err(OUT_OF_RANGE_FLOAT));
        }
        write_float_repr(self.out, value);
        Ok(())
    }

    /// An array of `items` (already taken from `value`, the sequence they belong to).
    fn items<'py>(
        &mut self,
        value: &Bound<'py, PyAny>,
        items: impl ExactSizeIterator<Item = Bound<'py, PyAny>>,
    ) -> PyResult<()> {
        self.container(value, items.len(), ARRAY, |encoder| encoder.write_items(items))
    }

    fn write_items<'py>(&mut self, items: impl Iterator<Item = Bound<'py, PyAny>>) -> PyResult<()> {
        for (index, item) in items.enumerate() {
            if index > 0 {
                self.out.push(b',');
            }
            self.value(&item)?;
        }
        Ok(())
    }

    /// Like `json`, a dict is encoded from a snapshot of its items, taken before the first one is
    /// written: code run while encoding may change the dict, not what is written. A subclass is
    /// encoded through its own `items()`.
    fn dict(&mut self, dict: &Bound<'_, PyDict>) -> PyResult<()> {
        let py = dict.py();
        self.container(dict.as_any(), dict.len(), OBJECT, |encoder| {
            if dict.is_exact_instance_of::<PyDict>() {
                encoder.exact_dict_members(dict)?;
            } else {
                // `PyMapping_Items` is what `json` calls: `items()`, turned into a list, with
                // CPython's own errors for a result that is not iterable.
                // SAFETY: GIL held; a new reference or NULL with an exception set.
                let items = unsafe { Bound::from_owned_ptr_or_err(py, ffi::PyMapping_Items(dict.as_ptr()))? };
                for (index, item) in items.try_iter()?.enumerate() {
                    let item = item?;
                    let pair = item
                        .cast::<PyTuple>()
                        .ok()
                        .filter(|pair| pair.len() == 2)
                        .ok_or_else(|| PyValueError::new_err("items must return 2-tuples"))?;
                    encoder.member(index == 0, &pair.get_item(0)?, &pair.get_item(1)?)?;
                }
            }
            Ok(())
        })
    }

    /// The members of an exact `dict`, as `json` writes them: from a snapshot of its items taken
    /// before the first is written, so that code run while encoding cannot change what is written.
    ///
    /// Only containers and other types' methods can run Python code (a subclass's `items()` or
    /// `__iter__`, a class's `__name__` for the error). So members whose key and value are exact
    /// `str`, `int`, `float`, `bool` or `None` are written straight from the dict, borrowed, and
    /// the snapshot is taken of the members left at the first other value, before it is written:
    /// the same members in the same state, without the cost of a snapshot of every dict.
    fn exact_dict_members(&mut self, dict: &Bound<'_, PyDict>) -> PyResult<()> {
        let py = dict.py();
        let mut position: ffi::Py_ssize_t = 0;
        let mut key: *mut ffi::PyObject = std::ptr::null_mut();
        let mut value: *mut ffi::PyObject = std::ptr::null_mut();
        let mut first = true;
        // SAFETY: GIL held. Until the snapshot below, only plain values are written, which runs
        // no Python code: the dict cannot change under `PyDict_Next`, and the references it lends
        // stay valid while they are used.
        while unsafe { ffi::PyDict_Next(dict.as_ptr(), &raw mut position, &raw mut key, &raw mut value) } != 0 {
            let (lent_key, lent_value) = unsafe { (Borrowed::from_ptr(py, key), Borrowed::from_ptr(py, value)) };
            if is_plain(&lent_key) && is_plain(&lent_value) {
                self.member(first, &lent_key, &lent_value)?;
                first = false;
                continue;
            }
            // Inline for the small dicts most messages hold: no heap `Vec` per dict.
            let mut rest: SmallVec<[_; 8]> = SmallVec::new();
            rest.push((lent_key.to_owned(), lent_value.to_owned()));
            // SAFETY: as above; the borrowed references are made owned at once.
            while unsafe { ffi::PyDict_Next(dict.as_ptr(), &raw mut position, &raw mut key, &raw mut value) } != 0 {
                rest.push(unsafe { (Bound::from_borrowed_ptr(py, key), Bound::from_borrowed_ptr(py, value)) });
            }
            for (key, value) in &rest {
                self.member(first, key, value)?;
                first = false;
            }
            break;
        }
        Ok(())
    }

    fn member(&mut self, first: bool, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        if !first {
            self.out.push(b',');
        }
        self.key(key)?;
        self.out.push(b':');
        self.value(value)
    }

    /// Keys as `json` coerces them: `str` as is; `float`, `bool`, `None` and `int` as their JSON text.
    fn key(&mut self, key: &Bound<'_, PyAny>) -> PyResult<()> {
        if let Ok(text) = key.cast_exact::<PyString>() {
            return encode_str(self.out, text);
        }
        if let Ok(text) = key.cast::<PyString>() {
            return encode_str(self.out, text);
        }
        self.out.push(b'"');
        if let Ok(float) = key.cast::<PyFloat>() {
            self.float(float.value())?;
        } else if let Ok(flag) = key.cast_exact::<PyBool>() {
            self.out.extend_from_slice(if flag.is_true() { b"true" } else { b"false" });
        } else if key.is_none() {
            self.out.extend_from_slice(b"null");
        } else if let Ok(int) = key.cast::<PyInt>() {
            self.int(int)?;
        } else {
            return Err(bad_key(key));
        }
        self.out.push(b'"');
        Ok(())
    }
}

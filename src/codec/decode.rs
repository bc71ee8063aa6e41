//! JSON text into Python objects in one pass (`decode`, `decode_value`), with no intermediate tree: the
//! `Decoder` walks text the scanner validates as it goes and builds what `json.loads` builds (`int` of any
//! size, `float`, `list`, `dict` where the last duplicate key wins; strings in `decode_str`). An array's
//! items are gathered on one `ItemStack` shared by every level, kept by the thread between decodings, so
//! that each list is made at its final length.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt};
use pyo3::{ffi, intern};

use rpcwire_protocol::json::{Number, Scanner};

use super::decode_str::{cached_str_from_json, long_str, str_from_text, LONG_TEXT};
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

/// A Python `int` of `value`.
#[inline(always)]
#[allow(clippy::inline_always)] // once per integer decoded
fn int_object(py: Python<'_>, value: i64) -> PyResult<Bound<'_, PyAny>> {
    // SAFETY: `PyLong_FromLongLong` returns a new reference, or NULL with an exception set.
    unsafe { Bound::from_owned_ptr_or_err(py, ffi::PyLong_FromLongLong(value)) }
}

/// A Python `float` of `value`.
#[inline(always)]
#[allow(clippy::inline_always)] // once per float decoded
fn float_object(py: Python<'_>, value: f64) -> PyResult<Bound<'_, PyAny>> {
    // SAFETY: `PyFloat_FromDouble` returns a new reference, or NULL with an exception set.
    unsafe { Bound::from_owned_ptr_or_err(py, ffi::PyFloat_FromDouble(value)) }
}

/// Whether `object` is an exact `int` or `float` (what `number` makes): one look at its type.
#[inline(always)]
#[allow(clippy::inline_always)] // once per array, in `Decoder::value`
fn is_number(object: *mut ffi::PyObject) -> bool {
    // SAFETY: `object` is a live object the item stack holds; its type pointer is read only.
    let kind = unsafe { ffi::Py_TYPE(object) };
    std::ptr::eq(kind, &raw mut ffi::PyLong_Type) || std::ptr::eq(kind, &raw mut ffi::PyFloat_Type)
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
                        let key = cached_str_from_json(
                            py,
                            key.raw,
                            key.escaped,
                            self.strings.as_deref_mut(),
                            &mut self.scratch,
                        )?;
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
                    // An array whose first item is a number is read in `numbers`' loop from its second
                    // item on. Only the first item is looked at: a look before every item (a second
                    // `peek` of the text) cost every array of other values that much.
                    let item = self.value()?.into_ptr();
                    self.items.0.push(item);
                    if is_number(item) && self.scanner.comma_before_number() {
                        self.numbers()?;
                    }
                    while self.scanner.more(b']')? {
                        let item = self.value()?;
                        self.items.0.push(item.into_ptr());
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
        // One walk over the string: validated, unescaped and measured together; a long one with escapes
        // is read again from its start, straight into the `str` (`long_str`, out of line).
        self.scratch.clear();
        Ok(match self.scanner.string_text(&mut self.scratch, LONG_TEXT)? {
            Some(text) => str_from_text(self.py, text, &self.scratch)?.into_any(),
            None => self.long_string()?,
        })
    }

    /// `string`'s long text with escapes (`long_str`), behind a cold call that takes `self` only: the
    /// short strings' path in `value` then carries no set-up for it, and `value` keeps the registers it
    /// holds across the recursion (called from `value` directly, `long_str` cost `value` a spill of its
    /// result's slot on every object and string, small payloads about 0.1-0.3% more instructions).
    #[cold]
    #[inline(never)]
    fn long_string(&mut self) -> Result<Bound<'py, PyAny>, Error> {
        Ok(long_str(self.py, self.scanner)?.into_any())
    }

    /// A run of numbers among an array's items (`1,2,3`, the long arrays' usual items), from the
    /// scanner's position (a number's first byte, the array's second item) to the first item that
    /// is not a number or is not right after its comma: each goes from its digits to its Python object onto the item stack,
    /// with no recursive `value` call and no `more` between them. Out of line, so that `value`, which
    /// recurses for every other value, keeps its own size.
    ///
    /// After an integer first item, each number is tried as a short integer first
    /// (`Scanner::short_int`: digits to `i64` to `int`, no fraction or exponent walk); after a
    /// float, each goes straight to `number_inline`, so that a float pays no integer attempt.
    #[inline(never)]
    fn numbers(&mut self) -> Result<(), Error> {
        // SAFETY: the item stack holds the array's first item, a live object; its type is read only.
        if self.items.0.last().is_some_and(|&item| unsafe { ffi::PyLong_CheckExact(item) } != 0) {
            loop {
                let item = match self.scanner.short_int() {
                    Some(small) => int_object(self.py, small)?,
                    None => self.number_inline()?,
                };
                self.items.0.push(item.into_ptr());
                if !self.scanner.comma_before_number() {
                    return Ok(());
                }
            }
        }
        loop {
            let item = self.number_inline()?;
            self.items.0.push(item.into_ptr());
            if !self.scanner.comma_before_number() {
                return Ok(());
            }
        }
    }

    /// The number at the scanner's position (no whitespace before it), or the error of no number there.
    /// `Scanner::number_value` is inlined here, and its `Number` folded into this `match`: an integer
    /// of up to 18 digits goes from its digits to its `i64` and to `PyLong_FromLongLong`, a float from
    /// its digits to its `f64` and `PyFloat_FromDouble`, with nothing made between.
    fn number(&mut self) -> Result<Bound<'py, PyAny>, Error> {
        self.number_inline()
    }

    /// `number`, inline in `numbers`' loop. (`value` keeps the compiler's own choice: forcing it
    /// there made `value`, which recurses for every value, larger and every other payload slower.)
    #[inline(always)]
    #[allow(clippy::inline_always)] // see above
    fn number_inline(&mut self) -> Result<Bound<'py, PyAny>, Error> {
        let py = self.py;
        Ok(match self.scanner.number_value()? {
            Number::Int(small) => int_object(py, small)?,
            Number::Float(value) => float_object(py, value)?,
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

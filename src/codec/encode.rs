//! Python objects into JSON (`encode`): the exact bytes of `json.dumps(value, ensure_ascii=False,
//! separators=(",", ":"), allow_nan=False)`. `Plain` (in `plain`) writes what needs no Python code; when it
//! stops, the `Encoder` here writes the value again with `json`'s own type checks in the same order, key
//! coercions, errors and messages, guard against circular containers and recursion limit, so that both
//! cores write identical bytes and fail identically.

use pyo3::exceptions::{PyRecursionError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
#[cfg(not(Py_GIL_DISABLED))]
use pyo3::Borrowed;
use pyo3::{ffi, intern};
use smallvec::SmallVec;

use rpcwire_protocol::json::write_float_repr;
use rpcwire_protocol::stack::StackFloor;

use super::encode_str::encode_str;
use super::plain::Plain;

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

/// Whether writing `value` as a key or a value runs no Python code: an exact `str`, `int` or
/// `float`, a `bool` or `None`.
#[cfg(not(Py_GIL_DISABLED))] // free-threaded builds snapshot every dict (`exact_dict_members`)
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
                let item = match list.get_item(index) {
                    Ok(item) => item,
                    // Another thread shrank the list since its length was read (free-threaded builds):
                    // its end, as when the length is read again.
                    Err(_) if cfg!(Py_GIL_DISABLED) && index >= list.len() => break,
                    Err(error) => return Err(error),
                };
                if index > 0 {
                    encoder.out.push(b',');
                }
                encoder.value(&item)?;
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
    #[cfg(not(Py_GIL_DISABLED))]
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

    /// The members of an exact `dict` without the GIL (free-threaded builds): the snapshot of all of
    /// them is taken first, inside a critical section on the dict (other threads' changes to it wait),
    /// as owned references, and then written: what is written is the dict as it was at one moment,
    /// and nothing written can be freed by another thread meanwhile.
    #[cfg(Py_GIL_DISABLED)]
    fn exact_dict_members(&mut self, dict: &Bound<'_, PyDict>) -> PyResult<()> {
        let py = dict.py();
        let members = pyo3::sync::critical_section::with_critical_section(dict.as_any(), || {
            let mut members: SmallVec<[_; 8]> = SmallVec::new();
            let mut position: ffi::Py_ssize_t = 0;
            let mut key: *mut ffi::PyObject = std::ptr::null_mut();
            let mut value: *mut ffi::PyObject = std::ptr::null_mut();
            // SAFETY: the dict is locked while `PyDict_Next` reads it, and the references it lends are
            // made owned at once, before anything else runs.
            while unsafe { ffi::PyDict_Next(dict.as_ptr(), &raw mut position, &raw mut key, &raw mut value) } != 0 {
                members.push(unsafe { (Bound::from_borrowed_ptr(py, key), Bound::from_borrowed_ptr(py, value)) });
            }
            members
        });
        for (index, (key, value)) in members.iter().enumerate() {
            self.member(index == 0, key, value)?;
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

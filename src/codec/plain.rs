//! The encoder of plain values (`Plain`): exact `dict`, `list` and `tuple` of `str`, `int`, `float`,
//! `bool` and `None`, written without running Python code or making an object, on borrowed references,
//! with a depth counter and a look for circular containers only deep down; anything else stops it, and
//! `encode` hands the value to the full `Encoder`. The hot path of every key and value is inline.
//!
//! On a free-threaded build (`Py_GIL_DISABLED`) other threads run while `Plain` reads, and may change
//! or free what it reads: there a dict is walked inside a critical section on it and each member is
//! held (an owned reference) while it is written, a list's items are taken one by one as owned
//! references (`PyList_GetItemRef`, its length read again each time), and the `KeyCache` is not used
//! (a freed key's address may be a new key's within the pass). The GIL build's code is unchanged.

use pyo3::ffi;
use pyo3::prelude::*;

use rpcwire_protocol::json::write_float_repr;
#[cfg(not(any(PyPy, GraalPy, Py_LIMITED_API)))]
use rpcwire_protocol::json::write_short;
use rpcwire_protocol::stack::StackFloor;

use super::encode_str::write_str;
use super::key_cache::KeyCache;

/// `Plain` stopped: what it met needs [`Encoder`] (Python code may run, or an error is to be raised,
/// or the nesting is deep or circular).
pub(super) struct Stop;

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
/// It runs no Python code and makes no Python object, so (with the GIL) nothing can change or free what
/// it reads while it writes: it walks lists and dicts as they are, with borrowed references and no snapshot,
/// and needs neither Python's recursion check (Python code is what that bounds) nor a set of the
/// containers open (a depth counter bounds its recursion, and circular containers are looked for
/// only deep down). Anything else stops it, and `encode` hands the value to [`Encoder`]. Without the GIL
/// (free-threaded builds) what it reads is held or locked instead (see the module doc); the containers
/// open are then still held by their parents' owned references, so that an address in `deep` stands
/// for one container for as long as it is open.
#[cfg_attr(any(PyPy, GraalPy, Py_LIMITED_API), allow(dead_code))] // there `Plain` always stops
pub(super) struct Plain<'o> {
    out: &'o mut Vec<u8>,
    /// How many containers are open.
    depth: usize,
    stack: StackFloor,
    /// The containers open deeper than `UNCHECKED_CYCLE_DEPTH`, outermost first.
    deep: Vec<*mut ffi::PyObject>,
    /// This thread's `KeyCache`, for this pass alone (null until a key nested in a container is met).
    keys: *mut KeyCache,
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
/// The GIL is held (free-threaded builds: a critical section on `dict`), `dict` is a live `dict`, and
/// the pointers are valid for writes.
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
    pub(super) fn write(_out: &mut Vec<u8>, _value: &Bound<'_, PyAny>) -> Result<(), Stop> {
        Err(Stop)
    }
}

#[cfg(not(any(PyPy, GraalPy, Py_LIMITED_API)))]
#[allow(clippy::inline_always)]
impl<'o> Plain<'o> {
    /// Append `value` if it is plain; on `Err`, part of it may have been appended.
    pub(super) fn write(out: &'o mut Vec<u8>, value: &Bound<'_, PyAny>) -> Result<(), Stop> {
        let mut plain = Plain { out, depth: 0, stack: StackFloor::new(), deep: Vec::new(), keys: std::ptr::null_mut() };
        // SAFETY: the GIL is held (`value` is bound) for the whole walk, and the walk runs no Python
        // code: every object reached stays alive and unchanged, and its borrowed references valid.
        // Free-threaded builds: `value` is alive (bound), and the walk holds or locks what it reads
        // below it (`members`, `list`).
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
    #[cfg(not(Py_GIL_DISABLED))]
    unsafe fn list(&mut self, list: *mut ffi::PyObject) -> Result<(), Stop> {
        // SAFETY: (the caller's) with the GIL held and no Python code run, nothing changes the list
        // while it is written.
        unsafe { self.array(list, ffi::PyList_GET_SIZE(list), |index| ffi::PyList_GET_ITEM(list, index)) }
    }

    /// Without the GIL another thread may shrink the list or replace (and free) its items while it is
    /// written: each item is taken as an owned reference (`PyList_GetItemRef`, which takes it safely
    /// from a list that is changing) and held while it is written, and the length is read again
    /// before each one, as `Encoder::list` does.
    ///
    /// # Safety
    /// As `value`, and `list` is an exact `list`.
    #[cfg(Py_GIL_DISABLED)]
    #[inline(never)]
    unsafe fn list(&mut self, list: *mut ffi::PyObject) -> Result<(), Stop> {
        self.enter(list)?;
        self.out.push(b'[');
        let mut index = 0;
        // SAFETY: (the caller's) `list` is alive; each item is an owned reference, released once written.
        unsafe {
            while index < ffi::PyList_GET_SIZE(list) {
                let item = ffi::PyList_GetItemRef(list, index);
                if item.is_null() {
                    // Shrunk since its length was read: the end of the list (the `IndexError` dropped).
                    ffi::PyErr_Clear();
                    break;
                }
                let written = self.value(item);
                ffi::Py_DECREF(item);
                written?;
                self.out.push(b',');
                index += 1;
            }
        }
        self.close(b']');
        self.leave();
        Ok(())
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
        // SAFETY: (the caller's)
        unsafe { self.members(dict)? };
        self.close(b'}');
        self.leave();
        Ok(())
    }

    /// # Safety
    /// As `dict`.
    #[cfg(not(Py_GIL_DISABLED))]
    #[inline(always)]
    unsafe fn members(&mut self, dict: *mut ffi::PyObject) -> Result<(), Stop> {
        let mut position: ffi::Py_ssize_t = 0;
        let mut key: *mut ffi::PyObject = std::ptr::null_mut();
        let mut value: *mut ffi::PyObject = std::ptr::null_mut();
        // SAFETY: (the caller's) the GIL is held and no Python code runs, so the dict does not change
        // under `PyDict_Next`, and the references it lends stay valid.
        unsafe {
            while dict_next(dict, &raw mut position, &raw mut key, &raw mut value) {
                self.member(key, value)?;
            }
        }
        Ok(())
    }

    /// Without the GIL, `PyDict_Next` runs inside a critical section on the dict (which other
    /// threads' changes to it wait for), and each key and value it lends is held (an owned
    /// reference) while it is written: a nested container's own critical section may suspend this
    /// one while it waits, and the dict may change then, but what is being written stays alive, and
    /// `PyDict_Next` goes on from its position in the dict as it then is.
    ///
    /// # Safety
    /// As `dict`.
    #[cfg(Py_GIL_DISABLED)]
    #[inline(never)]
    unsafe fn members(&mut self, dict: *mut ffi::PyObject) -> Result<(), Stop> {
        // SAFETY: `Plain::write`'s caller holds a `Bound`: this thread is attached.
        let py = unsafe { Python::assume_attached() };
        // SAFETY: (the caller's) `dict` is alive.
        let dict = unsafe { pyo3::Borrowed::from_ptr(py, dict) };
        pyo3::sync::critical_section::with_critical_section(&dict, || {
            let mut position: ffi::Py_ssize_t = 0;
            let mut key: *mut ffi::PyObject = std::ptr::null_mut();
            let mut value: *mut ffi::PyObject = std::ptr::null_mut();
            // SAFETY: the dict is locked while `PyDict_Next` reads it, and its key and value are
            // made owned before anything else runs; they are released once written.
            unsafe {
                while dict_next(dict.as_ptr(), &raw mut position, &raw mut key, &raw mut value) {
                    ffi::Py_INCREF(key);
                    ffi::Py_INCREF(value);
                    let written = self.member(key, value);
                    ffi::Py_DECREF(key);
                    ffi::Py_DECREF(value);
                    written?;
                }
            }
            Ok(())
        })
    }

    /// One member of a dict, and the comma after it.
    ///
    /// # Safety
    /// As `value`, and `key` and `value` are alive while it runs.
    #[inline(always)]
    unsafe fn member(&mut self, key: *mut ffi::PyObject, value: *mut ffi::PyObject) -> Result<(), Stop> {
        // SAFETY: (the caller's)
        unsafe {
            if ffi::Py_TYPE(key) == &raw mut ffi::PyUnicode_Type {
                self.str_key(key)?;
            } else {
                self.key(key)?;
            }
            self.out.push(b':');
            self.value(value)?;
        }
        self.out.push(b',');
        Ok(())
    }

    /// An exact `str` key, from the `KeyCache` when it was written before.
    ///
    /// # Safety
    /// As `value`, and `key` is a `str`.
    #[inline(always)]
    unsafe fn str_key(&mut self, key: *mut ffi::PyObject) -> Result<(), Stop> {
        // The keys of the outermost dict are seldom met again: the cache is for those nested deeper,
        // and is looked up the first time one is met. Without the GIL a key written and released may be
        // freed by another thread and its address be a new key's within the pass: no cache there.
        if cfg!(Py_GIL_DISABLED) || self.depth < 2 {
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

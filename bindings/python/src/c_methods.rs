//! Functions and methods written against the C API: the methods of `dlbridge.Tensor`, a type made
//! with `PyType_FromSpec` rather than as a pyo3 class (see [`crate::tensor`]), for which
//! `#[pymethods]` cannot generate them, and `from_dlpack`, which is measurably faster this way
//! than as a `#[pyfunction]` (the numbers are at its definition in [`crate::consumer`]). This module gives
//! them `PyMethodDef`s and parses the arguments of those that take keywords (`from_dlpack`,
//! `__dlpack__`, `copy`): `METH_FASTCALL | METH_KEYWORDS`, keyword names matched by interned
//! identity, the name-to-slot mapping cached per keyword-name tuple.

use std::ffi::CStr;

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyString;

use crate::errors::type_error;
use crate::gil_cell::GilCell;

/// A `PyMethodDef` that can live in a `static`.
#[repr(transparent)]
pub(crate) struct MethodDef(ffi::PyMethodDef);

// SAFETY: the definition is immutable after construction and CPython only reads it.
unsafe impl Sync for MethodDef {}

impl MethodDef {
    /// A `METH_FASTCALL | METH_KEYWORDS` function or method. `doc` starts with the text signature
    /// (`name($self, args)\n--\n\n`) so that `inspect.signature` works.
    pub(crate) const fn fastcall(
        name: &'static CStr,
        func: ffi::PyCFunctionFastWithKeywords,
        doc: &'static CStr,
    ) -> Self {
        MethodDef(ffi::PyMethodDef {
            ml_name: name.as_ptr(),
            ml_meth: ffi::PyMethodDefPointer {
                PyCFunctionFastWithKeywords: func,
            },
            ml_flags: ffi::METH_FASTCALL | ffi::METH_KEYWORDS,
            ml_doc: doc.as_ptr(),
        })
    }

    /// A `METH_NOARGS` method.
    pub(crate) const fn noargs(
        name: &'static CStr,
        func: ffi::PyCFunction,
        doc: &'static CStr,
    ) -> Self {
        Self::plain(name, func, ffi::METH_NOARGS, doc)
    }

    /// A `METH_O` method (one positional argument).
    pub(crate) const fn one_arg(
        name: &'static CStr,
        func: ffi::PyCFunction,
        doc: &'static CStr,
    ) -> Self {
        Self::plain(name, func, ffi::METH_O, doc)
    }

    /// A method with the plain `PyCFunction` signature and the given calling convention.
    const fn plain(
        name: &'static CStr,
        func: ffi::PyCFunction,
        flags: std::ffi::c_int,
        doc: &'static CStr,
    ) -> Self {
        MethodDef(ffi::PyMethodDef {
            ml_name: name.as_ptr(),
            ml_meth: ffi::PyMethodDefPointer { PyCFunction: func },
            ml_flags: flags,
            ml_doc: doc.as_ptr(),
        })
    }

    /// The all-NULL entry that ends a method table.
    // SAFETY: CPython reads a zeroed PyMethodDef as the end of the table.
    pub(crate) const END: MethodDef = MethodDef(unsafe { std::mem::zeroed() });

    /// The definition as CPython's API wants it (never written through).
    pub(crate) fn as_ptr(&'static self) -> *mut ffi::PyMethodDef {
        &self.0 as *const ffi::PyMethodDef as *mut ffi::PyMethodDef
    }
}

/// The positional and keyword arguments of a vectorcall.
pub(crate) struct Arguments<'a, 'py> {
    py: Python<'py>,
    positional: &'a [*mut ffi::PyObject],
    keyword_values: &'a [*mut ffi::PyObject],
    kwnames: *mut ffi::PyObject,
}

impl<'a, 'py> Arguments<'a, 'py> {
    /// Wraps the raw arguments of a fastcall entry point.
    ///
    /// # Safety
    /// `args` holds `nargs` positional arguments followed by one value per entry of `kwnames`
    /// (a tuple of str, or NULL), all borrowed for `'a`, as CPython passes them.
    #[inline]
    pub(crate) unsafe fn new(
        py: Python<'py>,
        args: *const *mut ffi::PyObject,
        nargs: ffi::Py_ssize_t,
        kwnames: *mut ffi::PyObject,
    ) -> Self {
        // SAFETY: kwnames is NULL or a tuple (contract).
        let nkw = if kwnames.is_null() {
            0
        } else {
            // SAFETY: a non-NULL kwnames is a tuple (contract).
            unsafe { ffi::PyTuple_Size(kwnames) }
        };
        let (nargs, nkw) = (nargs as usize, nkw.max(0) as usize);
        let all: &'a [*mut ffi::PyObject] = if nargs + nkw == 0 {
            &[]
        } else {
            // SAFETY: `args` holds nargs + nkw borrowed pointers (contract).
            unsafe { std::slice::from_raw_parts(args, nargs + nkw) }
        };
        let (positional, keyword_values) = all.split_at(nargs);
        Arguments {
            py,
            positional,
            keyword_values,
            kwnames,
        }
    }

    /// The positional arguments, checked to be exactly `N` for function `name`.
    #[inline]
    pub(crate) fn positional<const N: usize>(
        &self,
        name: &str,
    ) -> PyResult<[Borrowed<'a, 'py, PyAny>; N]> {
        if self.positional.len() != N {
            return Err(type_error(format!(
                "{name}() takes {N} positional argument{} but {} were given",
                if N == 1 { "" } else { "s" },
                self.positional.len()
            )));
        }
        // SAFETY: CPython passes live, borrowed, non-NULL argument pointers.
        Ok(std::array::from_fn(|i| unsafe {
            Borrowed::from_ptr(self.py, self.positional[i])
        }))
    }

    /// Up to `N` positional arguments for function `name`, the missing ones `None`.
    #[inline]
    pub(crate) fn optional_positional<const N: usize>(
        &self,
        name: &str,
    ) -> PyResult<[Option<Borrowed<'a, 'py, PyAny>>; N]> {
        if self.positional.len() > N {
            return Err(type_error(format!(
                "{name}() takes at most {N} positional argument{} but {} were given",
                if N == 1 { "" } else { "s" },
                self.positional.len()
            )));
        }
        Ok(std::array::from_fn(|i| {
            self.positional
                .get(i)
                // SAFETY: CPython passes live, borrowed, non-NULL argument pointers.
                .map(|&p| unsafe { Borrowed::from_ptr(self.py, p) })
        }))
    }

    /// Assigns each keyword argument to the slot of the same name (`names`: interned strings with
    /// their ASCII spelling); unknown or repeated names are a TypeError.
    ///
    /// A call site passes the same keyword-name tuple every time, so the name-to-slot mapping is
    /// remembered per tuple in `cache`; only a new tuple is resolved by comparing names.
    #[inline]
    pub(crate) fn keywords<const N: usize>(
        &self,
        function: &str,
        names: [(&Py<PyString>, &CStr); N],
        cache: &'static KeywordCache,
    ) -> PyResult<[Option<Borrowed<'a, 'py, PyAny>>; N]> {
        const { assert!(N <= MAX_KEYWORDS, "raise MAX_KEYWORDS") };
        let mut slots: [Option<Borrowed<'a, 'py, PyAny>>; N] = [None; N];
        if self.keyword_values.is_empty() {
            return Ok(slots);
        }
        let mapping = match cache.find(self.py, self.kwnames) {
            Some(mapping) => mapping,
            None => {
                let mapping = self.resolve(function, &names)?;
                cache.insert(self.py, self.kwnames, mapping);
                mapping
            }
        };
        for (&slot, &value) in mapping.iter().zip(self.keyword_values) {
            // SAFETY: CPython passes live, borrowed, non-NULL argument pointers.
            slots[usize::from(slot)] = Some(unsafe { Borrowed::from_ptr(self.py, value) });
        }
        Ok(slots)
    }

    /// Whether every keyword value is an immutable constant whose meaning cannot change:
    /// `None`, a bool, or an exact tuple of exact ints (what `copy`, `max_version` and
    /// `dl_device` are given). Such values decode the same way every time, so a call made of
    /// them can be recorded in a [`RecentCall`].
    pub(crate) fn constant_values(&self) -> bool {
        // SAFETY: type objects are static data; every value is a live object (contract of
        // `new`); the items of an exact tuple are in range and borrowed.
        self.keyword_values.iter().all(|&v| unsafe {
            let ty = ffi::Py_TYPE(v);
            if v == ffi::Py_None() || ty == &raw mut ffi::PyBool_Type {
                return true;
            }
            ty == &raw mut ffi::PyTuple_Type
                && (0..ffi::PyTuple_Size(v))
                    .all(|i| ffi::Py_TYPE(ffi::PyTuple_GetItem(v, i)) == &raw mut ffi::PyLong_Type)
        })
    }

    /// Maps each keyword name to its slot index by comparing names.
    fn resolve<const N: usize>(
        &self,
        function: &str,
        names: &[(&Py<PyString>, &CStr); N],
    ) -> PyResult<[u8; MAX_KEYWORDS]> {
        let mut mapping = [0u8; MAX_KEYWORDS];
        let mut seen = [false; N];
        for (i, _) in self.keyword_values.iter().enumerate() {
            // SAFETY: kwnames has one str per keyword value; PyTuple_GetItem returns a borrowed
            // reference and `i` is in range.
            let name = unsafe { ffi::PyTuple_GetItem(self.kwnames, i as ffi::Py_ssize_t) };
            // Keyword names in bytecode are interned, so identity usually decides.
            let slot = names
                .iter()
                .position(|(interned, _)| name == interned.as_ptr())
                .or_else(|| {
                    names.iter().position(|(_, ascii)| {
                        // SAFETY: `name` is a str; the comparison cannot fail or raise.
                        unsafe { ffi::PyUnicode_CompareWithASCIIString(name, ascii.as_ptr()) == 0 }
                    })
                });
            match slot {
                Some(k) if !seen[k] => {
                    seen[k] = true;
                    // At most N <= MAX_KEYWORDS names can be distinct and known, so `i` fits.
                    mapping[i] = k as u8;
                }
                Some(k) => {
                    return Err(type_error(format!(
                        "{function}() got multiple values for argument '{}'",
                        names[k].1.to_string_lossy()
                    )))
                }
                None => {
                    // SAFETY: `name` is a borrowed str from kwnames.
                    let name = unsafe { Borrowed::from_ptr(self.py, name) };
                    return Err(type_error(format!(
                        "{function}() got an unexpected keyword argument '{}'",
                        &*name
                    )));
                }
            }
        }
        Ok(mapping)
    }
}

/// The keyword names and values of the last call an entry point recorded, with what they
/// decoded to, so that a caller that passes the same objects again (numpy's `from_dlpack` passes
/// one constant keyword-name tuple and the same `None`s and `max_version` tuple on every call) is
/// answered without parsing.
///
/// Only calls whose values are all immutable constants (see [`Arguments::constant_values`]) are
/// recorded, so that the same objects always decode the same way; the references held here keep
/// their addresses from being reused by other objects while recorded.
pub(crate) struct RecentCall<T> {
    last: GilCell<Option<RecordedCall<T>>>,
}

/// A recorded call: owned references to its keyword-name tuple (or NULL) and keyword values.
struct RecordedCall<T> {
    kwnames: *mut ffi::PyObject,
    values: [*mut ffi::PyObject; MAX_KEYWORDS],
    count: usize,
    decoded: T,
}

impl<T: Copy> RecentCall<T> {
    /// Nothing recorded yet.
    pub(crate) const fn new() -> Self {
        RecentCall {
            last: GilCell::new(None),
        }
    }

    /// What the recorded call decoded to, if this call (the raw arguments of a fastcall entry
    /// point) passes no positional arguments and the same keyword names and values, by identity.
    ///
    /// # Safety
    /// As for [`Arguments::new`].
    #[inline]
    pub(crate) unsafe fn find(
        &self,
        py: Python<'_>,
        args: *const *mut ffi::PyObject,
        nargs: ffi::Py_ssize_t,
        kwnames: *mut ffi::PyObject,
    ) -> Option<T> {
        if nargs != 0 {
            return None;
        }
        self.last.with(py, |last| {
            let last = last.as_ref().filter(|last| last.kwnames == kwnames)?;
            // SAFETY: the same keyword-name tuple as the recorded call, so `args` holds
            // `last.count` keyword values (the contract of `Arguments::new`).
            let values = unsafe { std::slice::from_raw_parts(args, last.count) };
            (values == &last.values[..last.count]).then_some(last.decoded)
        })
    }

    /// Records `args` (no positional arguments, constant values: callers check
    /// [`Arguments::constant_values`]) as decoding to `decoded`, replacing the call recorded
    /// before.
    pub(crate) fn record(&self, args: &Arguments<'_, '_>, decoded: T) {
        debug_assert!(args.positional.is_empty() && args.constant_values());
        let count = args.keyword_values.len();
        let mut values = [std::ptr::null_mut(); MAX_KEYWORDS];
        values[..count].copy_from_slice(args.keyword_values);
        // SAFETY: live objects (the call's arguments); the references are released when the
        // record is replaced.
        unsafe {
            ffi::Py_XINCREF(args.kwnames);
            values[..count].iter().for_each(|&v| ffi::Py_IncRef(v));
        }
        let recorded = RecordedCall {
            kwnames: args.kwnames,
            values,
            count,
            decoded,
        };
        let replaced = self.last.with(args.py, |last| last.replace(recorded));
        if let Some(replaced) = replaced {
            // SAFETY: the references taken when it was recorded; the GIL is held. Releasing
            // them runs no Python code (str tuples, constants) and happens outside the cell.
            unsafe {
                ffi::Py_XDECREF(replaced.kwnames);
                replaced.values[..replaced.count]
                    .iter()
                    .for_each(|&v| ffi::Py_DecRef(v));
            }
        }
    }
}

/// The most keyword arguments an entry point takes.
const MAX_KEYWORDS: usize = 4;

/// Keyword-name tuples seen by one entry point, with their slot mapping. Each cached tuple is
/// kept alive by a reference, so its address cannot be reused by another tuple.
pub(crate) struct KeywordCache {
    entries: GilCell<Vec<(*mut ffi::PyObject, [u8; MAX_KEYWORDS])>>,
}

/// Tuples remembered per entry point (call sites with distinct keyword sets).
const KEYWORD_CACHE_SIZE: usize = 8;

impl KeywordCache {
    /// An empty cache.
    pub(crate) const fn new() -> Self {
        KeywordCache {
            entries: GilCell::new(Vec::new()),
        }
    }

    fn find(&self, py: Python<'_>, kwnames: *mut ffi::PyObject) -> Option<[u8; MAX_KEYWORDS]> {
        self.entries.with(py, |entries| {
            entries
                .iter()
                .find(|(names, _)| *names == kwnames)
                .map(|&(_, mapping)| mapping)
        })
    }

    fn insert(&self, py: Python<'_>, kwnames: *mut ffi::PyObject, mapping: [u8; MAX_KEYWORDS]) {
        // SAFETY: a live tuple; the reference keeps its address unique while cached.
        unsafe { ffi::Py_IncRef(kwnames) };
        let evicted = self.entries.with(py, |entries| {
            let evicted = (entries.len() == KEYWORD_CACHE_SIZE).then(|| entries.remove(0).0);
            entries.push((kwnames, mapping));
            evicted
        });
        if let Some(evicted) = evicted {
            // SAFETY: the reference taken when the entry was added; the GIL is held.
            unsafe { ffi::Py_DecRef(evicted) };
        }
    }
}

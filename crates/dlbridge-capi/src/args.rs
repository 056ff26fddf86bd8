//! Checked reads of C arguments and writes of out-parameters.

use std::borrow::Cow;
use std::ffi::{c_char, CStr};
use std::ptr::{self, NonNull};

use crate::status::CapiError;

/// A caller's out-parameter, checked non-NULL.
pub(crate) struct Out<T>(NonNull<T>);

impl<T> Out<T> {
    /// Checks `ptr` (named `name` in the error) for NULL.
    ///
    /// # Safety
    /// `ptr` is NULL or valid for writing one `T` for the rest of the call.
    pub(crate) unsafe fn new(ptr: *mut T, name: &'static str) -> Result<Self, CapiError> {
        NonNull::new(ptr)
            .map(Out)
            .ok_or(CapiError::NullArgument(name))
    }

    /// Stores the result.
    pub(crate) fn write(self, value: T) {
        // SAFETY: non-NULL and writable by the contract of `new`; `write` drops no old value,
        // which may be uninitialised caller memory.
        unsafe { self.0.as_ptr().write(value) }
    }
}

impl<T> Out<*mut T> {
    /// Like [`Out::new`], and sets `*ptr` to NULL at once, so that a caller sees NULL (rather
    /// than a stale pointer) after any failure.
    ///
    /// # Safety
    /// As for [`Out::new`].
    pub(crate) unsafe fn cleared(ptr: *mut *mut T, name: &'static str) -> Result<Self, CapiError> {
        // SAFETY: forwarded contract.
        let out = unsafe { Out::new(ptr, name) }?;
        // SAFETY: as in `write`.
        unsafe { out.0.as_ptr().write(ptr::null_mut()) };
        Ok(out)
    }
}

/// Reads a shape argument: checks ndim against 0..=1024, then `shape` for NULL when ndim > 0.
///
/// # Safety
/// When `ndim` is in range and `shape` is not NULL, `shape` points to `ndim` readable `int64_t`s
/// that stay unchanged for `'a`.
pub(crate) unsafe fn dims_arg<'a>(ndim: i32, shape: *const i64) -> Result<&'a [i64], CapiError> {
    let n = usize::try_from(ndim)
        .ok()
        .filter(|&n| n <= dlbridge::MAX_NDIM)
        .ok_or(dlbridge::Error::NdimOutOfRange(ndim.into()))?;
    if n == 0 {
        return Ok(&[]);
    }
    if shape.is_null() {
        return Err(dlbridge::Error::NullShape(ndim).into());
    }
    // SAFETY: non-NULL, `n` readable elements by the function's contract.
    Ok(unsafe { std::slice::from_raw_parts(shape, n) })
}

/// Reads a NUL-terminated string argument (named `name` in the error); invalid UTF-8 is replaced.
///
/// # Safety
/// `text` is NULL or a NUL-terminated string that stays unchanged for `'a`.
pub(crate) unsafe fn str_arg<'a>(
    text: *const c_char,
    name: &'static str,
) -> Result<Cow<'a, str>, CapiError> {
    if text.is_null() {
        return Err(CapiError::NullArgument(name));
    }
    // SAFETY: non-NULL and NUL-terminated by the function's contract.
    Ok(unsafe { CStr::from_ptr(text) }.to_string_lossy())
}

/// Writes `text` and a terminating NUL into the caller's buffer `buf` (named `name`) of `len`
/// bytes, or fails with `NameBufferTooSmall` leaving it untouched.
///
/// # Safety
/// `buf` is NULL or writable for `len` bytes.
pub(crate) unsafe fn write_str(
    buf: *mut c_char,
    len: usize,
    name: &'static str,
    text: String,
) -> Result<(), CapiError> {
    if buf.is_null() {
        return Err(CapiError::NullArgument(name));
    }
    if text.len() >= len {
        return Err(CapiError::NameBufferTooSmall { name: text, len });
    }
    // SAFETY: `buf` is writable for `len > text.len()` bytes; a fresh String cannot overlap it.
    unsafe {
        ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), text.len());
        buf.add(text.len()).write(0);
    }
    Ok(())
}

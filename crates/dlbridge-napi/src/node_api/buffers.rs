//! ArrayBuffers and typed arrays: reading a typed array's facts, making buffers (plain,
//! external, copies) and typed-array views on them.

use std::ffi::c_void;
use std::ptr;

use dlbridge::layout::{self, Order};
use dlbridge::{copy, Device, Flags, TensorView};
use napi::sys;

use super::{check, Finalize, Handle, Scope};
use crate::error::{Error, Result};
use crate::typed_arrays::ArrayKind;

/// A typed array's facts, as Node-API reports them.
#[derive(Clone, Copy)]
pub struct TypedArrayInfo<'env> {
    /// Its class.
    pub kind: ArrayKind,
    /// Length in elements.
    pub length: usize,
    /// Address of its first element (byteOffset applied).
    pub data: *mut u8,
    /// The ArrayBuffer (or SharedArrayBuffer) it views.
    pub buffer: Handle<'env>,
    /// Its byteOffset in `buffer`.
    pub byte_offset: usize,
}

/// What became of a request for an external ArrayBuffer.
pub enum External<'env> {
    /// The buffer; Node calls the finalizer with the hint once it is collected.
    Created(Handle<'env>),
    /// The runtime forbids external buffers (`napi_no_external_buffers_allowed`, Electron's
    /// memory cage); the hint is still the caller's and the finalizer never runs.
    Forbidden,
    /// Another failure. Where `hint_taken`, Node runs the finalizer with the hint (now or
    /// later): the caller must not free it.
    Failed {
        /// What failed.
        failure: Error,
        /// Whether Node took the hint.
        hint_taken: bool,
    },
}

impl<'env> Scope<'env> {
    /// A new, zero-filled ArrayBuffer of `len` bytes and the address of its memory. V8 ends the
    /// process when this allocation fails: large buffers are better made by JavaScript's own
    /// `ArrayBuffer` constructor, which throws instead.
    pub fn create_arraybuffer(self, len: usize) -> Result<(Handle<'env>, *mut u8)> {
        let (mut out, mut data) = (ptr::null_mut(), ptr::null_mut());
        check(
            // SAFETY: live env, valid out-pointers.
            unsafe { sys::napi_create_arraybuffer(self.env, len, &mut data, &mut out) },
            "napi_create_arraybuffer",
        )
        .map_err(|_| {
            Error::range_error(
                "ERR_DLBRIDGE_ALLOCATION_FAILED",
                format!("cannot allocate an ArrayBuffer of {len} bytes"),
            )
        })?;
        Ok((self.handle(out), data.cast()))
    }

    /// An ArrayBuffer over memory the caller keeps alive until `finalize` runs (with `hint`).
    ///
    /// # Safety
    /// `data..data + len` stays valid and unmoved until `finalize(env, data, hint)` runs, and no
    /// other ArrayBuffer reachable from this environment starts at `data`.
    pub unsafe fn create_external_arraybuffer(
        self,
        data: *mut u8,
        len: usize,
        finalize: Finalize,
        hint: *mut c_void,
    ) -> External<'env> {
        let mut out = ptr::null_mut();
        // SAFETY: live env; the memory contract is the caller's.
        let status = unsafe {
            sys::napi_create_external_arraybuffer(
                self.env,
                data.cast(),
                len,
                Some(finalize),
                hint,
                &mut out,
            )
        };
        let Err(failed) = check(status, "napi_create_external_arraybuffer") else {
            return External::Created(self.handle(out));
        };
        use sys::Status as S;
        match failed.status() {
            S::napi_no_external_buffers_allowed => External::Forbidden,
            // Node checks these before it takes the hint.
            S::napi_invalid_arg | S::napi_pending_exception | S::napi_cannot_run_js => {
                External::Failed {
                    failure: failed.into(),
                    hint_taken: false,
                }
            }
            // Node made its finalizer, then refused the buffer (a length beyond its limit): it
            // finalizes the hint itself.
            _ => External::Failed {
                failure: failed.into(),
                hint_taken: true,
            },
        }
    }

    /// A typed array of `kind` over `length` elements of `buffer` (an ArrayBuffer or a
    /// SharedArrayBuffer) from `byte_offset`.
    pub fn create_typed_array(
        self,
        kind: ArrayKind,
        length: usize,
        buffer: Handle<'env>,
        byte_offset: usize,
    ) -> Result<Handle<'env>> {
        let mut out = ptr::null_mut();
        // SAFETY: live env, `buffer` is a value of this call; Node-API checks the range.
        let status = unsafe {
            sys::napi_create_typedarray(
                self.env,
                kind.to_napi(),
                length,
                buffer.value,
                byte_offset,
                &mut out,
            )
        };
        match check(status, "napi_create_typedarray") {
            Ok(()) => Ok(self.handle(out)),
            // Node-API before Node 24 takes ArrayBuffers only: build views of a
            // SharedArrayBuffer with the JS constructor.
            Err(failed) if failed.status() == sys::Status::napi_invalid_arg => {
                self.construct_typed_array(kind, length, buffer, byte_offset)
            }
            Err(failed) => Err(failed.into()),
        }
    }

    /// `new globalThis[kind.name()](buffer, byte_offset, length)`.
    fn construct_typed_array(
        self,
        kind: ArrayKind,
        length: usize,
        buffer: Handle<'env>,
        byte_offset: usize,
    ) -> Result<Handle<'env>> {
        let constructor = self.global()?.get_named(kind.constructor_name())?;
        // Both numbers are below 2^53 (memory sizes).
        let arguments = [
            buffer,
            self.number(byte_offset as f64)?,
            self.number(length as f64)?,
        ];
        self.construct(constructor, &arguments)
    }
}

impl<'env> Handle<'env> {
    /// The typed array's facts, or `None` if this is not a typed array (one Node-API call);
    /// a `TypeError` for a typed array of a class without a dtype (Float16Array).
    #[inline]
    pub fn typed_array_info(self) -> Result<Option<TypedArrayInfo<'env>>> {
        let (mut raw_kind, mut length, mut data) = (0, 0, ptr::null_mut());
        let (mut buffer, mut byte_offset) = (ptr::null_mut(), 0);
        // SAFETY: live env and value, valid out-pointers; for anything but a typed array this
        // fails with `napi_invalid_arg` (no exception), which is how the common case costs one
        // call.
        let status = unsafe {
            sys::napi_get_typedarray_info(
                self.env,
                self.value,
                &mut raw_kind,
                &mut length,
                &mut data,
                &mut buffer,
                &mut byte_offset,
            )
        };
        match check(status, "napi_get_typedarray_info") {
            Ok(()) => {}
            Err(failed) if failed.status() == sys::Status::napi_invalid_arg => return Ok(None),
            Err(failed) => return Err(failed.into()),
        }
        let kind = ArrayKind::from_napi(raw_kind).ok_or_else(|| unsupported_kind(raw_kind))?;
        Ok(Some(TypedArrayInfo {
            kind,
            length,
            data: data.cast(),
            buffer: self.sibling(buffer),
            byte_offset,
        }))
    }

    /// The address of this ArrayBuffer's memory.
    pub fn arraybuffer_data(self) -> Result<*mut u8> {
        let (mut data, mut len) = (ptr::null_mut(), 0);
        check(
            // SAFETY: live env and value, valid out-pointers; non-ArrayBuffers fail with a status.
            unsafe { sys::napi_get_arraybuffer_info(self.env, self.value, &mut data, &mut len) },
            "napi_get_arraybuffer_info",
        )?;
        Ok(data.cast())
    }
}

#[cold]
fn unsupported_kind(raw_kind: sys::napi_typedarray_type) -> Error {
    Error::type_error(
        "ERR_DLBRIDGE_UNSUPPORTED_TYPED_ARRAY",
        format!("typed array type {raw_kind} has no DLPack dtype"),
    )
}

/// A new ArrayBuffer holding `view`'s elements in C order (sub-byte padding carried over);
/// `allocate(nbytes)` makes the zero-filled buffer and gives its address.
pub fn copy_to_arraybuffer<'env>(
    view: &TensorView<'_>,
    allocate: impl FnOnce(usize) -> Result<(Handle<'env>, *mut u8)>,
) -> Result<Handle<'env>> {
    view.require_host()?;
    let (buffer, data) = allocate(view.nbytes())?;
    if view.size() == 0 {
        return Ok(buffer);
    }
    let strides = layout::compact_strides(view.shape(), Order::C);
    // SAFETY: the new buffer holds `nbytes` writable bytes, exactly the compact C layout of
    // `view`'s shape and dtype (sub-byte padding carried over); JS cannot touch it during the
    // copy.
    let destination = unsafe {
        TensorView::from_raw_parts(
            data,
            view.shape(),
            &strides,
            view.dtype(),
            Device::CPU,
            view.flags() & Flags::IS_SUBBYTE_TYPE_PADDED,
        )
    };
    copy::copy_into(view, &destination)?;
    Ok(buffer)
}

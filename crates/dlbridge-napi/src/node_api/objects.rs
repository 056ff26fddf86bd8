//! Objects that native code owns a part of: references, wrapped native pointers and type tags.

use std::ffi::c_void;
use std::ptr;

use napi::bindgen_prelude::TypeTag;
use napi::sys;

use super::{check, Finalize, Handle, JsType, ObjectTag, Reference, Scope};
use crate::error::Result;

impl<'env> Scope<'env> {
    /// A reference to `value` with `count` strong references (0: weak).
    pub fn create_reference(self, value: Handle<'env>, count: u32) -> Result<Reference> {
        let mut out = ptr::null_mut();
        check(
            // SAFETY: live env, `value` belongs to this call.
            unsafe { sys::napi_create_reference(self.env, value.value, count, &mut out) },
            "napi_create_reference",
        )?;
        Ok(Reference(out))
    }

    /// The referenced value, or `None` once a weak reference's value was collected.
    ///
    /// # Safety
    /// `reference` was created in this environment and not yet deleted.
    #[inline]
    pub unsafe fn reference_value(self, reference: Reference) -> Option<Handle<'env>> {
        let mut out = ptr::null_mut();
        let read = check(
            // SAFETY: live env; the reference is live (caller's contract).
            unsafe { sys::napi_get_reference_value(self.env, reference.0, &mut out) },
            "napi_get_reference_value",
        );
        (read.is_ok() && !out.is_null()).then(|| self.handle(out))
    }

    /// Deletes a reference.
    ///
    /// # Safety
    /// `reference` was created in this environment and is deleted only once.
    pub unsafe fn delete_reference(self, reference: Reference) {
        let deleted = check(
            // SAFETY: per the caller's contract.
            unsafe { sys::napi_delete_reference(self.env, reference.0) },
            "napi_delete_reference",
        );
        // Fails only while the environment tears down, which deletes what is left itself.
        drop(deleted);
    }
}

impl<'env> Handle<'env> {
    /// Wraps `native` in this object; Node calls `finalize(env, native, NULL)` once the object
    /// is collected. On failure Node did not take `native`.
    ///
    /// # Safety
    /// This is an object that nothing wrapped yet, and `native` stays valid until `finalize`
    /// runs.
    pub unsafe fn wrap(self, native: *mut c_void, finalize: Finalize) -> Result<()> {
        check(
            // SAFETY: live env and value; the object and pointer contract is the caller's.
            unsafe {
                sys::napi_wrap(
                    self.env,
                    self.value,
                    native,
                    Some(finalize),
                    ptr::null_mut(),
                    ptr::null_mut(),
                )
            },
            "napi_wrap",
        )?;
        Ok(())
    }

    /// The native pointer wrapped in this object, `None` if there is none. Reads no property and
    /// runs no JavaScript.
    pub fn unwrap_raw(self) -> Option<*mut c_void> {
        let mut wrapped = ptr::null_mut();
        let read = check(
            // SAFETY: live env and value; non-objects and unwrapped objects fail with a status.
            unsafe { sys::napi_unwrap(self.env, self.value, &mut wrapped) },
            "napi_unwrap",
        );
        (read.is_ok() && !wrapped.is_null()).then_some(wrapped)
    }

    /// The object's prototype, read without running JavaScript: a Proxy reports none (its
    /// `getPrototypeOf` trap is not called), and neither does a non-object.
    pub fn prototype(self) -> Option<Handle<'env>> {
        let mut out = ptr::null_mut();
        let read = check(
            // SAFETY: live env and value, valid out-pointer; V8 reads the prototype from the
            // object's map, and stops at a Proxy without calling its trap.
            unsafe { sys::napi_get_prototype(self.env, self.value, &mut out) },
            "napi_get_prototype",
        );
        read.ok()
            .map(|()| self.sibling(out))
            .filter(|prototype| prototype.js_type() == JsType::Object)
    }

    /// Whether this is an object carrying the type `tag` (which only native code can set).
    #[inline]
    pub fn has_type_tag(self, tag: &ObjectTag) -> bool {
        // Only objects carry tags. Node converts anything else to an object first, which for
        // `null` and `undefined` throws and leaves that TypeError pending: never ask about those.
        self.js_type() == JsType::Object && self.object_has_type_tag(tag)
    }

    /// [`has_type_tag`](Self::has_type_tag) for a value known to be an object (one Node-API
    /// call instead of two). Asked of `null` or `undefined`, it answers `false` and leaves a
    /// `TypeError` pending.
    #[inline]
    pub fn object_has_type_tag(self, tag: &ObjectTag) -> bool {
        let mut tagged = false;
        let asked = check(
            // SAFETY: live env and an object value; `tag` outlives the call.
            unsafe { sys::napi_check_object_type_tag(self.env, self.value, tag, &mut tagged) },
            "napi_check_object_type_tag",
        );
        asked.is_ok() && tagged
    }

    /// Whether this is an object carrying either tag (one type check for both).
    #[inline]
    pub fn has_either_type_tag(self, first: &ObjectTag, second: &ObjectTag) -> bool {
        self.js_type() == JsType::Object
            && (self.object_has_type_tag(first) || self.object_has_type_tag(second))
    }

    /// Tags the object with `tag`; `false` if it could not be (already tagged, by this or
    /// another addon).
    pub fn add_type_tag(self, tag: &ObjectTag) -> bool {
        let tagged = check(
            // SAFETY: live env and value; `tag` outlives the call.
            unsafe { sys::napi_type_tag_object(self.env, self.value, tag) },
            "napi_type_tag_object",
        );
        tagged.is_ok()
    }

    /// [`class_instance`](Self::class_instance) for the `this` of a native function, which is
    /// an object (V8 converts a primitive receiver, and a missing one becomes the global
    /// object), so that its type need not be asked (two Node-API calls instead of three). Were
    /// it `null` or `undefined`, the answer is `None` with a `TypeError` pending.
    ///
    /// # Safety
    /// As for [`class_instance`](Self::class_instance).
    #[inline]
    pub unsafe fn receiver_instance<T: TypeTag>(self) -> Option<&'env T> {
        if !self.object_has_type_tag(&T::type_tag()) {
            return None;
        }
        let wrapped = self.unwrap_raw()?;
        // SAFETY: as in `class_instance`.
        Some(unsafe { &*(wrapped as *const T) })
    }

    /// The native object of an instance of the `#[napi]` class `T`, or `None` for any other
    /// value. Like napi-rs's own `&T` argument conversion, it checks the object's type tag before
    /// trusting the wrapped pointer; unlike it, it works outside argument conversion (so that a
    /// wrong argument gets dlbridge's `TypeError`).
    ///
    /// # Safety
    /// `T` is a `#[napi]` class (napi-rs wraps its instances as a boxed `T` tagged with
    /// `T::type_tag()`), whose methods all take `&self` (no `&mut T` can alias the result).
    pub unsafe fn class_instance<T: TypeTag>(self) -> Option<&'env T> {
        if !self.has_type_tag(&T::type_tag()) {
            return None;
        }
        let wrapped = self.unwrap_raw()?;
        // SAFETY: the tag says napi-rs wrapped a `T` here (caller's contract); the object, which
        // owns it, is a value of the current call and so outlives `'env`.
        Some(unsafe { &*(wrapped as *const T) })
    }
}

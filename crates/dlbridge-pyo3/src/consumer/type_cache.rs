//! What each producer type offers for importing its instances, learned on first sight and kept
//! for the life of the process: its exchange API, and whether its buffers may stand in for its
//! `__dlpack__`.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::OnceLock;

use dlbridge::{AsTensorView, ManagedTensor};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyType;

use super::autograd::GradAttr;
use super::buffer::{self, LentBuffer};
use super::exchange_api::{self, ExchangeApi};
use super::numpy_array;
use crate::interned;

/// What a type offers for importing its instances.
pub(crate) struct TypeInfo {
    key: usize,
    /// What the type publishes as its C exchange API.
    pub(crate) exchange_api: ExchangeApi,
    /// Whether instances may lend buffers: they export buffers, the type has `__dlpack__`, no
    /// usable exchange API and no `requires_grad`.
    buffers: bool,
    /// Whether the type is numpy's own `ndarray`: instances are read in place (no buffer asked
    /// for, nothing to verify).
    ndarray: bool,
    /// How instances say whether they require grad (torch tensors): those that do are imported
    /// read-only (see [`TypeInfo::requires_grad`]).
    grad: GradAttr,
    /// How instances are best imported, for writable (`[0]`) and read-only (`[1]`) instances
    /// apart (a producer may treat them differently: legacy-only producers refuse read-only
    /// data): [`UNVERIFIED`], [`BUFFER`] or [`DLPACK`].
    route: [AtomicU8; 2],
}

/// The type's buffers have not been compared with its `__dlpack__` yet.
const UNVERIFIED: u8 = 0;
/// An instance's buffer described exactly the tensor its `__dlpack__` gave (memory, dtype,
/// shape, strides, read-only-ness): instances lend their buffers.
const BUFFER: u8 = 1;
/// An instance's buffer and its `__dlpack__` disagreed: always `__dlpack__`.
const DLPACK: u8 = 2;

/// Types seen, in the order they were first seen (a lookup scans them: the first types, usually
/// the hot ones, are found first). Each slot is written once; a cached type is kept alive by a
/// reference, so its address cannot be reused by another type. Types beyond the slots are probed
/// on every call (correct, only slower, and their buffers are never lent).
static TYPES: [OnceLock<TypeInfo>; 64] = [const { OnceLock::new() }; 64];

/// The facts about `obj`'s type: cached, or freshly probed when the cache is full.
pub(crate) enum Known {
    /// From the cache.
    Cached(&'static TypeInfo),
    /// Probed for this call only.
    Fresh(TypeInfo),
}

impl std::ops::Deref for Known {
    type Target = TypeInfo;

    #[inline]
    fn deref(&self) -> &TypeInfo {
        match self {
            Known::Cached(info) => info,
            Known::Fresh(info) => info,
        }
    }
}

/// The facts about `obj`'s type.
#[inline]
pub(crate) fn lookup(obj: &Bound<'_, PyAny>) -> Known {
    // SAFETY: reading the type of a live object.
    let key = unsafe { ffi::Py_TYPE(obj.as_ptr()) } as usize;
    for slot in &TYPES {
        match slot.get() {
            Some(info) if info.key == key => return Known::Cached(info),
            Some(_) => continue,
            None => return insert(obj),
        }
    }
    Known::Fresh(type_info(obj))
}

/// Probes `obj`'s type, then stores the answer in the first empty slot, unless the type was
/// stored meanwhile (then that answer is used).
///
/// The probe runs Python code (attribute lookups a metaclass can intercept, properties, a
/// type's `__getattr__`), which may import tensors itself or let other threads run: it runs
/// before any slot is touched, never while a lock is held, so neither re-entry nor a second
/// thread can wait for it. Two threads probing one type at once both probe; one answer is kept.
#[cold]
fn insert(obj: &Bound<'_, PyAny>) -> Known {
    let probed = type_info(obj);
    let key = probed.key;
    let mut probed = Some(probed);
    for slot in &TYPES {
        if let Some(info) = slot.get() {
            if info.key == key {
                return Known::Cached(info);
            }
            continue;
        }
        // Storing moves a value and runs no Python code: the slot's lock is never held long.
        match slot.set(probed.take().expect("kept until stored")) {
            Ok(()) => {
                // SAFETY: a live type object (the caller borrows an instance); the reference
                // keeps it (and so the key) alive for the life of the process.
                unsafe { ffi::Py_IncRef(key as *mut ffi::PyObject) };
                return Known::Cached(slot.get().expect("just stored"));
            }
            Err(back) => {
                let stored = slot.get().expect("a failed set means a filled slot");
                if stored.key == key {
                    return Known::Cached(stored);
                }
                probed = Some(back);
            }
        }
    }
    Known::Fresh(probed.expect("kept when the cache is full"))
}

fn type_info(obj: &Bound<'_, PyAny>) -> TypeInfo {
    let ty: Bound<'_, PyType> = obj.get_type();
    let py = ty.py();
    let exchange_api = exchange_api::probe(&ty);
    let grad = GradAttr::probe(&ty);
    let autograd = !matches!(grad, GradAttr::Absent);
    let ndarray = numpy_array::is_ndarray(&ty);
    TypeInfo {
        key: ty.as_ptr() as usize,
        ndarray,
        // A usable exchange API is cheaper still and covers every dtype: its types never lend
        // buffers. Nor do types with autograd, whose buffers cannot say that memory is tracked.
        buffers: !ndarray
            && !matches!(exchange_api, ExchangeApi::Usable(_))
            && !autograd
            && buffer::supported(obj)
            && ty
                .hasattr(interned::get(py).dlpack.bind(py))
                .unwrap_or(false),
        grad,
        exchange_api,
        route: [const { AtomicU8::new(UNVERIFIED) }; 2],
    }
}

impl TypeInfo {
    /// Whether `obj` requires grad (its `requires_grad` is true, or cannot be read): autograd
    /// tracks its memory, so it is imported read-only whatever its producer says. torch's own
    /// `__dlpack__` refuses such tensors, but its C exchange API hands them out writable, and a
    /// write through them would happen behind autograd's back.
    #[inline]
    pub(crate) fn requires_grad(&self, obj: &Bound<'_, PyAny>) -> bool {
        self.grad.requires_grad(obj)
    }

    /// Whether instances are always host memory: numpy's own `ndarray`.
    #[inline]
    pub(crate) fn host_only(&self) -> bool {
        self.ndarray
    }

    /// `obj`'s memory lent without DLPack: read in place for numpy arrays; else its buffer,
    /// when the type's buffers of the same read-only-ness were seen to match its `__dlpack__`
    /// and this one maps exactly onto a DLPack tensor.
    #[inline]
    pub(crate) fn lend(&self, obj: &Bound<'_, PyAny>) -> Option<LentBuffer> {
        if self.ndarray {
            // SAFETY: `obj` is an instance of this type, numpy's own `ndarray`.
            return unsafe { numpy_array::lend(obj) };
        }
        let [writable, read_only] = self.route.each_ref().map(|r| r.load(Ordering::Relaxed));
        if !self.buffers || (writable != BUFFER && read_only != BUFFER) {
            return None;
        }
        let buffer = LentBuffer::get(obj)?;
        let route = if buffer.view().is_read_only() {
            read_only
        } else {
            writable
        };
        // A buffer of the other read-only-ness is released unused: `__dlpack__` decides.
        (route == BUFFER).then_some(buffer)
    }

    /// Compares `obj`'s buffer with `managed`, the tensor its `__dlpack__` gave, and settles the
    /// type's route for instances of that read-only-ness. Instances that cannot decide (empty,
    /// off the CPU, or a format without an exact DLPack dtype) leave it unverified.
    pub(crate) fn verify(&self, obj: &Bound<'_, PyAny>, managed: &ManagedTensor) {
        let dlpack = managed.view();
        let route = &self.route[usize::from(dlpack.is_read_only())];
        if !self.buffers || route.load(Ordering::Relaxed) != UNVERIFIED {
            return;
        }
        if dlpack.size() == 0 || !dlpack.device().kind.is_host_accessible() {
            return;
        }
        let Some(buffer) = LentBuffer::get(obj) else {
            return;
        };
        let buffer = buffer.view();
        let agree = buffer.data_ptr() == dlpack.data_ptr()
            && buffer.dtype() == dlpack.dtype()
            && buffer.shape() == dlpack.shape()
            && buffer.strides() == dlpack.strides()
            && buffer.is_read_only() == dlpack.is_read_only();
        route.store(if agree { BUFFER } else { DLPACK }, Ordering::Relaxed);
    }
}

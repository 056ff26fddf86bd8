//! What each producer type offers for importing its instances, learned on first sight and kept
//! for the life of the process: its exchange API, and whether its buffers may stand in for its
//! `__dlpack__`.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::OnceLock;

use dlbridge::{AsTensorView, ManagedTensor};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyType;

use crate::buffer::{self, LentBuffer};
use crate::exchange_api::{self, ExchangeApi};
use crate::import::interned;

/// What a type offers for importing its instances.
pub(crate) struct TypeInfo {
    key: usize,
    /// What the type publishes as its C exchange API.
    pub(crate) exchange_api: ExchangeApi,
    /// Whether instances may lend buffers: they export buffers, the type has `__dlpack__` and no
    /// usable exchange API.
    buffers: bool,
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
            None => return insert(obj, slot),
        }
    }
    Known::Fresh(type_info(obj))
}

/// Probes `obj`'s type into an empty slot (or finds it there, if another thread just did).
#[cold]
fn insert(obj: &Bound<'_, PyAny>, slot: &'static OnceLock<TypeInfo>) -> Known {
    let mut stored = false;
    let info = slot.get_or_init(|| {
        stored = true;
        type_info(obj)
    });
    if stored {
        // SAFETY: a live type object; the reference keeps it (and so the key) alive for the
        // life of the process.
        unsafe { ffi::Py_IncRef(obj.get_type().as_ptr()) };
    }
    if info.key == obj.get_type().as_ptr() as usize {
        Known::Cached(info)
    } else {
        lookup(obj)
    }
}

fn type_info(obj: &Bound<'_, PyAny>) -> TypeInfo {
    let ty: Bound<'_, PyType> = obj.get_type();
    let py = ty.py();
    let exchange_api = exchange_api::probe(&ty);
    TypeInfo {
        key: ty.as_ptr() as usize,
        // A usable exchange API is cheaper still and covers every dtype: its types never lend
        // buffers.
        buffers: !matches!(exchange_api, ExchangeApi::Usable(_))
            && buffer::supported(obj)
            && ty.hasattr(interned(py).dlpack.bind(py)).unwrap_or(false),
        exchange_api,
        route: [const { AtomicU8::new(UNVERIFIED) }; 2],
    }
}

impl TypeInfo {
    /// `obj`'s buffer, when the type's buffers of the same read-only-ness were seen to match its
    /// `__dlpack__` and this one maps exactly onto a DLPack tensor.
    #[inline]
    pub(crate) fn lend(&self, obj: &Bound<'_, PyAny>) -> Option<LentBuffer> {
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

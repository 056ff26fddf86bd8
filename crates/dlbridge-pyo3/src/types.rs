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
    /// Whether instances export buffers (and the type has `__dlpack__`).
    buffers: bool,
    /// How instances are best imported: [`UNVERIFIED`], [`BUFFER`] or [`DLPACK`].
    route: AtomicU8,
}

/// The type's buffers have not been compared with its `__dlpack__` yet.
const UNVERIFIED: u8 = 0;
/// An instance's buffer described exactly the tensor its `__dlpack__` gave (memory, dtype,
/// shape, strides, read-only-ness): instances lend their buffers.
const BUFFER: u8 = 1;
/// An instance's buffer and its `__dlpack__` disagreed: always `__dlpack__`.
const DLPACK: u8 = 2;

/// Types seen. Each slot is written once; a cached type is kept alive by a reference, so its
/// address cannot be reused by another type. Types beyond the slots are probed on every call
/// (correct, only slower).
static TYPES: [OnceLock<TypeInfo>; 16] = [const { OnceLock::new() }; 16];

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
    TypeInfo {
        key: ty.as_ptr() as usize,
        exchange_api: exchange_api::probe(&ty),
        buffers: buffer::supported(obj)
            && ty.hasattr(interned(py).dlpack.bind(py)).unwrap_or(false),
        route: AtomicU8::new(UNVERIFIED),
    }
}

impl TypeInfo {
    /// `obj`'s buffer, when the type's buffers were seen to match its `__dlpack__` and this one
    /// maps exactly onto a DLPack tensor.
    #[inline]
    pub(crate) fn lend(&self, obj: &Bound<'_, PyAny>) -> Option<LentBuffer> {
        if self.buffers && self.route.load(Ordering::Relaxed) == BUFFER {
            LentBuffer::get(obj)
        } else {
            None
        }
    }

    /// Compares `obj`'s buffer with `managed`, the tensor its `__dlpack__` gave, and settles the
    /// type's route. Instances that cannot decide (empty, off the CPU, or a format without an
    /// exact DLPack dtype) leave it unverified.
    pub(crate) fn verify(&self, obj: &Bound<'_, PyAny>, managed: &ManagedTensor) {
        if !self.buffers || self.route.load(Ordering::Relaxed) != UNVERIFIED {
            return;
        }
        let dlpack = managed.view();
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
        let route = if agree { BUFFER } else { DLPACK };
        self.route.store(route, Ordering::Relaxed);
    }
}

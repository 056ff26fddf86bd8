//! A tiny fake producer for the integration tests: builds managed tensors from plain fields and
//! counts how often their deleters run.
#![allow(dead_code)]

use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use dlbridge::ffi::*;

/// Everything a fake managed tensor points at, kept alive until the deleter runs.
pub struct FakeBlock<M> {
    pub managed: M,
    pub shape: Vec<i64>,
    pub strides: Option<Vec<i64>>,
    pub data: Vec<u8>,
    pub deletions: Arc<AtomicUsize>,
}

/// Fields of a fake tensor; `data_len` bytes are allocated unless `null_data`.
#[derive(Debug, Clone)]
pub struct Fields {
    pub version: DLPackVersion,
    pub flags: u64,
    pub ndim: i32,
    pub shape: Vec<i64>,
    pub strides: Option<Vec<i64>>,
    pub dtype: DLDataType,
    pub device: DLDevice,
    pub byte_offset: u64,
    pub data_len: usize,
    pub null_data: bool,
    pub null_shape: bool,
}

impl Fields {
    /// A valid C-contiguous float32 CPU tensor of the given shape.
    pub fn f32(shape: &[i64]) -> Self {
        let n: i64 = shape.iter().product();
        Fields {
            version: DLPackVersion { major: 1, minor: 3 },
            flags: 0,
            ndim: shape.len() as i32,
            shape: shape.to_vec(),
            strides: None,
            dtype: DLDataType {
                code: kDLFloat,
                bits: 32,
                lanes: 1,
            },
            device: DLDevice {
                device_type: kDLCPU,
                device_id: 0,
            },
            byte_offset: 0,
            data_len: (n.max(0) as usize) * 4,
            null_data: false,
            null_shape: false,
        }
    }
}

unsafe extern "C" fn delete_versioned(m: *mut DLManagedTensorVersioned) {
    // SAFETY: manager_ctx is the leaked block (see `versioned`).
    let block =
        unsafe { Box::from_raw((*m).manager_ctx as *mut FakeBlock<DLManagedTensorVersioned>) };
    block.deletions.fetch_add(1, Ordering::SeqCst);
}

unsafe extern "C" fn delete_legacy(m: *mut DLManagedTensor) {
    // SAFETY: manager_ctx is the leaked block (see `legacy`).
    let block = unsafe { Box::from_raw((*m).manager_ctx as *mut FakeBlock<DLManagedTensor>) };
    block.deletions.fetch_add(1, Ordering::SeqCst);
}

fn tensor_of<M>(block: &mut FakeBlock<M>, f: &Fields) -> DLTensor {
    DLTensor {
        data: if f.null_data {
            std::ptr::null_mut()
        } else {
            block.data.as_mut_ptr() as *mut c_void
        },
        device: f.device,
        ndim: f.ndim,
        dtype: f.dtype,
        shape: if f.null_shape {
            std::ptr::null_mut()
        } else {
            block.shape.as_mut_ptr()
        },
        strides: block
            .strides
            .as_mut()
            .map_or(std::ptr::null_mut(), |s| s.as_mut_ptr()),
        byte_offset: f.byte_offset,
    }
}

/// The two managed-tensor structs, as far as the fake producer fills them.
pub trait Managed: Sized {
    /// A struct with this kind's deleter, an empty tensor and no context yet.
    fn new(f: &Fields, empty: DLTensor) -> Self;
    /// The tensor description and the context field.
    fn fields(&mut self) -> (&mut DLTensor, &mut *mut c_void);
}

impl Managed for DLManagedTensorVersioned {
    fn new(f: &Fields, dl_tensor: DLTensor) -> Self {
        DLManagedTensorVersioned {
            version: f.version,
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(delete_versioned),
            flags: f.flags,
            dl_tensor,
        }
    }

    fn fields(&mut self) -> (&mut DLTensor, &mut *mut c_void) {
        (&mut self.dl_tensor, &mut self.manager_ctx)
    }
}

impl Managed for DLManagedTensor {
    fn new(_: &Fields, dl_tensor: DLTensor) -> Self {
        DLManagedTensor {
            dl_tensor,
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(delete_legacy),
        }
    }

    fn fields(&mut self) -> (&mut DLTensor, &mut *mut c_void) {
        (&mut self.dl_tensor, &mut self.manager_ctx)
    }
}

/// A leaked managed tensor of kind `M` built from `f`, and the counter its deleter bumps.
fn leak<M: Managed>(f: &Fields) -> (*mut M, Arc<AtomicUsize>) {
    let deletions = Arc::new(AtomicUsize::new(0));
    let empty = DLTensor {
        data: std::ptr::null_mut(),
        device: f.device,
        ndim: 0,
        dtype: f.dtype,
        shape: std::ptr::null_mut(),
        strides: std::ptr::null_mut(),
        byte_offset: 0,
    };
    let mut block = Box::new(FakeBlock {
        managed: M::new(f, empty),
        shape: f.shape.clone(),
        strides: f.strides.clone(),
        data: (0..f.data_len).map(|i| i as u8).collect(),
        deletions: deletions.clone(),
    });
    let tensor = tensor_of(&mut block, f);
    *block.managed.fields().0 = tensor;
    let raw = Box::into_raw(block);
    // SAFETY: raw is a valid, leaked block; its deleter gets it back through manager_ctx.
    unsafe {
        *(*raw).managed.fields().1 = raw as *mut c_void;
        (&mut (*raw).managed as *mut M, deletions)
    }
}

/// A leaked versioned managed tensor and the counter its deleter bumps.
pub fn versioned(f: &Fields) -> (*mut DLManagedTensorVersioned, Arc<AtomicUsize>) {
    leak(f)
}

/// A leaked legacy managed tensor and the counter its deleter bumps.
pub fn legacy(f: &Fields) -> (*mut DLManagedTensor, Arc<AtomicUsize>) {
    leak(f)
}

/// Reads a counter.
pub fn count(c: &Arc<AtomicUsize>) -> usize {
    c.load(Ordering::SeqCst)
}

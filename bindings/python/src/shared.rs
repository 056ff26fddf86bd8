//! `dlbridge.empty_shared`, `dlbridge.to_shared`, `dlbridge.from_shared` and `dlbridge.shm_sweep`:
//! tensors in size-sealed shared-memory segments ([`dlbridge::shm`]), for runtimes that cannot
//! share a process.
//!
//! A segment is named by its handle, a plain string any process of the same user can be sent.
//! Each side holds the segment while it has a tensor over it; the kernel frees it with its last
//! holder, so nothing is ever left behind. `to_shared` keeps no reference: the process's keeper
//! holds the segment for the next opener, so the exporting process may exit before the consumer
//! opens the handle. A CUDA tensor travels the same way, in device memory another process maps.

use dlbridge::shm::{self, Access};
use dlbridge::TensorView;
use pyo3::prelude::*;
use pyo3::types::{PyString, PyTuple};

use crate::constructors::{dtype_argument, shape_argument};
use crate::consumer::{self, ImportRequest};
use crate::errors::{shm_open_error, to_py_err};
use crate::stream_order::{order_default_stream, wait_for_host_read};
use crate::tensor::{new_tensor, TensorData, TensorRef};

/// A new zero-filled, C-contiguous CPU tensor in a new shared-memory segment: returns
/// `(handle, tensor)`. The tensor holds this process's reference to the segment; send the handle
/// to another process, which maps the same memory with `from_shared(handle)`.
///
/// Raises TypeError / ValueError for a bad shape or dtype and MemoryError for a size the system
/// cannot back (as `empty` does), OSError if the segment cannot be created.
#[pyfunction]
#[pyo3(signature = (shape, dtype = None))]
pub(crate) fn empty_shared<'py>(
    shape: &Bound<'py, PyAny>,
    dtype: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyTuple>> {
    let py = shape.py();
    let dims = shape_argument(shape)?;
    let shared = shm::empty(&dims, dtype_argument(dtype)?).map_err(to_py_err)?;
    let handle = PyString::new(py, shared.handle());
    // The tensor keeps the mapping (and so this side's reference) alive; `shared` can go.
    let tensor = new_tensor(py, TensorData::Owned(Box::new(shared.to_tensor())))?;
    PyTuple::new(py, [handle.into_any(), tensor])
}

/// Imports `x` as `from_dlpack` does (any DLPack producer or a dlbridge.Tensor), copies it once,
/// in C order, into a new shared-memory segment and returns the handle. This process keeps no
/// reference: the segment passes to the next `from_shared(handle)`, so the caller may send the
/// handle and exit (a keeper process holds it for the consumer, for at most
/// DLBRIDGE_SHM_HANDOFF_SECONDS, default 600, if nobody opens it).
///
/// A CUDA tensor (torch, cupy, jax, ...) is copied once on its device, after its producer's
/// pending work, into device memory other processes can map (a dense layout keeps its strides);
/// the copy is finished when the handle is returned. The consumer maps that memory without a
/// copy and gets a CUDA tensor on the same device.
///
/// Raises what `from_dlpack` raises, BufferError for a tensor in other device memory, with a
/// packed sub-byte dtype, or a CUDA tensor with broadcast or negative strides, or for a failed
/// CUDA driver call, MemoryError for a size the system cannot back, OSError if the segment cannot
/// be created or no keeper process can hold it.
#[pyfunction]
pub(crate) fn to_shared<'py>(x: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyString>> {
    let py = x.py();
    let imported;
    let tensor = match TensorRef::cast(x.as_borrowed()) {
        Ok(tensor) => tensor,
        Err(_) => {
            let request = ImportRequest {
                device: None,
                copy: None,
            };
            imported = consumer::from_dlpack(py, x, request, true)?;
            TensorRef::cast(imported.as_borrowed())?
        }
    };
    if tensor.view().device().kind == dlbridge::DeviceType::Cuda {
        // The copy runs on the default stream: it waits for the producer's pending work.
        order_default_stream(tensor)?;
    } else {
        // Copying reads the memory on the host: managed memory first waits for the producer.
        wait_for_host_read(tensor)?;
    }
    // The copy (for CUDA, the allocation and the wait for the device) runs without the GIL: other
    // threads run meanwhile, and pending work that waits on a Python host callback can finish.
    let view = DetachedView(tensor.view());
    let shared = py
        .detach(move || shm::export(&view.into_inner()))
        .map_err(to_py_err)?;
    // Handing over waits for the keeper's answer: other threads run meanwhile.
    let handle = py.detach(|| shared.handoff()).map_err(to_py_err)?;
    Ok(PyString::new(py, &handle))
}

/// A tensor's view taken into a section that runs without the GIL.
struct DetachedView<'a>(TensorView<'a>);

// SAFETY: the view points at memory and dims that the tensor object it came from keeps alive;
// the caller holds that object for the whole section, and the section touches no Python object.
unsafe impl Send for DetachedView<'_> {}

impl<'a> DetachedView<'a> {
    /// The view, inside the section (a method, so that the closure takes the whole wrapper).
    fn into_inner(self) -> TensorView<'a> {
        self.0
    }
}

/// Maps the shared-memory segment named `handle` without copying. `writable=False` gives a
/// read-only tensor over copy-on-write pages (a consumer that writes anyway changes only its own
/// copy); `writable=True` gives a tensor whose writes are seen by every process that maps the
/// segment. The tensor holds this process's reference. A `to_shared` handle opens once.
///
/// A CUDA segment's tensor is on the same device (numbered as this process numbers it, found by
/// its UUID), over the same device memory; `writable=False` flags it read-only (the memory is
/// mapped writable all the same: a device write through a read-only mapping is a fatal fault).
/// Opening one loads the CUDA driver if the process has not.
///
/// Raises FileNotFoundError for a handle with no segment (never created, released by every side,
/// its holding process exited, or its hand-over already taken), ValueError for a malformed handle
/// or an invalid segment (naming what is wrong; also a CUDA segment whose device this process does
/// not see, or without a CUDA driver: the hand-over then stays for another consumer), OSError if
/// opening or mapping fails (at once, never waiting: a segment under another process's file lease
/// is refused), BufferError if a CUDA driver call fails.
#[pyfunction]
#[pyo3(signature = (handle, *, writable = false))]
pub(crate) fn from_shared<'py>(
    py: Python<'py>,
    handle: String,
    writable: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let access = if writable {
        Access::ReadWrite
    } else {
        Access::ReadOnly
    };
    // Opening makes system calls that may wait (briefly, on the keeper): other threads run
    // meanwhile.
    let tensor = py
        .detach(|| shm::open(&handle, access))
        .map_err(|e| shm_open_error(&handle, e))?;
    new_tensor(py, TensorData::Owned(Box::new(tensor)))
}

/// Removes the named segments that dlbridge versions before sealed segments left in /dev/shm and
/// that no live process holds; returns how many it removed. Current segments need no sweeping:
/// the kernel frees them with their last holder, even one killed with SIGKILL.
///
/// Raises OSError if /dev/shm cannot be read.
#[pyfunction]
pub(crate) fn shm_sweep() -> PyResult<usize> {
    shm::sweep().map_err(to_py_err)
}

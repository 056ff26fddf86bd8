//! Producer side: `Tensor.__dlpack__` with the array API's exact semantics, and the zero-copy
//! exports it and the exchange API hand out.

use std::ffi::c_void;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicPtr, Ordering};

use dlbridge::ffi::{DLManagedTensor, DLManagedTensorVersioned, DLPackVersion, DLTensor};
use dlbridge::{export, Device, Flags, Order, TensorView};
use pyo3::exceptions::PyMemoryError;
use pyo3::ffi;
use pyo3::prelude::*;

use crate::arguments::{copy_policy, given, int_pair, major_version};
use crate::c_entry::object_entry;
use crate::c_methods::{Arguments, KeywordCache, MethodDef, RecentCall};
use crate::capsule::{into_capsule, Export};
use crate::diagnostics::{CountedExport, Live};
use crate::errors::{buffer_error, to_py_err, type_error};
use crate::gil_anywhere::with_gil_anywhere;
use crate::stream_order::{
    ask_producer, consumer_stream, order_after_producer, orders_work, producer_stream,
    wait_for_host_read, ConsumerStream,
};
use crate::tensor::TensorRef;
use crate::tensor_api::device_pair;

/// The block behind a zero-copy ("lent") export: the managed struct first (so its address is
/// the block's) and an owned reference to the `dlbridge.Tensor`. The reference keeps the memory
/// alive, and with it the tensor's own shape and strides, which the export points into instead of
/// copying (the object is immutable and does not move).
#[repr(C)]
struct LentBlock<M> {
    managed: M,
    owner: *mut ffi::PyObject,
}

/// The `DLTensor` of a lent export. Flags are the tensor's minus IS_COPIED, which says how the
/// tensor was made; the export itself copies nothing.
#[inline(always)]
fn lent_tensor(v: &TensorView<'_>) -> (DLTensor, Flags) {
    let ndim = v.ndim();
    let dims = |d: &[i64]| {
        if ndim == 0 {
            ptr::null_mut()
        } else {
            d.as_ptr().cast_mut()
        }
    };
    let tensor = DLTensor {
        data: if v.shape().contains(&0) {
            ptr::null_mut()
        } else {
            v.data_ptr().cast()
        },
        device: v.device().to_raw(),
        ndim: ndim as i32,
        dtype: v.dtype().to_raw(),
        shape: dims(v.shape()),
        strides: dims(v.strides()),
        byte_offset: 0,
    };
    (tensor, v.flags() - Flags::IS_COPIED)
}

/// Size of every lent block, versioned or legacy, so that a freed block can serve either.
const BLOCK_SIZE: usize = {
    let versioned = std::mem::size_of::<LentBlock<DLManagedTensorVersioned>>();
    let legacy = std::mem::size_of::<LentBlock<DLManagedTensor>>();
    if versioned > legacy {
        versioned
    } else {
        legacy
    }
};

/// The block of the last export deleted, kept for the next one: exports are mostly made and
/// deleted one at a time (`np.from_dlpack(t)`), and a block reused skips Python's allocator both
/// ways. Only touched with the GIL held, which orders every access (the atomic is for `static`).
static SPARE_BLOCK: AtomicPtr<c_void> = AtomicPtr::new(ptr::null_mut());

/// Places a lent export's block (the spare one, else a new one in Python's allocator, which is
/// fast for small blocks; given back by the deleter under the GIL) together with a new reference
/// to `obj`.
#[inline(always)]
fn lend<M>(tensor: TensorRef<'_, '_>, managed: M) -> PyResult<NonNull<M>> {
    const { assert!(std::mem::size_of::<LentBlock<M>>() <= BLOCK_SIZE) };
    // Plain loads and stores (no `swap`, a locked instruction): the GIL orders every access.
    let spare = SPARE_BLOCK.load(Ordering::Relaxed);
    let block = if spare.is_null() {
        // SAFETY: the GIL is held (a bound object is at hand); the block is initialised below.
        unsafe { ffi::PyMem_Malloc(BLOCK_SIZE) }
    } else {
        SPARE_BLOCK.store(ptr::null_mut(), Ordering::Relaxed);
        spare
    };
    let Some(block) = NonNull::new(block.cast::<LentBlock<M>>()) else {
        return Err(PyMemoryError::new_err(format!(
            "cannot allocate {BLOCK_SIZE} bytes"
        )));
    };
    // SAFETY: an unused block of BLOCK_SIZE bytes; PyMem_Malloc aligns to 16 bytes.
    unsafe {
        block.as_ptr().write(LentBlock {
            managed,
            owner: tensor.object().to_owned().into_ptr(),
        })
    };
    Live::Lent.born(tensor.object().py());
    // `managed` is the first field of the repr(C) block, so the pointers coincide.
    Ok(block.cast())
}

/// Releases a lent block: drops the reference and keeps the block as the spare one (freeing the
/// spare it replaces), with the GIL held whatever thread the consumer's deleter runs on (see
/// [`with_gil_anywhere`]; both leak at shutdown).
///
/// # Safety
/// `block` was made by [`lend`] with the same `M` and is released once.
unsafe fn release_lent<M>(block: *mut LentBlock<M>) {
    with_gil_anywhere(|| {
        // SAFETY: per the contract; the GIL is held, as PyMem_Free and Py_DecRef need. The block
        // holds nothing else to drop (a managed struct of plain data).
        unsafe {
            ffi::Py_DecRef((*block).owner);
            let replaced = SPARE_BLOCK.load(Ordering::Relaxed);
            SPARE_BLOCK.store(block.cast(), Ordering::Relaxed);
            if !replaced.is_null() {
                ffi::PyMem_Free(replaced);
            }
        }
        // SAFETY: the GIL is held here (`with_gil_anywhere` runs this only then).
        Live::Lent.died(unsafe { Python::assume_attached() });
    });
}

/// A zero-copy versioned (1.3) export of a tensor object (`view` is its view).
#[inline]
pub(crate) fn lend_versioned(
    tensor: TensorRef<'_, '_>,
    view: &TensorView<'_>,
) -> PyResult<NonNull<DLManagedTensorVersioned>> {
    let (dl_tensor, flags) = lent_tensor(view);
    lend(
        tensor,
        DLManagedTensorVersioned {
            version: DLPackVersion::CURRENT,
            manager_ctx: ptr::null_mut(),
            deleter: Some(delete_lent_versioned),
            flags: flags.bits(),
            dl_tensor,
        },
    )
}

/// A zero-copy legacy export of a tensor object; read-only tensors are refused (the legacy struct
/// cannot say "read-only"); `view` is its view.
fn lend_legacy(
    tensor: TensorRef<'_, '_>,
    view: &TensorView<'_>,
) -> PyResult<NonNull<DLManagedTensor>> {
    let (dl_tensor, flags) = lent_tensor(view);
    if flags.contains(Flags::READ_ONLY) {
        return Err(buffer_error(
            "a read-only tensor cannot be exported as a legacy (unversioned) DLPack capsule, \
             which has no read-only flag; pass max_version=(1, 0) or newer",
        ));
    }
    lend(
        tensor,
        DLManagedTensor {
            dl_tensor,
            manager_ctx: ptr::null_mut(),
            deleter: Some(delete_lent_legacy),
        },
    )
}

/// Deleter of lent versioned exports.
unsafe extern "C" fn delete_lent_versioned(managed: *mut DLManagedTensorVersioned) {
    if !managed.is_null() {
        // SAFETY: the block made by `lend_versioned` (managed is its first field), deleted once.
        unsafe { release_lent(managed.cast::<LentBlock<DLManagedTensorVersioned>>()) };
    }
}

/// Deleter of lent legacy exports.
unsafe extern "C" fn delete_lent_legacy(managed: *mut DLManagedTensor) {
    if !managed.is_null() {
        // SAFETY: the block made by `lend_legacy` (managed is its first field), deleted once.
        unsafe { release_lent(managed.cast::<LentBlock<DLManagedTensor>>()) };
    }
}

/// What a `__dlpack__` call asks for besides its stream, decoded from its arguments alone (so
/// that it can be remembered for the next call with the same arguments, see [`RecentCall`]).
#[derive(Clone, Copy)]
struct ExportOptions {
    versioned: bool,
    copy: Option<bool>,
    dl_device: Option<(i64, i64)>,
}

/// Decodes `max_version`, `copy` and `dl_device` (type errors only; the device is checked
/// against the tensor's by [`check_device`]).
fn export_options(
    max_version: Option<Borrowed<'_, '_, PyAny>>,
    dl_device: Option<Borrowed<'_, '_, PyAny>>,
    copy: Option<Borrowed<'_, '_, PyAny>>,
) -> PyResult<ExportOptions> {
    let versioned = match given(max_version) {
        None => false,
        Some(v) => major_version(v)? >= 1,
    };
    let copy = copy_policy(copy)?;
    let dl_device = given(dl_device)
        .map(|requested| int_pair("dl_device", requested))
        .transpose()?;
    Ok(ExportOptions {
        versioned,
        copy,
        dl_device,
    })
}

/// Refuses a `dl_device` other than the tensor's `device`.
#[inline]
fn check_device(device: Device, dl_device: Option<(i64, i64)>) -> PyResult<()> {
    let Some((kind, id)) = dl_device else {
        return Ok(());
    };
    let ours = device_pair(device);
    if (kind, id) != (i64::from(ours.0), i64::from(ours.1)) {
        return Err(buffer_error(format!(
            "cannot export to device ({kind}, {id}): the tensor is on {device} {ours:?} and \
             dlbridge does not move data between devices"
        )));
    }
    Ok(())
}

/// `Tensor.__dlpack__`: exports the tensor as a DLPack capsule.
///
/// - `max_version` None (or major 0): a legacy `"dltensor"` capsule, refused with BufferError for
///   read-only tensors (the legacy struct cannot say "read-only"); major >= 1: a versioned 1.3
///   `"dltensor_versioned"` capsule carrying READ_ONLY / IS_COPIED.
/// - `copy=True` always copies (C order) and sets IS_COPIED; False and None never copy.
/// - `dl_device` other than the tensor's is a BufferError; `stream` must be None on the CPU.
/// - On a device, `stream` is ordered after the producer's pending work first (see
///   [`crate::stream_order`]).
fn dlpack<'py>(
    py: Python<'py>,
    tensor: TensorRef<'_, 'py>,
    view: &TensorView<'_>,
    options: ExportOptions,
    stream: &ConsumerStream<'_, 'py>,
) -> PyResult<Bound<'py, PyAny>> {
    if options.copy == Some(true) && !view.device().kind.is_host_accessible() {
        // The producer copies, ordered on the consumer's stream by the same call.
        return copy_by_producer(py, tensor, view, options, stream);
    }
    // Host memory has no streams, so no pending work to order after.
    if orders_work(view.device()) {
        order_after_producer(tensor, stream)?;
    }
    let export = if options.copy == Some(true) {
        // The copy reads the memory on the host now, whatever stream the consumer passed.
        wait_for_host_read(tensor)?;
        let copied = view.to_contiguous(Order::C).map_err(to_py_err)?;
        let copied = CountedExport::new(copied);
        if options.versioned {
            Export::Versioned(export::to_versioned(copied, Flags::empty()))
        } else {
            Export::Legacy(export::to_legacy(copied, false).map_err(to_py_err)?)
        }
    } else if options.versioned {
        Export::Versioned(lend_versioned(tensor, view)?)
    } else {
        Export::Legacy(lend_legacy(tensor, view)?)
    };
    into_capsule(py, export)
}

/// `copy=True` of memory the host cannot read: dlbridge copies host memory only, so the copy is
/// the producer's, asked of the object the tensor keeps (`__dlpack__(stream=S, max_version=...,
/// copy=True)`, on the consumer's stream) and handed over as it comes. A producer that shares its
/// memory when asked for a copy, or no producer to ask, is a BufferError.
fn copy_by_producer<'py>(
    py: Python<'py>,
    tensor: TensorRef<'_, 'py>,
    view: &TensorView<'_>,
    options: ExportOptions,
    stream: &ConsumerStream<'_, 'py>,
) -> PyResult<Bound<'py, PyAny>> {
    let device = view.device();
    let Some(producer) = tensor.producer() else {
        return Err(buffer_error(format!(
            "cannot copy a tensor on {device}: dlbridge copies host memory only, and this \
             tensor has no producer to ask for a copy"
        )));
    };
    let stream = producer_stream(py, device, stream);
    let capsule = ask_producer(&producer, &stream, options.versioned, true)?;
    match capsule_data(&capsule) {
        Some((data, copied)) if data != view.data_ptr() || copied => Ok(capsule),
        Some(_) => Err(buffer_error(format!(
            "cannot copy a tensor on {device}: dlbridge copies host memory only, and its \
             producer ({}) shared its memory when asked for a copy",
            producer.get_type().name()?
        ))),
        None => Err(type_error(format!(
            "{}.__dlpack__(copy=True) returned {}, not a DLPack capsule",
            producer.get_type().name()?,
            capsule.get_type().name()?
        ))),
    }
}

/// The data address of the tensor in an unconsumed DLPack capsule, and whether it is flagged
/// IS_COPIED (never, for a legacy capsule); `None` for anything else. The capsule is not touched.
fn capsule_data(capsule: &Bound<'_, PyAny>) -> Option<(*mut u8, bool)> {
    let ptr = capsule.as_ptr();
    // SAFETY: name checks on a live object; a capsule of either name holds the struct its name
    // promises (the protocol's contract), read here without taking ownership.
    unsafe {
        if ffi::PyCapsule_IsValid(ptr, c"dltensor_versioned".as_ptr()) == 1 {
            let managed = ffi::PyCapsule_GetPointer(ptr, c"dltensor_versioned".as_ptr())
                .cast::<DLManagedTensorVersioned>();
            let copied = (*managed).flags & Flags::IS_COPIED.bits() != 0;
            Some(((*managed).dl_tensor.data.cast(), copied))
        } else if ffi::PyCapsule_IsValid(ptr, c"dltensor".as_ptr()) == 1 {
            let managed =
                ffi::PyCapsule_GetPointer(ptr, c"dltensor".as_ptr()).cast::<DLManagedTensor>();
            Some(((*managed).dl_tensor.data.cast(), false))
        } else {
            None
        }
    }
}

/// The `__dlpack__` method definition (part of the Tensor type's method table).
pub(crate) const DLPACK_METHOD: MethodDef = MethodDef::fastcall(
    c"__dlpack__",
    dlpack_entry,
    c"__dlpack__($self, /, *, stream=None, max_version=None, dl_device=None, copy=None)\n--\n\n\
Export the tensor as a DLPack capsule (array API standard semantics).\n\n\
max_version=None gives a legacy 'dltensor' capsule (refused for read-only tensors);\n\
a major version >= 1 gives a DLPack 1.3 'dltensor_versioned' capsule.\n\
copy=True always copies (and flags the copy); False and None never copy.\n\
dl_device must be the tensor's device; stream must be None for CPU tensors.\n\
On a device, stream (array API values: None, -1, 1, 2 or a stream handle on CUDA) is\n\
ordered after the producer's pending work before the capsule is made.",
);

/// Keyword-name tuples seen by `Tensor.__dlpack__`.
static DLPACK_KEYWORDS: KeywordCache = KeywordCache::new();

/// The last `Tensor.__dlpack__` call whose arguments were constants and whose stream was None or
/// absent, with its options: a consumer passes the same objects on every call.
static RECENT_DLPACK_CALL: RecentCall<ExportOptions> = RecentCall::new();

/// C entry point of `Tensor.__dlpack__`.
unsafe extern "C" fn dlpack_entry(
    slf: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
    kwnames: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    // SAFETY: CPython calls methods with the GIL held and the fastcall argument layout.
    unsafe {
        object_entry(|py| {
            if let Some(options) = RECENT_DLPACK_CALL.find(py, args, nargs, kwnames) {
                let tensor = TensorRef::cast(Borrowed::from_ptr(py, slf))?;
                let view = tensor.view();
                check_device(view.device(), options.dl_device)?;
                return dlpack(py, tensor, &view, options, &ConsumerStream::Default);
            }
            let args = Arguments::new(py, args, nargs, kwnames);
            args.positional::<0>("__dlpack__")?;
            let i = dlbridge_pyo3::interned::get(py);
            let [stream, max_version, dl_device, copy] = args.keywords(
                "__dlpack__",
                [
                    (&i.stream, c"stream"),
                    (&i.max_version, c"max_version"),
                    (&i.dl_device, c"dl_device"),
                    (&i.copy, c"copy"),
                ],
                &DLPACK_KEYWORDS,
            )?;
            let tensor = TensorRef::cast(Borrowed::from_ptr(py, slf))?;
            let view = tensor.view();
            let options = export_options(max_version, dl_device, copy)?;
            check_device(view.device(), options.dl_device)?;
            let stream = consumer_stream(view.device(), stream)?;
            if matches!(stream, ConsumerStream::Default) && args.constant_values() {
                RECENT_DLPACK_CALL.record(&args, options);
            }
            dlpack(py, tensor, &view, options, &stream)
        })
    }
}

//! Status codes, this layer's one error type, the thread-local last-error message, and the
//! boundary that turns every result (and every panic) into a status code.

use std::cell::RefCell;
use std::ffi::{c_char, c_int, CString};
use std::fmt;
use std::panic::{self, AssertUnwindSafe};

/// Status code returned (as `int`) by every fallible `dlb_` function.
///
/// 0 is success; every other value names one error category. Codes 10 and up mirror the
/// categories of the dlbridge core one to one; new categories get new numbers, existing numbers
/// never change. The message of the last failure on the calling thread is `dlb_last_error()`.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum dlb_status {
    /// Success.
    DLB_OK = 0,
    /// A pointer argument that must not be NULL was NULL (the message names the argument).
    DLB_ERR_NULL_ARGUMENT = 1,
    /// A bug: the library panicked; the message has the panic's text.
    DLB_ERR_PANIC = 2,
    /// A core error this build does not classify (a newer core); the message says what it is.
    DLB_ERR_OTHER = 3,
    /// A NULL managed-tensor pointer was handed to an import.
    DLB_ERR_NULL_TENSOR = 10,
    /// The producer speaks a DLPack major version other than 1.
    DLB_ERR_UNSUPPORTED_VERSION = 11,
    /// ndim is negative or above 1024.
    DLB_ERR_NDIM_OUT_OF_RANGE = 12,
    /// The shape pointer is NULL although ndim > 0.
    DLB_ERR_NULL_SHAPE = 13,
    /// A dimension is negative.
    DLB_ERR_NEGATIVE_DIM = 14,
    /// The element count or byte size overflows.
    DLB_ERR_SHAPE_OVERFLOW = 15,
    /// The data pointer is NULL although the tensor has elements.
    DLB_ERR_NULL_DATA = 16,
    /// The data type code is not one DLPack 1.3 defines.
    DLB_ERR_UNKNOWN_DTYPE_CODE = 17,
    /// The bit width is not valid for the data type code.
    DLB_ERR_INVALID_DTYPE_BITS = 18,
    /// The lane count is not supported for the data type.
    DLB_ERR_UNSUPPORTED_LANES = 19,
    /// The device type is not one DLPack 1.3 defines.
    DLB_ERR_UNKNOWN_DEVICE = 20,
    /// The strides (with the byte offset) reach outside the address space.
    DLB_ERR_STRIDE_OVERFLOW = 21,
    /// The layout cannot be handled (e.g. strided packed sub-byte data, arange of a bool).
    DLB_ERR_UNSUPPORTED_LAYOUT = 22,
    /// Shape and strides have different lengths.
    DLB_ERR_STRIDES_MISMATCH = 23,
    /// A buffer is too small: tensor memory for its layout, or a caller's name or dims buffer.
    DLB_ERR_BUFFER_TOO_SMALL = 24,
    /// The element type differs from the one asked for.
    DLB_ERR_DTYPE_MISMATCH = 25,
    /// The operation needs host-accessible memory (e.g. a copy of a CUDA tensor).
    DLB_ERR_NOT_ON_CPU = 26,
    /// The tensor is read-only and the operation would hand out writable memory.
    DLB_ERR_READ_ONLY = 27,
    /// A name (dtype, order) could not be parsed.
    DLB_ERR_UNKNOWN_NAME = 28,
    /// Memory allocation failed.
    DLB_ERR_ALLOCATION_FAILED = 29,
    /// A shared-memory system call failed (the message has the operating system's reason).
    DLB_ERR_SHM_IO = 30,
    /// The shared-memory segment does not exist (released by every side, or never created).
    DLB_ERR_SHM_NOT_FOUND = 31,
    /// The shared-memory segment is not a valid dlbridge segment (bad header, truncated).
    DLB_ERR_SHM_INVALID = 32,
    /// A bool element holds a byte other than 0 or 1 (the message names its index and byte).
    DLB_ERR_INVALID_BOOL = 33,
    /// Stream order was asked for a tensor on a device without CUDA streams.
    DLB_ERR_STREAMS_UNSUPPORTED = 34,
    /// A CUDA tensor needs the CUDA driver, and this process has not loaded it.
    DLB_ERR_CUDA_DRIVER_NOT_LOADED = 35,
    /// A CUDA driver call failed (the message names the call and the driver's error).
    DLB_ERR_CUDA_DRIVER = 36,
}

/// Everything that can fail in the C layer: a core error, or a fault of the C call itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CapiError {
    /// The core refused the request; its message names the offending value.
    Core(dlbridge::Error),
    /// A required pointer argument (named) was NULL.
    NullArgument(&'static str),
    /// A caller's buffer of `len` bytes cannot hold `name` and its terminating NUL.
    NameBufferTooSmall {
        /// The text that did not fit.
        name: String,
        /// The caller's buffer size in bytes.
        len: usize,
    },
    /// A caller's buffer of `cap` entries cannot hold a tensor's `needed` dimensions.
    DimsBufferTooSmall {
        /// What was asked for: "shape" or "strides".
        what: &'static str,
        /// The tensor's number of dimensions.
        needed: usize,
        /// The caller's buffer size in entries.
        cap: usize,
    },
    /// The library panicked; the panic's message.
    Panic(String),
}

impl CapiError {
    /// The status code of this error's category.
    pub(crate) fn status(&self) -> dlb_status {
        use dlb_status::*;
        use dlbridge::Error as E;
        match self {
            CapiError::NullArgument(_) => DLB_ERR_NULL_ARGUMENT,
            CapiError::NameBufferTooSmall { .. } | CapiError::DimsBufferTooSmall { .. } => {
                DLB_ERR_BUFFER_TOO_SMALL
            }
            CapiError::Panic(_) => DLB_ERR_PANIC,
            CapiError::Core(e) => match e {
                E::NullTensor => DLB_ERR_NULL_TENSOR,
                E::UnsupportedVersion(_) => DLB_ERR_UNSUPPORTED_VERSION,
                E::NdimOutOfRange(_) => DLB_ERR_NDIM_OUT_OF_RANGE,
                E::NullShape(_) => DLB_ERR_NULL_SHAPE,
                E::NegativeDim { .. } => DLB_ERR_NEGATIVE_DIM,
                E::ShapeOverflow { .. } => DLB_ERR_SHAPE_OVERFLOW,
                E::NullData { .. } => DLB_ERR_NULL_DATA,
                E::UnknownDtypeCode(_) => DLB_ERR_UNKNOWN_DTYPE_CODE,
                E::InvalidDtypeBits { .. } => DLB_ERR_INVALID_DTYPE_BITS,
                E::UnsupportedLanes { .. } => DLB_ERR_UNSUPPORTED_LANES,
                E::UnknownDevice(_) => DLB_ERR_UNKNOWN_DEVICE,
                E::StrideOverflow { .. } => DLB_ERR_STRIDE_OVERFLOW,
                E::UnsupportedLayout(_) => DLB_ERR_UNSUPPORTED_LAYOUT,
                E::StridesMismatch { .. } => DLB_ERR_STRIDES_MISMATCH,
                E::BufferTooSmall { .. } => DLB_ERR_BUFFER_TOO_SMALL,
                E::DtypeMismatch { .. } => DLB_ERR_DTYPE_MISMATCH,
                E::NotOnCpu(_) => DLB_ERR_NOT_ON_CPU,
                E::ReadOnly => DLB_ERR_READ_ONLY,
                E::UnknownName { .. } => DLB_ERR_UNKNOWN_NAME,
                E::AllocationFailed(_) => DLB_ERR_ALLOCATION_FAILED,
                E::ShmIo { .. } => DLB_ERR_SHM_IO,
                E::ShmNotFound(_) => DLB_ERR_SHM_NOT_FOUND,
                E::ShmInvalid { .. } => DLB_ERR_SHM_INVALID,
                E::InvalidBool { .. } => DLB_ERR_INVALID_BOOL,
                E::StreamsUnsupported(_) => DLB_ERR_STREAMS_UNSUPPORTED,
                E::CudaDriverNotLoaded => DLB_ERR_CUDA_DRIVER_NOT_LOADED,
                E::CudaDriver { .. } => DLB_ERR_CUDA_DRIVER,
                _ => DLB_ERR_OTHER,
            },
        }
    }
}

impl fmt::Display for CapiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CapiError::Core(e) => e.fmt(f),
            CapiError::NullArgument(name) => write!(f, "argument `{name}` is NULL"),
            CapiError::NameBufferTooSmall { name, len } => write!(
                f,
                "buffer of {len} bytes is too small for {name:?} ({} bytes with the terminating NUL)",
                name.len() + 1
            ),
            CapiError::DimsBufferTooSmall { what, needed, cap } => write!(
                f,
                "buffer of {cap} entries is too small for the {what} of {} {needed}-dimensional \
                 tensor",
                dlbridge::indefinite_article(&needed.to_string())
            ),
            CapiError::Panic(message) => write!(f, "dlbridge panicked: {message}"),
        }
    }
}

impl From<dlbridge::Error> for CapiError {
    fn from(e: dlbridge::Error) -> Self {
        CapiError::Core(e)
    }
}

thread_local! {
    /// The message of the last failure on this thread, as handed out by `dlb_last_error`.
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// Stores `error`'s message as this thread's last error (interior NULs become U+FFFD).
fn set_last_error(error: &CapiError) {
    let message = error.to_string().replace('\0', "\u{FFFD}");
    let message = CString::new(message).unwrap_or_default();
    // During thread teardown the slot may be gone; the status code still reports the failure.
    let _ = LAST_ERROR.try_with(|slot| *slot.borrow_mut() = message);
}

/// Runs the body of an exported function: `Ok` becomes `DLB_OK`, an error its status code (and
/// this thread's last-error message), a panic `DLB_ERR_PANIC`. Nothing unwinds past this point.
pub(crate) fn boundary(body: impl FnOnce() -> Result<(), CapiError>) -> c_int {
    // Unwind safety: after a panic nothing the body touched is used again by this call, and
    // the body's borrowed state (handles) is only read, never left half-modified.
    let result = panic::catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|payload| {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "non-string panic payload".to_owned());
        Err(CapiError::Panic(message))
    });
    match result {
        Ok(()) => dlb_status::DLB_OK as c_int,
        Err(error) => {
            set_last_error(&error);
            error.status() as c_int
        }
    }
}

/// The message of the last failed `dlb_` call on the calling thread.
///
/// Never NULL: "" until the first failure. Successful calls leave it unchanged. The text names
/// the offending value (e.g. "dimension 1 has negative size -3"). The pointer stays valid until
/// the next failing `dlb_` call on the same thread; copy the text to keep it longer.
#[no_mangle]
pub extern "C" fn dlb_last_error() -> *const c_char {
    LAST_ERROR
        .try_with(|slot| slot.borrow().as_ptr())
        .unwrap_or(c"".as_ptr())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    fn last_error() -> String {
        // SAFETY: dlb_last_error never returns NULL and the text is NUL-terminated.
        unsafe { CStr::from_ptr(dlb_last_error()) }
            .to_string_lossy()
            .into_owned()
    }

    #[test]
    fn each_core_error_category_has_its_own_status() {
        use dlbridge::Error as E;
        let errors = [
            E::NullTensor,
            E::UnsupportedVersion(dlbridge::ffi::DLPackVersion { major: 2, minor: 0 }),
            E::NdimOutOfRange(-1),
            E::NullShape(2),
            E::NegativeDim { axis: 0, size: -1 },
            E::ShapeOverflow { shape: vec![] },
            E::NullData { size: 1 },
            E::UnknownDtypeCode(99),
            E::InvalidDtypeBits {
                code: 2,
                kind: "float",
                bits: 7,
            },
            E::UnsupportedLanes {
                kind: "bool",
                lanes: 2,
            },
            E::UnknownDevice(99),
            E::StrideOverflow {
                shape: vec![],
                strides: vec![],
                byte_offset: 0,
            },
            E::UnsupportedLayout(String::new()),
            E::StridesMismatch {
                shape: vec![],
                strides: vec![],
            },
            E::BufferTooSmall {
                len: 0,
                shape: vec![],
                strides: vec![],
                start: 0,
                end: 0,
            },
            E::DtypeMismatch {
                expected: String::new(),
                actual: String::new(),
            },
            E::NotOnCpu(String::new()),
            E::ReadOnly,
            E::UnknownName {
                what: "dtype",
                name: String::new(),
            },
            E::AllocationFailed(1),
            E::ShmIo {
                op: "open",
                name: String::new(),
                reason: String::new(),
            },
            E::ShmNotFound(String::new()),
            E::ShmInvalid {
                name: String::new(),
                reason: String::new(),
            },
            E::StreamsUnsupported(String::new()),
            E::CudaDriverNotLoaded,
            E::CudaDriver {
                call: "cuEventRecord",
                code: 400,
                name: String::new(),
            },
        ];
        let mut codes: Vec<i32> = errors
            .into_iter()
            .map(|e| CapiError::Core(e).status() as i32)
            .collect();
        assert!(codes.iter().all(|&c| c >= 10), "{codes:?}");
        let n = codes.len();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), n, "two categories share a code");
    }

    #[test]
    fn failures_set_the_thread_local_message_and_successes_keep_it() {
        let status = boundary(|| Err(CapiError::NullArgument("out")));
        assert_eq!(status, dlb_status::DLB_ERR_NULL_ARGUMENT as c_int);
        assert_eq!(last_error(), "argument `out` is NULL");
        assert_eq!(boundary(|| Ok(())), 0);
        assert_eq!(last_error(), "argument `out` is NULL");
        let other_thread = std::thread::spawn(last_error).join().unwrap();
        assert_eq!(other_thread, "");
    }

    #[test]
    fn a_panic_becomes_a_status_instead_of_unwinding() {
        let status = boundary(|| panic!("kernel bug {}", 42));
        assert_eq!(status, dlb_status::DLB_ERR_PANIC as c_int);
        assert_eq!(last_error(), "dlbridge panicked: kernel bug 42");
    }

    #[test]
    fn core_messages_pass_through_unchanged() {
        let status = boundary(|| Err(dlbridge::Error::NegativeDim { axis: 1, size: -3 }.into()));
        assert_eq!(status, dlb_status::DLB_ERR_NEGATIVE_DIM as c_int);
        assert_eq!(last_error(), "dimension 1 has negative size -3");
    }
}

//! The core's one error type.

use crate::ffi::DLPackVersion;

/// Everything that can go wrong in the core: invalid foreign tensors, invalid requests.
///
/// Every variant names the offending value so that frontends can surface it unchanged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A NULL managed-tensor pointer was handed to an import.
    #[error("null managed tensor pointer")]
    NullTensor,
    /// The producer speaks a DLPack major version this crate cannot read.
    #[error("unsupported DLPack version {}.{} (this build reads major version 1)", .0.major, .0.minor)]
    UnsupportedVersion(DLPackVersion),
    /// `ndim` is negative or above [`crate::MAX_NDIM`].
    #[error("ndim {0} is out of range 0..={max}", max = crate::MAX_NDIM)]
    NdimOutOfRange(i64),
    /// `shape` is NULL although `ndim > 0`.
    #[error("shape pointer is null with ndim {0}")]
    NullShape(i32),
    /// A dimension is negative.
    #[error("dimension {axis} has negative size {size}")]
    NegativeDim {
        /// Axis index.
        axis: usize,
        /// The offending size.
        size: i64,
    },
    /// The number of elements or the byte size does not fit in 64 bits.
    #[error("shape {shape:?} overflows the element count or byte size")]
    ShapeOverflow {
        /// The offending shape.
        shape: Vec<i64>,
    },
    /// `data` is NULL although the tensor has elements.
    #[error("data pointer is null for a tensor of {size} elements")]
    NullData {
        /// Element count.
        size: i64,
    },
    /// The data type code is not one DLPack 1.3 defines.
    #[error("unknown DLPack data type code {0}")]
    UnknownDtypeCode(u8),
    /// The bit width is not valid for the data type code.
    #[error("{bits} bits is not a valid width for data type code {code} ({kind})")]
    InvalidDtypeBits {
        /// Type code.
        code: u8,
        /// Human name of the code.
        kind: &'static str,
        /// The offending width.
        bits: u8,
    },
    /// Vector lanes are not supported for this data type (or lanes is 0).
    #[error("{lanes} lanes is not supported for data type {kind}")]
    UnsupportedLanes {
        /// Human name of the type code.
        kind: &'static str,
        /// The offending lane count.
        lanes: u16,
    },
    /// The device type code is not one DLPack 1.3 defines.
    #[error("unknown DLPack device type {0}")]
    UnknownDevice(i32),
    /// The strides (with the byte offset) reach outside the addressable range.
    #[error("strides {strides:?} with shape {shape:?} and byte_offset {byte_offset} overflow the address space")]
    StrideOverflow {
        /// Shape.
        shape: Vec<i64>,
        /// Offending strides (elements).
        strides: Vec<i64>,
        /// Byte offset.
        byte_offset: u64,
    },
    /// The layout cannot be expressed or handled (e.g. strided packed sub-byte data).
    #[error("unsupported layout: {0}")]
    UnsupportedLayout(String),
    /// Shape and strides have different lengths.
    #[error("strides {strides:?} do not match shape {shape:?}")]
    StridesMismatch {
        /// Shape.
        shape: Vec<i64>,
        /// Strides.
        strides: Vec<i64>,
    },
    /// A buffer is too small for the requested shape and strides.
    #[error("buffer of {len} bytes is too small: shape {shape:?} with strides {strides:?} needs bytes {start}..{end}")]
    BufferTooSmall {
        /// Buffer size in bytes.
        len: usize,
        /// Shape.
        shape: Vec<i64>,
        /// Strides (elements).
        strides: Vec<i64>,
        /// First byte touched (may be negative for a bad layout).
        start: i64,
        /// One past the last byte touched.
        end: i64,
    },
    /// The element type requested by the caller differs from the tensor's.
    #[error("data type mismatch: tensor holds {actual}, caller asked for {expected}")]
    DtypeMismatch {
        /// What the caller asked for.
        expected: String,
        /// What the tensor holds.
        actual: String,
    },
    /// The operation needs host-accessible memory.
    #[error("tensor is on device {0}; this operation needs CPU memory")]
    NotOnCpu(String),
    /// The tensor is read-only and the operation would hand out writable memory.
    #[error("tensor is read-only")]
    ReadOnly,
    /// A `bool` element holds a byte other than 0 or 1, so it cannot be read as a Rust `bool`.
    #[error("bool element at index {index:?} holds byte {byte:#04x}; only 0 and 1 are booleans")]
    InvalidBool {
        /// The element's index, one entry per dimension.
        index: Vec<usize>,
        /// The byte found there.
        byte: u8,
    },
    /// A name (dtype, device, order) could not be parsed.
    #[error("unknown {what} name {name:?}")]
    UnknownName {
        /// What kind of name ("dtype", "device", "order").
        what: &'static str,
        /// The offending text.
        name: String,
    },
    /// A shared-memory system call failed.
    #[error("shared memory: {op} of segment {name:?} failed: {reason}")]
    ShmIo {
        /// The failing operation ("open", "map", "resize", …).
        op: &'static str,
        /// Segment handle.
        name: String,
        /// The operating system's message.
        reason: String,
    },
    /// A shared-memory segment does not exist (never created, released by all sides, or the
    /// process holding it exited).
    #[error(
        "shared memory segment {0:?} does not exist (released, its holding process exited, or never created)"
    )]
    ShmNotFound(String),
    /// A shared-memory segment's header or size is not what dlbridge writes.
    #[error("shared memory segment {name:?} is invalid: {reason}")]
    ShmInvalid {
        /// Segment handle.
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// Stream order was asked for a tensor on a device without CUDA streams.
    #[error("tensor is on device {0}; stream order is supported for CUDA devices (cuda, cuda_host, cuda_managed) only")]
    StreamsUnsupported(String),
    /// A CUDA tensor needs the CUDA driver, and this process has not loaded it (so it holds no
    /// CUDA memory of its own making).
    #[error("this process has not loaded the CUDA driver (libcuda.so.1)")]
    CudaDriverNotLoaded,
    /// A CUDA driver call failed.
    #[error("CUDA driver call {call} failed with {name} ({code})")]
    CudaDriver {
        /// The driver function.
        call: &'static str,
        /// Its `CUresult`.
        code: i32,
        /// The driver's name for the code.
        name: String,
    },
    /// Allocation of the requested size failed.
    #[error("cannot allocate {0} bytes")]
    AllocationFailed(usize),
}

/// `Result` with the core's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

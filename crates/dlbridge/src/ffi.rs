//! `#[repr(C)]` mirror of `dlpack.h` version 1.3.
//!
//! Names follow the C header so that code can be read side by side with the specification.
//! C enums are represented as plain integers (`DLDeviceType` is `i32`, data type codes are `u8`):
//! a foreign producer may send any value, and an out-of-range value in a Rust `enum` would be
//! undefined behaviour. The safe types in [`crate::Device`] and [`crate::DataType`] are built from
//! these raw values through validation.
//!
//! The sizes and field offsets of every struct here are checked against an official `dlpack.h`
//! by the `abi_layout` integration test.
#![allow(non_camel_case_types, non_upper_case_globals, non_snake_case)]

use std::ffi::{c_char, c_int, c_void};

/// Major DLPack version implemented by this crate.
pub const DLPACK_MAJOR_VERSION: u32 = 1;
/// Minor DLPack version implemented by this crate.
pub const DLPACK_MINOR_VERSION: u32 = 3;

/// `DLPackVersion`: the ABI version of a managed tensor or exchange API table.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DLPackVersion {
    /// Major version: a change means ABI breakage.
    pub major: u32,
    /// Minor version: backwards-compatible additions.
    pub minor: u32,
}

impl DLPackVersion {
    /// The version this crate implements (1.3).
    pub const CURRENT: DLPackVersion = DLPackVersion {
        major: DLPACK_MAJOR_VERSION,
        minor: DLPACK_MINOR_VERSION,
    };
}

/// `DLDeviceType` (a C enum, `int32_t`-sized).
pub type DLDeviceType = i32;
/// CPU memory.
pub const kDLCPU: DLDeviceType = 1;
/// CUDA device memory.
pub const kDLCUDA: DLDeviceType = 2;
/// Pinned CUDA host memory (`cudaMallocHost`).
pub const kDLCUDAHost: DLDeviceType = 3;
/// OpenCL device memory.
pub const kDLOpenCL: DLDeviceType = 4;
/// Vulkan buffer.
pub const kDLVulkan: DLDeviceType = 7;
/// Metal (Apple GPU) buffer.
pub const kDLMetal: DLDeviceType = 8;
/// Verilog simulator buffer.
pub const kDLVPI: DLDeviceType = 9;
/// ROCm (AMD GPU) device memory.
pub const kDLROCM: DLDeviceType = 10;
/// Pinned ROCm host memory.
pub const kDLROCMHost: DLDeviceType = 11;
/// Reserved extension device type.
pub const kDLExtDev: DLDeviceType = 12;
/// CUDA managed (unified) memory.
pub const kDLCUDAManaged: DLDeviceType = 13;
/// Unified shared memory of a oneAPI (SYCL) device.
pub const kDLOneAPI: DLDeviceType = 14;
/// WebGPU buffer.
pub const kDLWebGPU: DLDeviceType = 15;
/// Qualcomm Hexagon DSP memory.
pub const kDLHexagon: DLDeviceType = 16;
/// Microsoft MAIA device memory.
pub const kDLMAIA: DLDeviceType = 17;
/// AWS Trainium device memory.
pub const kDLTrn: DLDeviceType = 18;

/// `DLDevice`: where a tensor's memory lives.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DLDevice {
    /// One of the `kDL*` device type codes.
    pub device_type: DLDeviceType,
    /// Device ordinal (0 for the CPU).
    pub device_id: i32,
}

/// `DLDataTypeCode` values, stored in [`DLDataType::code`].
pub type DLDataTypeCode = u8;
/// Signed integer.
pub const kDLInt: DLDataTypeCode = 0;
/// Unsigned integer.
pub const kDLUInt: DLDataTypeCode = 1;
/// IEEE 754 binary floating point.
pub const kDLFloat: DLDataTypeCode = 2;
/// Opaque handle (pointer-sized).
pub const kDLOpaqueHandle: DLDataTypeCode = 3;
/// bfloat16.
pub const kDLBfloat: DLDataTypeCode = 4;
/// Complex number of two IEEE floats (`bits` counts both parts).
pub const kDLComplex: DLDataTypeCode = 5;
/// Boolean (8 bits).
pub const kDLBool: DLDataTypeCode = 6;
/// FP8 e3m4.
pub const kDLFloat8_e3m4: DLDataTypeCode = 7;
/// FP8 e4m3.
pub const kDLFloat8_e4m3: DLDataTypeCode = 8;
/// FP8 e4m3b11fnuz.
pub const kDLFloat8_e4m3b11fnuz: DLDataTypeCode = 9;
/// FP8 e4m3fn.
pub const kDLFloat8_e4m3fn: DLDataTypeCode = 10;
/// FP8 e4m3fnuz.
pub const kDLFloat8_e4m3fnuz: DLDataTypeCode = 11;
/// FP8 e5m2.
pub const kDLFloat8_e5m2: DLDataTypeCode = 12;
/// FP8 e5m2fnuz.
pub const kDLFloat8_e5m2fnuz: DLDataTypeCode = 13;
/// FP8 e8m0fnu (an exponent-only scale type).
pub const kDLFloat8_e8m0fnu: DLDataTypeCode = 14;
/// FP6 e2m3fn.
pub const kDLFloat6_e2m3fn: DLDataTypeCode = 15;
/// FP6 e3m2fn.
pub const kDLFloat6_e3m2fn: DLDataTypeCode = 16;
/// FP4 e2m1fn.
pub const kDLFloat4_e2m1fn: DLDataTypeCode = 17;

/// `DLDataType`: element type of a tensor.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DLDataType {
    /// One of the `kDL*` data type codes.
    pub code: u8,
    /// Bits per lane.
    pub bits: u8,
    /// Lanes per element (1 for scalars, more for vector types).
    pub lanes: u16,
}

/// `DLTensor`: a non-owning description of a tensor.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct DLTensor {
    /// Base pointer of the allocation (may be NULL for empty tensors).
    pub data: *mut c_void,
    /// Device of `data`.
    pub device: DLDevice,
    /// Number of dimensions.
    pub ndim: i32,
    /// Element type.
    pub dtype: DLDataType,
    /// `ndim` dimension sizes.
    pub shape: *mut i64,
    /// `ndim` strides in elements, or NULL for compact row-major (allowed before 1.2).
    pub strides: *mut i64,
    /// Offset in bytes from `data` to element 0.
    pub byte_offset: u64,
}

/// `DLManagedTensor`: the legacy (unversioned) owning tensor.
#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensor {
    /// The tensor description.
    pub dl_tensor: DLTensor,
    /// Producer context, opaque to the consumer.
    pub manager_ctx: *mut c_void,
    /// Called by the consumer exactly once to release the tensor; may be NULL.
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

/// Flag bit: the tensor's memory must not be written.
pub const DLPACK_FLAG_BITMASK_READ_ONLY: u64 = 1 << 0;
/// Flag bit: the producer copied the data for this export.
pub const DLPACK_FLAG_BITMASK_IS_COPIED: u64 = 1 << 1;
/// Flag bit: sub-byte elements are padded to one byte each.
pub const DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED: u64 = 1 << 2;

/// `DLManagedTensorVersioned`: the owning tensor of DLPack 1.x.
#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensorVersioned {
    /// ABI version of this struct; a consumer must check `major` before reading further fields
    /// other than `deleter`.
    pub version: DLPackVersion,
    /// Producer context, opaque to the consumer.
    pub manager_ctx: *mut c_void,
    /// Called by the consumer exactly once to release the tensor; may be NULL.
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensorVersioned)>,
    /// `DLPACK_FLAG_BITMASK_*` bits.
    pub flags: u64,
    /// The tensor description.
    pub dl_tensor: DLTensor,
}

/// Error callback handed to [`DLPackManagedTensorAllocator`].
pub type DLPackSetError = Option<
    unsafe extern "C" fn(error_ctx: *mut c_void, kind: *const c_char, message: *const c_char),
>;

/// Allocates a new tensor shaped like `prototype` (dtype, ndim, shape, device) in the producer.
pub type DLPackManagedTensorAllocator = Option<
    unsafe extern "C" fn(
        prototype: *mut DLTensor,
        out: *mut *mut DLManagedTensorVersioned,
        error_ctx: *mut c_void,
        set_error: DLPackSetError,
    ) -> c_int,
>;

/// Exports a Python object of the publishing type as an owning tensor, without stream sync.
pub type DLPackManagedTensorFromPyObjectNoSync = Option<
    unsafe extern "C" fn(py_object: *mut c_void, out: *mut *mut DLManagedTensorVersioned) -> c_int,
>;

/// Fills a caller-provided, non-owning `DLTensor` from a Python object of the publishing type.
pub type DLPackDLTensorFromPyObjectNoSync =
    Option<unsafe extern "C" fn(py_object: *mut c_void, out: *mut DLTensor) -> c_int>;

/// Returns the producer's current work stream for a device (NULL on the CPU).
pub type DLPackCurrentWorkStream = Option<
    unsafe extern "C" fn(
        device_type: DLDeviceType,
        device_id: i32,
        out_current_stream: *mut *mut c_void,
    ) -> c_int,
>;

/// Wraps an owning tensor (ownership is stolen) into a Python object of the publishing library.
pub type DLPackManagedTensorToPyObjectNoSync = Option<
    unsafe extern "C" fn(
        tensor: *mut DLManagedTensorVersioned,
        out_py_object: *mut *mut c_void,
    ) -> c_int,
>;

/// `DLPackExchangeAPIHeader`: the stable prefix of every exchange API table.
#[repr(C)]
#[derive(Debug)]
pub struct DLPackExchangeAPIHeader {
    /// Version of the table layout.
    pub version: DLPackVersion,
    /// An older table kept for consumers built against an older version, or NULL.
    pub prev_api: *mut DLPackExchangeAPIHeader,
}

/// `DLPackExchangeAPI`: the C function table published as `__dlpack_c_exchange_api__`.
#[repr(C)]
#[derive(Debug)]
pub struct DLPackExchangeAPI {
    /// Version and link to older tables.
    pub header: DLPackExchangeAPIHeader,
    /// See [`DLPackManagedTensorAllocator`].
    pub managed_tensor_allocator: DLPackManagedTensorAllocator,
    /// See [`DLPackManagedTensorFromPyObjectNoSync`].
    pub managed_tensor_from_py_object_no_sync: DLPackManagedTensorFromPyObjectNoSync,
    /// See [`DLPackManagedTensorToPyObjectNoSync`].
    pub managed_tensor_to_py_object_no_sync: DLPackManagedTensorToPyObjectNoSync,
    /// See [`DLPackDLTensorFromPyObjectNoSync`].
    pub dltensor_from_py_object_no_sync: DLPackDLTensorFromPyObjectNoSync,
    /// See [`DLPackCurrentWorkStream`].
    pub current_work_stream: DLPackCurrentWorkStream,
}

// SAFETY: the table is immutable static data (function pointers and a version); sharing it between
// threads is what the protocol intends.
unsafe impl Sync for DLPackExchangeAPI {}
// SAFETY: as above, for the header embedded in static tables.
unsafe impl Sync for DLPackExchangeAPIHeader {}

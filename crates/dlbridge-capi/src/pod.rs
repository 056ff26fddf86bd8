//! Plain-old-data types and constants that cross the C boundary by value: data types, devices,
//! the tensor summary, memory orders and flag bits. They mirror DLPack's fields without
//! redeclaring its structs, so `dlbridge.h` and an official `dlpack.h` can share a translation unit.
#![allow(non_camel_case_types)]

use dlbridge::ffi::{self, DLDataType, DLDevice};
use dlbridge::Order;

use crate::status::CapiError;

/// An element type, laid out like DLPack's DLDataType.
///
/// Passed by value. It is 4 bytes with no padding, so on little-endian targets it travels exactly
/// like the `uint32_t` `code | bits << 8 | lanes << 16` (useful for FFIs without C struct
/// lowering).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct dlb_dtype {
    /// Type code (DLDataTypeCode: 0 int, 1 uint, 2 float, 4 bfloat, 5 complex, 6 bool, ...).
    pub code: u8,
    /// Bits per lane (complex counts both parts: complex64 has 64).
    pub bits: u8,
    /// Lanes per element (1 for scalars).
    pub lanes: u16,
}

/// A device, laid out like DLPack's DLDevice.
///
/// Passed by value. It is 8 bytes with no padding, so on little-endian targets it travels exactly
/// like the `uint64_t` `(uint32_t)device_type | (uint64_t)device_id << 32`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct dlb_device {
    /// DLDeviceType code (1 is the CPU, see DLB_DEVICE_TYPE_CPU).
    pub device_type: i32,
    /// Device ordinal (0 for the CPU).
    pub device_id: i32,
}

/// A tensor's description, filled by `dlb_tensor_info` (named `_desc` because C gives types and
/// functions one namespace).
///
/// The struct has no padding (72 bytes on 64-bit targets). `shape` and `strides` point into the
/// tensor and stay valid while the handle they came from lives; never write through them.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct dlb_tensor_desc {
    /// Address of element 0 (any byte offset already applied); NULL when the tensor has no
    /// elements.
    pub data: *mut std::ffi::c_void,
    /// `ndim` dimension sizes; NULL when ndim is 0.
    pub shape: *const i64,
    /// `ndim` strides in elements (possibly negative or 0); NULL when ndim is 0, never NULL
    /// otherwise.
    pub strides: *const i64,
    /// Number of dimensions (0 for a scalar).
    pub ndim: i32,
    /// Element type.
    pub dtype: dlb_dtype,
    /// Where the memory lives.
    pub device: dlb_device,
    /// DLPack flag bits (DLB_FLAG_*).
    pub flags: u64,
    /// Number of elements (1 for a 0-d tensor, 0 for an empty one).
    pub size: i64,
    /// Bytes per element, sub-byte types rounded up to 1.
    pub itemsize: i64,
    /// Bytes of the elements if they were compact (packed sub-byte types rounded up to a byte).
    pub nbytes: i64,
}

/// Row-major order (last dimension fastest), for `order` arguments.
pub const DLB_ORDER_C: i32 = 0;
/// Column-major order (first dimension fastest), for `order` arguments.
pub const DLB_ORDER_F: i32 = 1;

/// Flag bit: the memory must not be written (DLPACK_FLAG_BITMASK_READ_ONLY).
pub const DLB_FLAG_READ_ONLY: u64 = 1 << 0;
/// Flag bit: the data was copied for this exchange (DLPACK_FLAG_BITMASK_IS_COPIED).
pub const DLB_FLAG_IS_COPIED: u64 = 1 << 1;
/// Flag bit: sub-byte elements take one byte each (DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED).
pub const DLB_FLAG_IS_SUBBYTE_TYPE_PADDED: u64 = 1 << 2;

/// Device type code of host memory (kDLCPU).
pub const DLB_DEVICE_TYPE_CPU: i32 = 1;

/// Largest ndim accepted anywhere.
pub const DLB_MAX_NDIM: i32 = 1024;

// The literals above are what the header shows; they must agree with the core.
const _: () = {
    assert!(DLB_FLAG_READ_ONLY == ffi::DLPACK_FLAG_BITMASK_READ_ONLY);
    assert!(DLB_FLAG_IS_COPIED == ffi::DLPACK_FLAG_BITMASK_IS_COPIED);
    assert!(DLB_FLAG_IS_SUBBYTE_TYPE_PADDED == ffi::DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED);
    assert!(DLB_DEVICE_TYPE_CPU == ffi::kDLCPU);
    assert!(DLB_MAX_NDIM as usize == dlbridge::MAX_NDIM);
    assert!(std::mem::size_of::<dlb_dtype>() == std::mem::size_of::<DLDataType>());
    assert!(std::mem::size_of::<dlb_device>() == std::mem::size_of::<DLDevice>());
};

impl From<dlb_dtype> for DLDataType {
    fn from(d: dlb_dtype) -> Self {
        DLDataType {
            code: d.code,
            bits: d.bits,
            lanes: d.lanes,
        }
    }
}

impl From<DLDataType> for dlb_dtype {
    fn from(d: DLDataType) -> Self {
        dlb_dtype {
            code: d.code,
            bits: d.bits,
            lanes: d.lanes,
        }
    }
}

impl From<dlb_device> for DLDevice {
    fn from(d: dlb_device) -> Self {
        DLDevice {
            device_type: d.device_type,
            device_id: d.device_id,
        }
    }
}

impl From<DLDevice> for dlb_device {
    fn from(d: DLDevice) -> Self {
        dlb_device {
            device_type: d.device_type,
            device_id: d.device_id,
        }
    }
}

/// Reads an `order` argument (DLB_ORDER_C or DLB_ORDER_F).
pub(crate) fn order_arg(order: i32) -> Result<Order, CapiError> {
    match order {
        DLB_ORDER_C => Ok(Order::C),
        DLB_ORDER_F => Ok(Order::F),
        other => Err(dlbridge::Error::UnknownName {
            what: "order",
            name: format!("{other} (expected 0 for C or 1 for F)"),
        }
        .into()),
    }
}

//! Numpy-style dtype names ("float32", "bool", "bfloat16", "complex64", "float8_e4m3fn",
//! "float32x4"), as the core spells them.

use std::ffi::{c_char, c_int};

use dlbridge::DataType;

use crate::args::{str_arg, write_str, Out};
use crate::pod::dlb_dtype;
use crate::status::{boundary, CapiError};

/// A name buffer of this many bytes holds every dtype name and its terminating NUL.
pub const DLB_DTYPE_NAME_CAPACITY: usize = 32;

/// Parses a dtype name into `*out`.
///
/// Accepts every name dlb_dtype_name writes, plus the aliases "float" (float32), "double"
/// (float64), "half" (float16), "int" and "uint" (64-bit). An unknown name gives
/// DLB_ERR_UNKNOWN_NAME, with the name quoted in dlb_last_error().
///
/// # Safety
/// `name` is NULL or a NUL-terminated string; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dlb_dtype_from_name(name: *const c_char, out: *mut dlb_dtype) -> c_int {
    boundary(|| {
        // SAFETY: caller's contract.
        let out = unsafe { Out::new(out, "out") }?;
        // SAFETY: caller's contract.
        let name = unsafe { str_arg(name, "name") }?;
        let dtype: DataType = name.parse()?;
        out.write(dtype.to_raw().into());
        Ok(())
    })
}

/// Writes the numpy-style name of `dtype`, NUL-terminated, into `buf` of `len` bytes.
///
/// A buffer of DLB_DTYPE_NAME_CAPACITY bytes always suffices; a smaller one that cannot hold the
/// name gives DLB_ERR_BUFFER_TOO_SMALL and leaves `buf` untouched. An invalid `dtype` gives its
/// dtype error (DLB_ERR_UNKNOWN_DTYPE_CODE, DLB_ERR_INVALID_DTYPE_BITS, DLB_ERR_UNSUPPORTED_LANES).
///
/// # Safety
/// `buf` is NULL or writable for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn dlb_dtype_name(dtype: dlb_dtype, buf: *mut c_char, len: usize) -> c_int {
    boundary(|| {
        if buf.is_null() {
            return Err(CapiError::NullArgument("buf"));
        }
        let name = DataType::from_raw(dtype.into())?.name();
        // SAFETY: caller's contract.
        unsafe { write_str(buf, len, "buf", name) }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use dlbridge::ffi::DLDataType;

    #[test]
    fn every_valid_dtype_name_fits_the_advertised_capacity() {
        let mut longest = String::new();
        for code in 0..=u8::MAX {
            for bits in [4, 6, 8, 16, 32, 64, 128] {
                for lanes in [1, 2, 4, u16::MAX] {
                    if let Ok(dt) = DataType::from_raw(DLDataType { code, bits, lanes }) {
                        if dt.name().len() > longest.len() {
                            longest = dt.name();
                        }
                    }
                }
            }
        }
        assert!(longest.len() < DLB_DTYPE_NAME_CAPACITY, "{longest}");
    }

    #[test]
    fn names_round_trip_through_the_c_functions() {
        let mut dtype = dlb_dtype {
            code: 0,
            bits: 0,
            lanes: 0,
        };
        // SAFETY: a NUL-terminated literal and a local out-parameter.
        let status = unsafe { dlb_dtype_from_name(c"bfloat16".as_ptr(), &mut dtype) };
        assert_eq!(status, 0);
        assert_eq!((dtype.code, dtype.bits, dtype.lanes), (4, 16, 1));
        let mut buf = [0 as c_char; DLB_DTYPE_NAME_CAPACITY];
        // SAFETY: `buf` is writable for its length.
        let status = unsafe { dlb_dtype_name(dtype, buf.as_mut_ptr(), buf.len()) };
        assert_eq!(status, 0);
        // SAFETY: written NUL-terminated above.
        let name = unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) };
        assert_eq!(name, c"bfloat16");
        // SAFETY: as above, with a buffer one byte too small for "bfloat16\0".
        let status = unsafe { dlb_dtype_name(dtype, buf.as_mut_ptr(), 8) };
        assert_eq!(status, crate::dlb_status::DLB_ERR_BUFFER_TOO_SMALL as c_int);
    }
}

//! The one table between DLPack dtypes and the `struct`-module formats of the buffer protocol:
//! the format a tensor's buffer announces (`memoryview(t)`, `numpy.asarray(t)`) and the dtype a
//! producer's buffer is read as (by the import's buffer-protocol route).

use std::ffi::{c_char, CStr};

use dlbridge::DataType;

/// `s`, a NUL-terminated literal, as a C string (at compile time).
const fn c_str(s: &'static str) -> &'static CStr {
    match CStr::from_bytes_with_nul(s.as_bytes()) {
        Ok(c) => c,
        Err(_) => panic!("a NUL-terminated format"),
    }
}

/// Generates both directions from one list of `dtype => "format"` pairs.
macro_rules! formats {
    ($($dtype:ident => $format:literal,)*) => {
        /// The `struct`-module format of one element of `dtype`, for the buffer protocol; `None`
        /// for dtypes Python has no format for (bfloat16, float8 variants, sub-byte types,
        /// vectors).
        pub fn struct_format(dtype: DataType) -> Option<&'static CStr> {
            Some(match dtype {
                $(DataType::$dtype => const { c_str(concat!($format, "\0")) },)*
                _ => return None,
            })
        }

        /// The dtype whose format is exactly `format` (no byte-order prefix).
        fn exact_dtype(format: &[u8]) -> Option<DataType> {
            Some(match format {
                $(f if f == $format.as_bytes() => DataType::$dtype,)*
                _ => return None,
            })
        }
    };
}

// The most common formats first: a producer's format is compared with them in this order.
formats! {
    F32 => "f",
    F64 => "d",
    I64 => "q",
    I32 => "i",
    U8 => "B",
    BOOL => "?",
    I8 => "b",
    I16 => "h",
    U16 => "H",
    U32 => "I",
    U64 => "Q",
    F16 => "e",
    C64 => "Zf",
    C128 => "Zd",
}

/// The DLPack dtype of a struct-module format of one native-order scalar of `itemsize` bytes,
/// if exact: a format of the table (optionally prefixed with the native byte order), or a C
/// integer type whose size varies by platform (`l`, `L`, `n`, `N`) read by its size.
///
/// # Safety
/// `format` is NULL (unsigned bytes) or a NUL-terminated string.
pub(crate) unsafe fn dtype_of(format: *const c_char, itemsize: isize) -> Option<DataType> {
    // Formats that map are at most three bytes ("<Zf"): read up to four, stopping at the NUL,
    // instead of measuring the string.
    let mut head = [0u8; 4];
    let mut len = 0;
    if format.is_null() {
        head[0] = b'B';
        len = 1;
    } else {
        while len < head.len() {
            // SAFETY: every byte up to and including the NUL is readable (contract).
            let byte = unsafe { *format.add(len) } as u8;
            if byte == 0 {
                break;
            }
            head[len] = byte;
            len += 1;
        }
    }
    let bytes = match &head[..len] {
        [b'@' | b'=', rest @ ..] => rest,
        [b'<', rest @ ..] if cfg!(target_endian = "little") => rest,
        [b'>' | b'!', rest @ ..] if cfg!(target_endian = "big") => rest,
        [b'<' | b'>' | b'!', ..] => return None,
        other => other,
    };
    let dtype = match bytes {
        b"l" | b"n" => sized_int(true, itemsize)?,
        b"L" | b"N" => sized_int(false, itemsize)?,
        other => exact_dtype(other)?,
    };
    (dtype.storage_size(false) == Some(itemsize as usize)).then_some(dtype)
}

/// The integer dtype of `itemsize` bytes.
pub(crate) fn sized_int(signed: bool, itemsize: isize) -> Option<DataType> {
    Some(match (signed, itemsize) {
        (true, 1) => DataType::I8,
        (true, 2) => DataType::I16,
        (true, 4) => DataType::I32,
        (true, 8) => DataType::I64,
        (false, 1) => DataType::U8,
        (false, 2) => DataType::U16,
        (false, 4) => DataType::U32,
        (false, 8) => DataType::U64,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use std::ffi::CStr;

    use dlbridge::DataTypeCode;

    use super::*;

    #[test]
    fn formats_map_only_onto_exact_native_dtypes() {
        // SAFETY: NUL-terminated literals.
        let f = |s: &CStr, n| unsafe { dtype_of(s.as_ptr(), n) };
        assert_eq!(f(c"f", 4), Some(DataType::F32));
        assert_eq!(f(c"<d", 8), Some(DataType::F64));
        assert_eq!(f(c"=l", 8), Some(DataType::I64));
        assert_eq!(f(c"L", 4), Some(DataType::U32));
        assert_eq!(f(c"Zf", 8), Some(DataType::C64));
        assert_eq!(f(c"?", 1), Some(DataType::BOOL));
        assert_eq!(f(c"e", 2), Some(DataType::F16));
        // SAFETY: NULL means unsigned bytes.
        assert_eq!(unsafe { dtype_of(std::ptr::null(), 1) }, Some(DataType::U8));
        assert_eq!(f(c">f", 4), None);
        assert_eq!(f(c"f", 8), None);
        assert_eq!(f(c"T{f:x:}", 4), None);
        assert_eq!(f(c"O", 8), None);
        assert_eq!(f(c"2f", 8), None);
    }

    #[test]
    fn every_format_reads_back_as_its_dtype() {
        let dtypes = [
            DataType::BOOL,
            DataType::I8,
            DataType::I16,
            DataType::I32,
            DataType::I64,
            DataType::U8,
            DataType::U16,
            DataType::U32,
            DataType::U64,
            DataType::F16,
            DataType::F32,
            DataType::F64,
            DataType::C64,
            DataType::C128,
        ];
        for dtype in dtypes {
            let format = struct_format(dtype).expect("a format");
            let size = dtype.storage_size(false).expect("whole bytes") as isize;
            // SAFETY: a NUL-terminated format from the table.
            assert_eq!(unsafe { dtype_of(format.as_ptr(), size) }, Some(dtype));
        }
        assert_eq!(struct_format(DataType::BF16), None);
        let vector = DataType::new(DataTypeCode::Float, 32, 4).expect("a vector dtype");
        assert_eq!(struct_format(vector), None);
    }
}

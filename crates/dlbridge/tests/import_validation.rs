//! Every invalid foreign tensor gets its own typed error, and the producer's deleter still runs
//! exactly once.

mod common;

use common::{count, legacy, versioned, Fields};
use dlbridge::ffi::*;
use dlbridge::{DataType, Device, DeviceType, Error, Flags, ManagedTensor, Order, Tensor};

/// A DLPack data type of `lanes` lanes of `bits` bits of type code `code`.
fn dl_dtype(code: u8, bits: u8, lanes: u16) -> DLDataType {
    DLDataType { code, bits, lanes }
}

/// Imports `f` as versioned; returns the result's error (if any) after checking the deleter ran
/// exactly once by the time the tensor (if any) is dropped.
fn import_err(f: &Fields) -> Option<Error> {
    let (ptr, deletions) = versioned(f);
    // SAFETY: a fresh fake tensor whose ownership we hand over.
    let result = unsafe { ManagedTensor::from_versioned(ptr) };
    let err = result.err();
    assert_eq!(
        count(&deletions),
        1,
        "deleter must run exactly once ({err:?})"
    );
    err
}

#[test]
fn null_pointer_is_rejected() {
    // SAFETY: NULL is explicitly allowed.
    let err = unsafe { ManagedTensor::from_versioned(std::ptr::null_mut()) }.unwrap_err();
    assert_eq!(err, Error::NullTensor);
    // SAFETY: as above.
    let err =
        unsafe { ManagedTensor::from_legacy(std::ptr::null_mut(), Flags::empty()) }.unwrap_err();
    assert_eq!(err, Error::NullTensor);
}

#[test]
fn major_version_other_than_one_is_rejected_after_calling_the_deleter() {
    let mut f = Fields::f32(&[2]);
    f.version = DLPackVersion { major: 2, minor: 0 };
    // Garbage in every other field: none of it may be read.
    f.ndim = -77;
    f.null_shape = true;
    f.dtype.code = 200;
    assert_eq!(
        import_err(&f),
        Some(Error::UnsupportedVersion(DLPackVersion {
            major: 2,
            minor: 0
        }))
    );
    f.version = DLPackVersion { major: 0, minor: 9 };
    assert_eq!(
        import_err(&f),
        Some(Error::UnsupportedVersion(DLPackVersion {
            major: 0,
            minor: 9
        }))
    );
}

#[test]
fn newer_minor_versions_are_accepted() {
    let mut f = Fields::f32(&[2]);
    f.version = DLPackVersion { major: 1, minor: 9 };
    assert_eq!(import_err(&f), None);
}

#[test]
fn ndim_out_of_range_is_rejected() {
    let mut f = Fields::f32(&[2]);
    f.ndim = -1;
    assert_eq!(import_err(&f), Some(Error::NdimOutOfRange(-1)));
    f.ndim = 1025;
    assert_eq!(import_err(&f), Some(Error::NdimOutOfRange(1025)));
}

#[test]
fn max_ndim_is_accepted() {
    let f = Fields::f32(&[1; 1024]);
    assert_eq!(import_err(&f), None);
}

#[test]
fn null_shape_with_dims_is_rejected() {
    let mut f = Fields::f32(&[2, 2]);
    f.null_shape = true;
    assert_eq!(import_err(&f), Some(Error::NullShape(2)));
}

#[test]
fn negative_dim_is_rejected_with_its_axis() {
    let mut f = Fields::f32(&[2, 3]);
    f.shape = vec![2, -3];
    assert_eq!(
        import_err(&f),
        Some(Error::NegativeDim { axis: 1, size: -3 })
    );
}

#[test]
fn shape_product_overflow_is_rejected() {
    let mut f = Fields::f32(&[0]);
    f.ndim = 3;
    f.shape = vec![1 << 40, 1 << 40, 4];
    assert_eq!(
        import_err(&f),
        Some(Error::ShapeOverflow {
            shape: vec![1 << 40, 1 << 40, 4]
        })
    );
    // the element count fits, the byte size does not
    f.ndim = 2;
    f.shape = vec![1 << 31, 1 << 31];
    assert_eq!(
        import_err(&f),
        Some(Error::ShapeOverflow {
            shape: vec![1 << 31, 1 << 31]
        })
    );
}

#[test]
fn null_data_with_elements_is_rejected_but_allowed_when_empty() {
    let mut f = Fields::f32(&[3]);
    f.null_data = true;
    assert_eq!(import_err(&f), Some(Error::NullData { size: 3 }));
    let mut f = Fields::f32(&[0, 3]);
    f.null_data = true;
    assert_eq!(import_err(&f), None);
}

#[test]
fn unknown_dtype_code_bits_and_lanes_are_rejected() {
    let mut f = Fields::f32(&[2]);
    f.dtype = dl_dtype(18, 8, 1);
    assert_eq!(import_err(&f), Some(Error::UnknownDtypeCode(18)));
    f.dtype = dl_dtype(kDLFloat, 12, 1);
    assert_eq!(
        import_err(&f),
        Some(Error::InvalidDtypeBits {
            code: kDLFloat,
            kind: "float",
            bits: 12
        })
    );
    f.dtype = dl_dtype(kDLBool, 8, 2);
    assert_eq!(
        import_err(&f),
        Some(Error::UnsupportedLanes {
            kind: "bool",
            lanes: 2
        })
    );
    f.dtype = dl_dtype(kDLFloat, 32, 0);
    assert_eq!(
        import_err(&f),
        Some(Error::UnsupportedLanes {
            kind: "float",
            lanes: 0
        })
    );
}

#[test]
fn unknown_device_is_rejected() {
    let mut f = Fields::f32(&[2]);
    f.device = DLDevice {
        device_type: 5,
        device_id: 0,
    };
    assert_eq!(import_err(&f), Some(Error::UnknownDevice(5)));
}

#[test]
fn strides_overflowing_the_address_space_are_rejected() {
    let mut f = Fields::f32(&[3, 2]);
    f.strides = Some(vec![i64::MAX / 2, 1]);
    assert!(matches!(import_err(&f), Some(Error::StrideOverflow { .. })));
    let mut f = Fields::f32(&[3]);
    f.strides = Some(vec![i64::MIN / 4]);
    assert!(matches!(import_err(&f), Some(Error::StrideOverflow { .. })));
    let mut f = Fields::f32(&[3]);
    f.byte_offset = u64::MAX - 4;
    assert!(matches!(import_err(&f), Some(Error::StrideOverflow { .. })));
}

#[test]
fn strided_packed_subbyte_data_is_rejected() {
    let mut f = Fields::f32(&[4, 4]);
    f.dtype = dl_dtype(kDLFloat4_e2m1fn, 4, 1);
    f.strides = Some(vec![1, 4]);
    assert!(matches!(import_err(&f), Some(Error::UnsupportedLayout(_))));
    f.strides = None;
    assert_eq!(import_err(&f), None);
    f.strides = Some(vec![1, 4]);
    f.flags = Flags::IS_SUBBYTE_TYPE_PADDED.bits();
    assert_eq!(import_err(&f), None);
}

/// Packed elements occupy ⌈size·bits/8⌉ bytes: the span the importer checks and reports must be
/// exactly that, for sub-byte types (fp4: less than one byte per element) and for vector types
/// whose lanes do not fill whole bytes (int4x3: 12 bits). A span of one byte per element let a
/// copy read past the memory the span described (found by the importer fuzz target).
#[test]
fn packed_span_is_the_bytes_the_elements_occupy() {
    for (code, bits, lanes, size, bytes) in [
        (kDLFloat4_e2m1fn, 4, 1, 5, 3),
        (kDLInt, 4, 3, 4, 6),
        (kDLUInt, 1, 65281, 2, 16321),
    ] {
        let mut f = Fields::f32(&[size]);
        f.dtype = DLDataType { code, bits, lanes };
        f.data_len = bytes as usize;
        let (ptr, deletions) = versioned(&f);
        // SAFETY: fresh fake tensor holding exactly `bytes` bytes.
        let t = unsafe { ManagedTensor::from_versioned(ptr) }.unwrap();
        let v = dlbridge::AsTensorView::view(&t);
        assert_eq!(v.storage_size(), None);
        assert_eq!(
            (v.byte_span().start, v.byte_span().end),
            (0, bytes),
            "{code}/{bits}x{lanes}"
        );
        assert_eq!(v.nbytes(), bytes as usize);
        let copy = v.to_contiguous(Order::C).unwrap();
        // SAFETY: the copy is a compact buffer of `bytes` bytes; the fake's bytes count up.
        let copied = unsafe { std::slice::from_raw_parts(copy.data_ptr(), bytes as usize) };
        assert!(copied.iter().enumerate().all(|(i, &b)| b == i as u8));
        drop(t);
        assert_eq!(count(&deletions), 1);
    }
    // 2^51 elements of 65281 bits: the element count fits, the bytes they occupy do not.
    let mut f = Fields::f32(&[1 << 51]);
    f.dtype = dl_dtype(kDLUInt, 1, 65281);
    f.data_len = 8;
    let err = import_err(&f);
    assert!(matches!(err, Some(Error::ShapeOverflow { .. })), "{err:?}");
}

/// The bytes of a huge packed tensor are counted without overflowing (found by fuzzing: the
/// bit count of 2^62 int4 elements overflowed 64 bits).
#[test]
fn packed_nbytes_of_huge_tensors_do_not_overflow() {
    let mut f = Fields::f32(&[1, 1]);
    f.shape = vec![1 << 62, 1];
    f.dtype = dl_dtype(kDLInt, 4, 1);
    f.data_len = 8;
    let (ptr, deletions) = versioned(&f);
    // SAFETY: fresh fake tensor; nothing below reads its data.
    let t = unsafe { ManagedTensor::from_versioned(ptr) }.unwrap();
    let v = dlbridge::AsTensorView::view(&t);
    assert_eq!(v.nbytes(), 1 << 61);
    assert_eq!(v.byte_span().end, 1 << 61);
    drop(t);
    assert_eq!(count(&deletions), 1);
}

/// A size-1 axis can carry any stride, even one whose byte stride overflows: the copy never steps
/// along it (found by fuzzing: computing its byte stride overflowed).
#[test]
fn size_one_axes_with_huge_strides_copy() {
    let mut f = Fields::f32(&[2, 1]);
    f.strides = Some(vec![1, i64::MAX]);
    let (ptr, deletions) = versioned(&f);
    // SAFETY: fresh fake tensor of two float32 elements.
    let t = unsafe { ManagedTensor::from_versioned(ptr) }.unwrap();
    let v = dlbridge::AsTensorView::view(&t);
    let copy = v.to_contiguous(Order::F).unwrap();
    let expected = [
        f32::from_ne_bytes([0, 1, 2, 3]),
        f32::from_ne_bytes([4, 5, 6, 7]),
    ];
    assert_eq!(copy.view().to_vec::<f32>().unwrap(), expected);
    drop(t);
    assert_eq!(count(&deletions), 1);
}

/// An empty tensor touches no memory, whatever its other dimensions and strides: it imports and
/// copies (found by fuzzing: the compact strides of the copy overflowed the span check).
#[test]
fn empty_tensors_with_huge_dims_import_and_copy() {
    for strides in [vec![0, 0, 0], vec![i64::MAX, 1, 1]] {
        let mut f = Fields::f32(&[0]);
        f.ndim = 3;
        f.shape = vec![1 << 61, 0, 3];
        f.strides = Some(strides);
        let (ptr, deletions) = versioned(&f);
        // SAFETY: fresh fake tensor.
        let t = unsafe { ManagedTensor::from_versioned(ptr) }.unwrap();
        let v = dlbridge::AsTensorView::view(&t);
        assert_eq!(v.size(), 0);
        for order in [Order::C, Order::F] {
            let copy = v.to_contiguous(order).unwrap();
            assert_eq!(copy.shape(), &[1 << 61, 0, 3]);
            assert_eq!(copy.view().nbytes(), 0);
        }
        drop(t);
        assert_eq!(count(&deletions), 1);
    }
}

#[test]
fn null_strides_mean_compact_row_major() {
    let f = Fields::f32(&[2, 3, 4]);
    let (ptr, deletions) = versioned(&f);
    // SAFETY: fresh fake tensor.
    let t = unsafe { ManagedTensor::from_versioned(ptr) }.unwrap();
    let v = dlbridge::AsTensorView::view(&t);
    assert_eq!(v.strides(), &[12, 4, 1]);
    assert!(v.is_contiguous(Order::C));
    drop(t);
    assert_eq!(count(&deletions), 1);
}

#[test]
fn valid_tensor_exposes_its_fields() {
    let mut f = Fields::f32(&[2, 3]);
    f.strides = Some(vec![1, 2]);
    f.byte_offset = 8;
    f.data_len = 32;
    f.flags = (Flags::READ_ONLY | Flags::IS_COPIED).bits();
    f.device = DLDevice {
        device_type: kDLCUDAHost,
        device_id: 0,
    };
    let (ptr, deletions) = versioned(&f);
    // SAFETY: fresh fake tensor.
    let t = Tensor::from(unsafe { ManagedTensor::from_versioned(ptr) }.unwrap());
    let v = t.view();
    assert_eq!(v.shape(), &[2, 3]);
    assert_eq!(v.strides(), &[1, 2]);
    assert_eq!(v.dtype(), DataType::F32);
    assert_eq!(
        v.device(),
        Device {
            kind: DeviceType::CudaHost,
            id: 0
        }
    );
    assert!(v.is_read_only() && v.is_copied());
    assert_eq!(v.compact_order(), Some(Order::F));
    // element 0 sits byte_offset bytes in: the fake fills byte i with i
    // SAFETY: the fake's buffer is 32 bytes; offset 8 is inside it.
    assert_eq!(unsafe { *v.data_ptr() }, 8);
    assert_eq!(t.data_ptr_mut(), Err(Error::ReadOnly));
    drop(t);
    assert_eq!(count(&deletions), 1);
}

#[test]
fn legacy_tensors_take_their_flags_from_the_importer_and_delete_once() {
    let f = Fields::f32(&[4]);
    let (ptr, deletions) = legacy(&f);
    // SAFETY: fresh fake tensor.
    let t = unsafe { ManagedTensor::from_legacy(ptr, Flags::READ_ONLY) }.unwrap();
    assert!(t.is_legacy());
    assert_eq!(t.version(), None);
    assert!(dlbridge::AsTensorView::view(&t).is_read_only());
    drop(t);
    assert_eq!(count(&deletions), 1);

    let mut bad = Fields::f32(&[4]);
    bad.shape = vec![-4];
    let (ptr, deletions) = legacy(&bad);
    // SAFETY: fresh fake tensor.
    let err = unsafe { ManagedTensor::from_legacy(ptr, Flags::empty()) }.unwrap_err();
    assert_eq!(err, Error::NegativeDim { axis: 0, size: -4 });
    assert_eq!(count(&deletions), 1);
}

#[test]
fn deleter_runs_once_on_the_thread_that_drops() {
    let f = Fields::f32(&[16]);
    let (ptr, deletions) = versioned(&f);
    // SAFETY: fresh fake tensor.
    let t = Tensor::from(unsafe { ManagedTensor::from_versioned(ptr) }.unwrap());
    let shared = std::sync::Arc::new(t);
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let s = shared.clone();
            std::thread::spawn(move || assert_eq!(s.view().size(), 16))
        })
        .collect();
    handles.into_iter().for_each(|h| h.join().unwrap());
    assert_eq!(count(&deletions), 0);
    std::thread::spawn(move || drop(shared)).join().unwrap();
    assert_eq!(count(&deletions), 1);
}

#[test]
fn zero_dim_tensor_holds_one_element() {
    let f = Fields::f32(&[]);
    let (ptr, deletions) = versioned(&f);
    // SAFETY: fresh fake tensor.
    let t = unsafe { ManagedTensor::from_versioned(ptr) }.unwrap();
    let v = dlbridge::AsTensorView::view(&t);
    assert_eq!((v.ndim(), v.size(), v.nbytes()), (0, 1, 4));
    assert_eq!(
        v.to_vec::<f32>().unwrap(),
        [f32::from_le_bytes([0, 1, 2, 3])]
    );
    drop(t);
    assert_eq!(count(&deletions), 1);
}

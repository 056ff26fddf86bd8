//! Exports of Rust-made tensors: field conventions, flags, ownership, and constructor checks.

use std::sync::Arc;

use dlbridge::ffi::DLPackVersion;
use dlbridge::{
    export, AlignedBuffer, AsTensorView, DataType, Error, Flags, ManagedTensor, Order, Tensor,
};

#[test]
fn versioned_export_fills_every_field() {
    let t = Tensor::from_vec((0..6i32).collect(), &[2, 3]).unwrap();
    let data = t.data_ptr();
    let p = export::to_versioned(t, Flags::IS_COPIED);
    // SAFETY: fresh export; we read it, then hand it to the importer which deletes it.
    unsafe {
        let m = &*p.as_ptr();
        assert_eq!(m.version, DLPackVersion { major: 1, minor: 3 });
        assert_eq!(m.flags, Flags::IS_COPIED.bits());
        assert_eq!(m.dl_tensor.data as *mut u8, data);
        assert_eq!(m.dl_tensor.byte_offset, 0);
        assert_eq!(std::slice::from_raw_parts(m.dl_tensor.shape, 2), &[2, 3]);
        assert_eq!(std::slice::from_raw_parts(m.dl_tensor.strides, 2), &[3, 1]);
        assert_eq!(m.dl_tensor.dtype, DataType::I32.to_raw());
        let back = ManagedTensor::from_versioned(p.as_ptr()).unwrap();
        assert_eq!(back.view().as_slice::<i32>().unwrap(), &[0, 1, 2, 3, 4, 5]);
    }
}

#[test]
fn empty_tensors_export_null_data_and_zero_dim_tensors_export_no_shape() {
    let t = Tensor::empty(&[3, 0], DataType::F64).unwrap();
    let p = export::to_versioned(t, Flags::empty());
    // SAFETY: fresh export, read then deleted through the importer.
    unsafe {
        assert!((*p.as_ptr()).dl_tensor.data.is_null());
        assert!(!(*p.as_ptr()).dl_tensor.strides.is_null());
        drop(ManagedTensor::from_versioned(p.as_ptr()).unwrap());
    }
    let scalar = Tensor::from_vec(vec![7.5f64], &[]).unwrap();
    let p = export::to_legacy(scalar, false).unwrap();
    // SAFETY: as above.
    unsafe {
        assert_eq!((*p.as_ptr()).dl_tensor.ndim, 0);
        let back = ManagedTensor::from_legacy(p.as_ptr(), Flags::empty()).unwrap();
        assert_eq!(back.view().to_vec::<f64>().unwrap(), [7.5]);
    }
}

#[test]
fn legacy_export_refuses_read_only_unless_allowed() {
    let t = Arc::new(
        Tensor::arange(4, DataType::U8)
            .unwrap()
            .with_flags(Flags::READ_ONLY),
    );
    assert_eq!(
        export::to_legacy(t.clone(), false).unwrap_err(),
        Error::ReadOnly
    );
    let p = export::to_legacy(t.clone(), true).unwrap();
    // SAFETY: fresh export handed to the importer.
    drop(unsafe { ManagedTensor::from_legacy(p.as_ptr(), Flags::READ_ONLY) }.unwrap());
    let p = export::to_versioned(t.clone(), Flags::empty());
    // SAFETY: as above.
    let back = unsafe { ManagedTensor::from_versioned(p.as_ptr()) }.unwrap();
    assert!(
        back.view().is_read_only(),
        "READ_ONLY survives a versioned export"
    );
    drop(back);
    assert_eq!(Arc::strong_count(&t), 1, "every export released its share");
}

#[test]
fn exports_share_memory_and_keep_it_alive() {
    let t = Arc::new(Tensor::arange(8, DataType::F32).unwrap());
    let a = export::to_versioned(t.clone(), Flags::empty());
    let b = export::to_versioned(t.clone(), Flags::empty());
    drop(t);
    // SAFETY: fresh exports handed to the importer.
    let (a, b) = unsafe {
        (
            ManagedTensor::from_versioned(a.as_ptr()).unwrap(),
            ManagedTensor::from_versioned(b.as_ptr()).unwrap(),
        )
    };
    assert_eq!(a.view().data_ptr(), b.view().data_ptr());
    // SAFETY: writable Rust-owned memory, alive while `a` lives; the write is seen through `b`.
    unsafe { (a.view().data_ptr() as *mut f32).add(3).write(42.0) };
    assert_eq!(b.view().read_at::<f32>(&[3]).unwrap(), 42.0);
}

#[test]
fn empty_allocates_zeroed_64_byte_aligned_memory() {
    for n in [1, 3, 1000] {
        let t = Tensor::empty(&[n, 2], DataType::C64).unwrap();
        assert_eq!(t.data_ptr() as usize % dlbridge::buffer::ALIGNMENT, 0);
        assert!(t
            .view()
            .to_vec::<num_complex::Complex32>()
            .unwrap()
            .iter()
            .all(|c| c.norm() == 0.0));
    }
    assert!(AlignedBuffer::zeroed(0).unwrap().is_empty());
    assert!(Tensor::zeros(&[2, 3], DataType::I16, Order::F)
        .unwrap()
        .view()
        .is_contiguous(Order::F));
}

#[test]
fn arange_converts_to_every_numeric_dtype() {
    let t = Tensor::arange(5, DataType::BF16).unwrap();
    assert_eq!(
        t.view().to_vec::<half::bf16>().unwrap()[4],
        half::bf16::from_f32(4.0)
    );
    let t = Tensor::arange(3, DataType::BOOL).unwrap();
    assert_eq!(t.view().to_vec::<bool>().unwrap(), [false, true, true]);
    let t = Tensor::arange(3, DataType::U64).unwrap();
    assert_eq!(t.view().as_slice::<u64>().unwrap(), &[0, 1, 2]);
    assert!(matches!(
        Tensor::arange(3, "float8_e4m3fn".parse().unwrap()),
        Err(Error::UnsupportedLayout(_))
    ));
}

#[test]
fn constructors_reject_bad_shapes_and_small_buffers() {
    assert!(matches!(
        Tensor::from_vec(vec![1u8; 5], &[2, 3]),
        Err(Error::BufferTooSmall { len: 5, .. })
    ));
    assert_eq!(
        Tensor::from_vec(vec![1u8; 5], &[-5]).unwrap_err(),
        Error::NegativeDim { axis: 0, size: -5 }
    );
    let err = Tensor::from_elements(vec![0u16; 6], &[2, 3], Some(&[3, 2]), 0).unwrap_err();
    assert_eq!(
        err,
        Error::BufferTooSmall {
            len: 12,
            shape: vec![2, 3],
            strides: vec![3, 2],
            start: 0,
            end: 16
        }
    );
    let err = Tensor::from_elements(vec![0u16; 6], &[3], Some(&[-1]), 1).unwrap_err();
    assert!(
        matches!(err, Error::BufferTooSmall { start: -2, .. }),
        "{err}"
    );
    let err = Tensor::from_elements(vec![0u16; 6], &[3], Some(&[1, 1]), 0).unwrap_err();
    assert!(matches!(err, Error::StridesMismatch { .. }));
    // a negative-stride view over the whole buffer is fine
    let t = Tensor::from_elements((0..6u16).collect::<Vec<_>>(), &[6], Some(&[-1]), 5).unwrap();
    assert_eq!(t.view().to_vec::<u16>().unwrap(), [5, 4, 3, 2, 1, 0]);
}

#[test]
fn typed_access_checks_the_dtype() {
    let t = Tensor::arange(4, DataType::F32).unwrap();
    let err = t.view().as_slice::<f64>().unwrap_err();
    assert_eq!(
        err,
        Error::DtypeMismatch {
            expected: "float64".into(),
            actual: "float32".into()
        }
    );
    assert_eq!(
        err.to_string(),
        "data type mismatch: tensor holds float32, caller asked for float64"
    );
}

#[test]
fn a_copy_of_a_read_only_view_is_writable_and_flagged() {
    let t = Tensor::from_elements((0..12i32).collect::<Vec<_>>(), &[3, 4], Some(&[1, 3]), 0)
        .unwrap()
        .with_flags(Flags::READ_ONLY);
    let c = t.view().to_contiguous(Order::C).unwrap();
    assert!(c.flags().contains(Flags::IS_COPIED) && !c.flags().contains(Flags::READ_ONLY));
    assert_eq!(
        c.view().as_slice::<i32>().unwrap(),
        &[0, 3, 6, 9, 1, 4, 7, 10, 2, 5, 8, 11]
    );
    assert!(c.data_ptr_mut().is_ok());
}

#[test]
fn raw_parts_reject_null_data_for_non_empty_tensors() {
    // SAFETY: the constructor must refuse before anything could read the NULL pointer.
    let err = unsafe {
        Tensor::from_raw_parts(
            std::ptr::null_mut(),
            &[2],
            None,
            DataType::F32,
            dlbridge::Device::CPU,
            Flags::empty(),
            Box::new(()),
        )
    }
    .unwrap_err();
    assert_eq!(err, Error::NullData { size: 2 });
    // SAFETY: an empty tensor never touches its data pointer.
    let empty = unsafe {
        Tensor::from_raw_parts(
            std::ptr::null_mut(),
            &[0, 2],
            None,
            DataType::F32,
            dlbridge::Device::CPU,
            Flags::empty(),
            Box::new(()),
        )
    };
    assert!(empty.is_ok());
}

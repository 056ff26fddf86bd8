//! The shared-memory transport: zero-copy opens, one-copy exports, read-only mappings, typed
//! errors for bad segments, and nothing left in /dev/shm.
#![cfg(target_os = "linux")]

use std::path::Path;

use dlbridge::shm::{self, Access};
use dlbridge::{DataType, Error, Flags, Order, Tensor};

fn exists(handle: &str) -> bool {
    Path::new("/dev/shm").join(handle).exists()
}

#[test]
fn a_shared_tensor_is_seen_and_written_through_another_mapping() {
    let shared = shm::empty(&[3, 4], DataType::F32).unwrap();
    let handle = shared.handle().to_owned();
    let data = shared.tensor().data_ptr() as *mut f32;
    assert_eq!(data as usize % 64, 0, "data is page-aligned");
    // SAFETY: the segment holds 12 writable f32s while `shared` lives.
    unsafe { (0..12).for_each(|i| data.add(i).write(i as f32)) };
    let opened = shm::open(&handle, Access::ReadWrite).unwrap();
    assert_ne!(
        opened.data_ptr(),
        shared.tensor().data_ptr(),
        "a second mapping of the same pages"
    );
    assert!(
        !opened.flags().contains(Flags::IS_COPIED),
        "allocated in shared memory: no copy"
    );
    assert_eq!(opened.shape(), &[3, 4]);
    assert_eq!(
        opened.view().to_vec::<f32>().unwrap(),
        (0..12).map(|i| i as f32).collect::<Vec<_>>()
    );
    // SAFETY: writable mapping of 12 f32s.
    unsafe {
        (opened.data_ptr_mut().unwrap() as *mut f32)
            .add(5)
            .write(-1.0)
    };
    // SAFETY: as above, through the creator's mapping.
    assert_eq!(unsafe { data.add(5).read() }, -1.0);
    drop(shared);
    assert!(exists(&handle), "the opener still holds a reference");
    drop(opened);
    assert!(!exists(&handle), "the last side removes the segment");
}

#[test]
fn export_copies_any_layout_once_and_flags_it() {
    let src =
        Tensor::from_elements((0..24i16).collect::<Vec<_>>(), &[4, 3], Some(&[1, -4]), 8).unwrap();
    let shared = shm::export(&src.view()).unwrap();
    let opened = shm::open(shared.handle(), Access::ReadOnly).unwrap();
    assert!(opened.flags().contains(Flags::IS_COPIED | Flags::READ_ONLY));
    assert!(opened.view().is_contiguous(Order::C));
    assert_eq!(
        opened.view().to_vec::<i16>().unwrap(),
        src.view().to_vec::<i16>().unwrap()
    );
    assert_eq!(opened.data_ptr_mut(), Err(Error::ReadOnly));
}

#[test]
fn handoff_passes_the_producers_reference_to_the_consumer() {
    let shared = shm::export(&Tensor::arange(5, DataType::U64).unwrap().view()).unwrap();
    let extra = shared.to_tensor();
    drop(extra);
    let handle = shared.handoff();
    assert!(
        exists(&handle),
        "a handed-over segment outlives its producer"
    );
    let opened = shm::open(&handle, Access::ReadWrite).unwrap();
    assert!(
        !exists(&handle),
        "the only holder's name is removed at once: no leak if it dies"
    );
    assert_eq!(opened.view().as_slice::<u64>().unwrap(), &[0, 1, 2, 3, 4]);
    drop(opened);
    assert!(!exists(&handle));
    assert_eq!(
        shm::open(&handle, Access::ReadOnly).unwrap_err(),
        Error::ShmNotFound(handle)
    );
}

#[test]
fn empty_and_zero_dim_tensors_travel() {
    let empty = shm::empty(&[0, 7], DataType::C128).unwrap();
    let opened = shm::open(empty.handle(), Access::ReadOnly).unwrap();
    assert_eq!((opened.shape(), opened.view().size()), (&[0i64, 7][..], 0));
    let scalar = shm::export(&Tensor::from_vec(vec![2.5f64], &[]).unwrap().view()).unwrap();
    let opened = shm::open(scalar.handle(), Access::ReadOnly).unwrap();
    assert_eq!(opened.view().to_vec::<f64>().unwrap(), [2.5]);
}

/// Writes raw bytes as a shared-memory object the way a broken or hostile producer might.
fn raw_segment(name: &str, bytes: &[u8]) {
    std::fs::write(Path::new("/dev/shm").join(name), bytes).unwrap();
}

#[test]
fn bad_segments_give_typed_errors_and_leave_nothing_mapped() {
    let name = format!("dlbridge-test-{}-bad", std::process::id());
    raw_segment(&name, b"short");
    assert!(
        matches!(shm::open(&name, Access::ReadOnly), Err(Error::ShmInvalid { reason, .. }) if reason.contains("truncated"))
    );
    raw_segment(&name, &[0u8; 4096]);
    assert!(
        matches!(shm::open(&name, Access::ReadOnly), Err(Error::ShmInvalid { reason, .. }) if reason.contains("magic"))
    );

    // A real segment, then corrupted copies of it.
    let good = shm::empty(&[2, 2], DataType::I32).unwrap();
    let bytes = std::fs::read(Path::new("/dev/shm").join(good.handle())).unwrap();
    let corrupt = |at: usize, value: &[u8]| {
        let mut b = bytes.clone();
        b[at..at + value.len()].copy_from_slice(value);
        raw_segment(&name, &b);
        shm::open(&name, Access::ReadWrite).unwrap_err()
    };
    // layout_version at 8, ndim at 12, dtype code at 32, device type at 36, data_len at 56,
    // the first shape entry at 72 (see the header layout)
    assert!(matches!(
        corrupt(8, &9u32.to_ne_bytes()),
        Error::ShmInvalid { .. }
    ));
    assert_eq!(
        corrupt(12, &5000u32.to_ne_bytes()),
        Error::NdimOutOfRange(5000)
    );
    assert_eq!(corrupt(32, &[99]), Error::UnknownDtypeCode(99));
    assert_eq!(
        corrupt(36, &2i32.to_ne_bytes()),
        Error::ShmInvalid {
            name: name.clone(),
            reason: "segments hold host memory only".into()
        }
    );
    assert!(matches!(
        corrupt(56, &u64::MAX.to_ne_bytes()),
        Error::ShmInvalid { .. }
    ));
    assert!(matches!(
        corrupt(72, &(-2i64).to_ne_bytes()),
        Error::NegativeDim { axis: 0, size: -2 }
    ));
    assert!(
        matches!(corrupt(72, &1000i64.to_ne_bytes()), Error::ShmInvalid { reason, .. } if reason.contains("outside"))
    );
    raw_segment(&name, &bytes[..bytes.len() - 1]);
    assert!(
        matches!(shm::open(&name, Access::ReadOnly), Err(Error::ShmInvalid { reason, .. }) if reason.contains("truncated"))
    );
    std::fs::remove_file(Path::new("/dev/shm").join(&name)).unwrap();

    for malformed in ["", ".", "..", ".hidden", "../etc/passwd", "a/b", "-x"] {
        assert_eq!(
            shm::open(malformed, Access::ReadOnly).unwrap_err(),
            Error::UnknownName {
                what: shm::HANDLE_WHAT,
                name: malformed.into()
            },
            "{malformed:?}"
        );
    }
    assert_eq!(
        shm::open("dlbridge-never-made", Access::ReadOnly).unwrap_err(),
        Error::ShmNotFound("dlbridge-never-made".into())
    );
}

#[test]
fn a_child_process_reads_and_writes_the_segment() {
    // The child is this test binary again, running only the helper test below.
    let shared = shm::export(&Tensor::arange(6, DataType::F64).unwrap().view()).unwrap();
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_process_helper", "--nocapture"])
        .env("DLBRIDGE_SHM_CHILD", shared.handle())
        .status()
        .unwrap();
    assert!(status.success());
    assert_eq!(
        shared.tensor().view().as_slice::<f64>().unwrap(),
        &[0., 1., 2., 3., 4., 15.]
    );
}

/// Runs only as the child of `a_child_process_reads_and_writes_the_segment`.
#[test]
fn child_process_helper() {
    let Ok(handle) = std::env::var("DLBRIDGE_SHM_CHILD") else {
        return;
    };
    let t = shm::open(&handle, Access::ReadWrite).unwrap();
    let sum: f64 = t.view().as_slice::<f64>().unwrap().iter().sum();
    // SAFETY: a writable mapping of 6 f64s.
    unsafe { (t.data_ptr_mut().unwrap() as *mut f64).add(5).write(sum) };
}

#[test]
fn reserve_keeps_a_segment_for_the_next_opener() {
    let shared = shm::empty(&[2], DataType::U8).unwrap();
    let handle = shared.handle().to_owned();
    shm::reserve(&handle).unwrap();
    drop(shared);
    assert!(exists(&handle), "reserved for a future opener");
    drop(shm::open(&handle, Access::ReadOnly).unwrap());
    assert!(
        !exists(&handle),
        "the opener that took the reservation released the last reference"
    );
}

//! Shared memory against a hostile peer of the same user, always a real second process: one
//! writes a segment's header while this one opens it (every open must either give a tensor that
//! fits the mapping or fail with a typed error — never a tensor reaching past the segment), one
//! tries to truncate or grow a segment this process has mapped (refused: no SIGBUS here).
#![cfg(target_os = "linux")]

use std::fs::OpenOptions;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use dlbridge::shm::{self, Access};
use dlbridge::{DataType, Error};

mod helper_process;
use helper_process::{helper_command, Helper};

/// Header offsets (see the segment layout in the shm module).
const NDIM_AT: usize = 12;
const DATA_OFFSET_AT: usize = 48;
const DATA_LEN_AT: usize = 56;
const SHAPE0_AT: usize = 96;

/// The file through which any same-user process reaches a segment: the creator's descriptor.
fn segment_path(handle: &str) -> String {
    let parts: Vec<&str> = handle.split('-').collect();
    format!("/proc/{}/fd/{}", parts[1], parts[2])
}

/// Opens a segment read-write the way a peer bypassing dlbridge would.
fn open_raw(handle: &str) -> std::fs::File {
    OpenOptions::new()
        .read(true)
        .write(true)
        .open(segment_path(handle))
        .unwrap()
}

/// Maps a segment read-write the way a peer bypassing dlbridge would: (base, length).
fn map_raw(handle: &str) -> (*mut u8, usize) {
    let file = open_raw(handle);
    let len = file.metadata().unwrap().len() as usize;
    // SAFETY: a fresh shared mapping of an open file of `len` bytes.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        )
    };
    assert_ne!(base, libc::MAP_FAILED);
    (base as *mut u8, len)
}

#[test]
fn opens_racing_a_header_writer_fit_the_mapping_or_fail_typed() {
    let shared = shm::empty(&[2, 3], DataType::F32).unwrap();
    let (writer, _) = Helper::spawn_printing(
        "header_writer_helper",
        "DLBRIDGE_SHM_HEADER_WRITER",
        shared.handle(),
        "helper: writing",
    );
    let (mut opened, mut refused) = (0u64, 0u64);
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(3) {
        match shm::open(shared.handle(), Access::ReadOnly) {
            Ok(t) => {
                let v = t.view();
                let span = v.byte_span();
                assert!(
                    span.len() <= 24,
                    "an open accepted shape {:?} strides {:?}: past the 24-byte data area",
                    v.shape(),
                    v.strides()
                );
                // Read every byte the layout reaches (zero strides may repeat elements many
                // times over): a tensor reaching past the mapping dies here.
                let touched: u32 = (span.start..span.end)
                    // SAFETY: inside the span the open validated for this mapping.
                    .map(|i| u32::from(unsafe { v.data_ptr().offset(i).read_volatile() }))
                    .sum();
                assert_eq!(touched, 0, "the segment was never written");
                opened += 1;
            }
            Err(
                Error::ShmInvalid { .. }
                | Error::NdimOutOfRange(_)
                | Error::NegativeDim { .. }
                | Error::ShapeOverflow { .. }
                | Error::StrideOverflow { .. },
            ) => refused += 1,
            Err(other) => panic!("untyped failure while racing a header writer: {other}"),
        }
    }
    drop(writer);
    assert!(
        opened > 0 && refused > 0,
        "both outcomes seen: {opened} opened, {refused} refused"
    );
    eprintln!("{opened} opens succeeded, {refused} refused while the header changed");
}

/// Runs only as the child of `opens_racing_a_header_writer_fit_the_mapping_or_fail_typed`:
/// flips `data_len`, `shape[0]`, `ndim` and `data_offset` between hostile and valid values in a
/// tight loop until killed.
#[test]
fn header_writer_helper() {
    let Ok(handle) = std::env::var("DLBRIDGE_SHM_HEADER_WRITER") else {
        return;
    };
    let (base, _) = map_raw(&handle);
    // SAFETY: every offset lies in the mapped header page; volatile writes of plain integers.
    let put64 = |at: usize, v: u64| unsafe { (base.add(at) as *mut u64).write_volatile(v) };
    // SAFETY: as above.
    let put32 = |at: usize, v: u32| unsafe { (base.add(at) as *mut u32).write_volatile(v) };
    let deadline = Instant::now() + Duration::from_secs(60);
    println!("helper: writing");
    let mut round = 0u64;
    while Instant::now() < deadline {
        round += 1;
        put64(DATA_LEN_AT, 1 << 40);
        put64(SHAPE0_AT, 1 << 30);
        if round % 3 == 0 {
            put32(NDIM_AT, 1 + (round % 5) as u32);
        }
        if round % 7 == 0 {
            put64(DATA_OFFSET_AT, 0);
        }
        std::hint::spin_loop();
        put64(DATA_OFFSET_AT, 4096);
        put32(NDIM_AT, 2);
        put64(SHAPE0_AT, 2);
        put64(DATA_LEN_AT, 24);
    }
}

#[test]
fn a_peer_cannot_truncate_or_grow_a_mapped_segment() {
    let shared = shm::empty(&[3, 1024], DataType::F32).unwrap();
    let data = shared.tensor().data_ptr() as *mut f32;
    // SAFETY: the segment holds 3072 writable f32s while `shared` lives.
    unsafe { (0..3072).for_each(|i| data.add(i).write(i as f32)) };
    let opened = shm::open(shared.handle(), Access::ReadOnly).unwrap();
    let status = helper_command(
        "truncator_helper",
        "DLBRIDGE_SHM_TRUNCATOR",
        shared.handle(),
    )
    .status()
    .unwrap();
    assert!(status.success(), "the truncating peer's checks failed");
    // Both mappings still read every page, and release normally.
    let expected: Vec<f32> = (0..3072).map(|i| i as f32).collect();
    assert_eq!(opened.view().to_vec::<f32>().unwrap(), expected);
    assert_eq!(shared.tensor().view().to_vec::<f32>().unwrap(), expected);
    drop(opened);
    drop(shared);
}

/// Runs only as the child of `a_peer_cannot_truncate_or_grow_a_mapped_segment`: opens the
/// segment behind dlbridge's back and tries to shrink it to nothing and to grow it.
#[test]
fn truncator_helper() {
    let Ok(handle) = std::env::var("DLBRIDGE_SHM_TRUNCATOR") else {
        return;
    };
    let file = open_raw(&handle);
    let len = file.metadata().unwrap().len();
    for size in [0, 100, len + 4096] {
        let err = file.set_len(size).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EPERM), "resizing to {size}");
    }
    // SAFETY: fallocate on our own descriptor; growing past the sealed size must fail.
    let grown = unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, (len + 4096) as libc::off_t) };
    assert_ne!(grown, 0, "growing with fallocate");
    assert_eq!(file.metadata().unwrap().len(), len);
}

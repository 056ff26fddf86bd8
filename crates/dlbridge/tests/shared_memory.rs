//! The shared-memory transport: zero-copy opens, one-copy exports, read-only mappings, typed
//! errors for bad segments and handles, and descriptors held exactly as long as needed.
#![cfg(target_os = "linux")]

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use dlbridge::shm::{self, Access, HANDLE_WHAT};
use dlbridge::{DataType, Error, Flags, Order, Tensor};

/// Whether the descriptor a handle names is still open in the process it names.
fn descriptor_open(handle: &str) -> bool {
    let parts: Vec<&str> = handle.split('-').collect();
    let path = format!("/proc/{}/fd/{}", parts[1], parts[2]);
    std::fs::read_link(path).is_ok_and(|target| {
        target
            .to_string_lossy()
            .starts_with(&format!("/memfd:dlbridge-{}", parts[3]))
    })
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
    assert!(descriptor_open(&handle));
    drop(shared);
    assert!(
        !descriptor_open(&handle),
        "the creator closed its descriptor"
    );
    assert_eq!(
        opened.view().to_vec::<f32>().unwrap()[5],
        -1.0,
        "the opener's mapping keeps the memory"
    );
    assert_eq!(
        shm::open(&handle, Access::ReadOnly).unwrap_err(),
        Error::ShmNotFound(handle.clone()),
        "a handle opens while its creator holds the segment"
    );
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

/// Whether process `pid` has ended (gone, or a zombie waiting to be reaped).
fn ended(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| {
        stat.rsplit(')')
            .next()
            .unwrap()
            .trim_start()
            .starts_with('Z')
    })
}

/// Waits up to five seconds for `condition`.
fn eventually(condition: impl Fn() -> bool) -> bool {
    (0..500).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(10));
        condition()
    })
}

#[test]
fn handoff_passes_the_producers_reference_to_the_consumer() {
    let shared = shm::export(&Tensor::arange(5, DataType::U64).unwrap().view()).unwrap();
    let extra = shared.to_tensor();
    drop(extra);
    let handle = shared.handoff();
    let keeper = handle.split('-').nth(1).unwrap().to_owned();
    assert_ne!(keeper, std::process::id().to_string(), "a keeper holds it");
    assert!(descriptor_open(&handle));
    let opened = shm::open(&handle, Access::ReadWrite).unwrap();
    assert_eq!(opened.view().as_slice::<u64>().unwrap(), &[0, 1, 2, 3, 4]);
    assert!(
        eventually(|| ended(&keeper)),
        "the consumer that took the hand-over ended the keeper"
    );
    drop(opened);
    assert_eq!(
        shm::open(&handle, Access::ReadOnly).unwrap_err(),
        Error::ShmNotFound(handle)
    );
}

#[test]
fn reserving_a_handed_over_segment_keeps_its_keeper() {
    let handle = shm::export(&Tensor::arange(2, DataType::U8).unwrap().view())
        .unwrap()
        .handoff();
    let keeper = handle.split('-').nth(1).unwrap().to_owned();
    shm::reserve(&handle).unwrap();
    assert!(!ended(&keeper), "the reservation kept the keeper");
    let opened = shm::open(&handle, Access::ReadOnly).unwrap();
    assert_eq!(opened.view().to_vec::<u8>().unwrap(), [0, 1]);
    assert!(eventually(|| ended(&keeper)), "the opener ended the keeper");
}

#[test]
fn a_handed_over_segment_outlives_its_exited_producer() {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "producer_helper", "--nocapture", "-q"])
        .env("DLBRIDGE_SHM_PRODUCER", "1")
        .output()
        .unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    let handle = stdout
        .lines()
        .find_map(|l| l.strip_prefix("handle: "))
        .unwrap()
        .to_owned();
    let opened = shm::open(&handle, Access::ReadOnly).unwrap();
    assert_eq!(opened.view().to_vec::<i32>().unwrap(), [0, 1, 2]);
    let keeper = handle.split('-').nth(1).unwrap().to_owned();
    assert!(eventually(|| ended(&keeper)));
}

/// Runs only as the child of `a_handed_over_segment_outlives_its_exited_producer`: hands a
/// segment over, prints the handle and exits.
#[test]
fn producer_helper() {
    if std::env::var("DLBRIDGE_SHM_PRODUCER").is_err() {
        return;
    }
    let shared = shm::export(&Tensor::arange(3, DataType::I32).unwrap().view()).unwrap();
    println!("handle: {}", shared.handoff());
}

#[test]
fn a_hand_over_nobody_opens_is_freed_when_its_keeper_times_out() {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "producer_helper", "--nocapture", "-q"])
        .env("DLBRIDGE_SHM_PRODUCER", "1")
        .env("DLBRIDGE_SHM_HANDOFF_SECONDS", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let handle = stdout
        .lines()
        .find_map(|l| l.strip_prefix("handle: "))
        .unwrap()
        .to_owned();
    let keeper = handle.split('-').nth(1).unwrap().to_owned();
    assert!(
        eventually(|| ended(&keeper)),
        "the keeper gave up after one second"
    );
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

/// Offset of the token in the header, and of the first shape entry after it.
const TOKEN_AT: usize = 72;
const SHAPE0_AT: usize = 80;

/// A memory file holding `bytes`, sealed like a segment when `sealed`, and a handle naming it
/// with the token its bytes carry (zero if they are too short): what a broken or hostile
/// producer could offer.
fn raw_segment(bytes: &[u8], sealed: bool) -> (OwnedFd, String) {
    let label = CString::new("dlbridge-raw").unwrap();
    // SAFETY: a valid C string.
    let fd =
        unsafe { libc::memfd_create(label.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING) };
    assert!(fd >= 0);
    // SAFETY: a fresh descriptor.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut file = std::fs::File::from(fd.try_clone().unwrap());
    std::io::Write::write_all(&mut file, bytes).unwrap();
    if sealed {
        let seals = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;
        // SAFETY: sealing our own file.
        let status = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, seals) };
        assert_eq!(status, 0);
    }
    let token = bytes
        .get(TOKEN_AT..TOKEN_AT + 8)
        .map_or(0, |t| u64::from_ne_bytes(t.try_into().unwrap()));
    let handle = format!(
        "dlbridge-{}-{}-{token:016x}",
        std::process::id(),
        fd.as_raw_fd()
    );
    (fd, handle)
}

#[test]
fn bad_segments_give_typed_errors_and_leave_nothing_mapped() {
    let (_fd, name) = raw_segment(b"short", true);
    assert!(
        matches!(shm::open(&name, Access::ReadOnly), Err(Error::ShmInvalid { reason, .. }) if reason.contains("truncated"))
    );
    let (_fd, name) = raw_segment(&[0u8; 4096], true);
    assert!(
        matches!(shm::open(&name, Access::ReadOnly), Err(Error::ShmInvalid { reason, .. }) if reason.contains("magic"))
    );

    // A real segment, then corrupted copies of it.
    let good = shm::empty(&[2, 2], DataType::I32).unwrap();
    let good_fd = good.handle().split('-').nth(2).unwrap().to_owned();
    let bytes = std::fs::read(format!("/proc/self/fd/{good_fd}")).unwrap();
    let (_fd, name) = raw_segment(&bytes, false);
    assert!(
        matches!(shm::open(&name, Access::ReadOnly), Err(Error::ShmInvalid { reason, .. }) if reason.contains("not sealed")),
        "a segment whose size is not sealed could be truncated under the mapping"
    );
    let corrupt = |at: usize, value: &[u8]| {
        let mut b = bytes.clone();
        b[at..at + value.len()].copy_from_slice(value);
        let (_fd, name) = raw_segment(&b, true);
        (
            name.clone(),
            shm::open(&name, Access::ReadWrite).unwrap_err(),
        )
    };
    // layout_version at 8, ndim at 12, dtype code at 32, device type at 36, data_len at 56,
    // the first shape entry at 80 (see the header layout)
    assert!(matches!(
        corrupt(8, &9u32.to_ne_bytes()).1,
        Error::ShmInvalid { .. }
    ));
    assert_eq!(
        corrupt(12, &5000u32.to_ne_bytes()).1,
        Error::NdimOutOfRange(5000)
    );
    assert_eq!(corrupt(32, &[99]).1, Error::UnknownDtypeCode(99));
    let (name, err) = corrupt(36, &2i32.to_ne_bytes());
    assert_eq!(
        err,
        Error::ShmInvalid {
            name,
            reason: "segments hold host memory only".into()
        }
    );
    assert!(matches!(
        corrupt(56, &u64::MAX.to_ne_bytes()).1,
        Error::ShmInvalid { .. }
    ));
    assert!(matches!(
        corrupt(SHAPE0_AT, &(-2i64).to_ne_bytes()).1,
        Error::NegativeDim { axis: 0, size: -2 }
    ));
    assert!(
        matches!(corrupt(SHAPE0_AT, &1000i64.to_ne_bytes()).1, Error::ShmInvalid { reason, .. } if reason.contains("outside"))
    );
    let (_fd, name) = raw_segment(&bytes[..bytes.len() - 1], true);
    assert!(
        matches!(shm::open(&name, Access::ReadOnly), Err(Error::ShmInvalid { reason, .. }) if reason.contains("truncated"))
    );
    // Another token: the descriptor slot holds some other segment, so this one is gone.
    let stale = format!("{}{:016x}", &good.handle()[..good.handle().len() - 16], 1);
    assert_eq!(
        shm::open(&stale, Access::ReadOnly).unwrap_err(),
        Error::ShmNotFound(stale)
    );
    // A plain file at the descriptor: not a segment.
    let plain = std::fs::File::open("/proc/self/stat").unwrap();
    let name = format!(
        "dlbridge-{}-{}-0000000000000001",
        std::process::id(),
        plain.as_raw_fd()
    );
    assert_eq!(
        shm::open(&name, Access::ReadOnly).unwrap_err(),
        Error::ShmNotFound(name)
    );

    for malformed in [
        "",
        ".",
        "..",
        ".hidden",
        "a/b",
        "-x",
        "../etc/passwd",
        "dlbridge-never-made",
        "dlbridge-1-2-3",
    ] {
        assert_eq!(
            shm::open(malformed, Access::ReadOnly).unwrap_err(),
            Error::UnknownName {
                what: HANDLE_WHAT,
                name: malformed.into()
            },
            "{malformed:?}"
        );
    }
    let gone = "dlbridge-999999999-3-00000000000000aa";
    assert_eq!(
        shm::open(gone, Access::ReadOnly).unwrap_err(),
        Error::ShmNotFound(gone.into())
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
    assert!(descriptor_open(&handle), "reserved for a future opener");
    drop(shm::open(&handle, Access::ReadOnly).unwrap());
    assert_eq!(
        shm::open(&handle, Access::ReadOnly).unwrap_err(),
        Error::ShmNotFound(handle.clone()),
        "the opener took the reservation and released the last reference"
    );
    assert!(
        !descriptor_open(&handle),
        "the reserved descriptor is closed"
    );
}

//! The shared-memory transport: zero-copy opens, one-copy exports, read-only mappings, typed
//! errors for bad segments and handles, and descriptors held exactly as long as needed.
#![cfg(target_os = "linux")]

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use dlbridge::shm::{self, Access, HANDLE_WHAT};
use dlbridge::{DataType, Error, Flags, Order, Tensor};

mod helper_process;
use helper_process::{helper_command, Helper};

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

/// A new segment holding `0, 1, …, n-1` as `dtype`, copied in by `shm::export`.
fn exported_arange(n: i64, dtype: DataType) -> shm::SharedTensor {
    shm::export(&Tensor::arange(n, dtype).unwrap().view()).unwrap()
}

/// The handle a producer helper printed (its line `handle: HANDLE`).
fn printed_handle(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("handle: "))
        .unwrap()
        .to_owned()
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
    let shared = exported_arange(5, DataType::U64);
    let extra = shared.to_tensor();
    drop(extra);
    let handle = shared.handoff().unwrap();
    let keeper = handle.split('-').nth(1).unwrap().to_owned();
    assert_ne!(keeper, std::process::id().to_string(), "a keeper holds it");
    assert!(descriptor_open(&handle));
    let opened = shm::open(&handle, Access::ReadWrite).unwrap();
    assert_eq!(opened.view().as_slice::<u64>().unwrap(), &[0, 1, 2, 3, 4]);
    assert!(
        !descriptor_open(&handle),
        "the consumer that took the hand-over had the keeper close its descriptor"
    );
    assert!(
        !ended(&keeper),
        "the keeper stays for this process's next hand-over"
    );
    assert_eq!(
        shm::open(&handle, Access::ReadOnly).unwrap_err(),
        Error::ShmNotFound(handle.clone()),
        "a hand-over opens once, even while its taker holds the segment"
    );
    drop(opened);
    assert_eq!(
        shm::open(&handle, Access::ReadOnly).unwrap_err(),
        Error::ShmNotFound(handle)
    );
}

#[test]
fn reserving_a_handed_over_segment_admits_one_more_opener() {
    let handle = exported_arange(2, DataType::U8).handoff().unwrap();
    shm::reserve(&handle).unwrap();
    let first = shm::open(&handle, Access::ReadOnly).unwrap();
    assert!(descriptor_open(&handle), "one hand-over still pending");
    let second = shm::open(&handle, Access::ReadOnly).unwrap();
    assert_eq!(second.view().to_vec::<u8>().unwrap(), [0, 1]);
    assert!(!descriptor_open(&handle), "both taken: the keeper let go");
    assert_eq!(
        shm::open(&handle, Access::ReadOnly).unwrap_err(),
        Error::ShmNotFound(handle.clone())
    );
    drop((first, second));
}

#[test]
fn racing_consumers_of_one_hand_over_exactly_one_wins() {
    for trial in 0..60 {
        let handle = exported_arange(3, DataType::I64).handoff().unwrap();
        let start = std::sync::Barrier::new(2);
        let results: Vec<_> = std::thread::scope(|s| {
            let racers: Vec<_> = (0..2)
                .map(|_| {
                    s.spawn(|| {
                        start.wait();
                        shm::open(&handle, Access::ReadOnly)
                    })
                })
                .collect();
            racers.into_iter().map(|r| r.join().unwrap()).collect()
        });
        let winners: Vec<_> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
        assert_eq!(winners.len(), 1, "trial {trial}: {results:?}");
        assert_eq!(winners[0].view().to_vec::<i64>().unwrap(), [0, 1, 2]);
        let loser = results.iter().find_map(|r| r.as_ref().err()).unwrap();
        assert_eq!(loser, &Error::ShmNotFound(handle.clone()), "trial {trial}");
    }
}

#[test]
fn hand_overs_share_one_keeper_that_runs_no_program() {
    let handles: Vec<String> = (0..200)
        .map(|i| exported_arange(i + 1, DataType::U32).handoff().unwrap())
        .collect();
    let keeper = handles[0].split('-').nth(1).unwrap().to_owned();
    assert!(
        handles
            .iter()
            .all(|h| h.split('-').nth(1) == Some(keeper.as_str())),
        "one keeper holds every pending hand-over of this process"
    );
    assert_eq!(
        std::fs::read_link(format!("/proc/{keeper}/exe")).unwrap(),
        std::fs::read_link("/proc/self/exe").unwrap(),
        "the keeper is a fork of this process, not a program found on PATH"
    );
    let status = std::fs::read_to_string(format!("/proc/{keeper}/status")).unwrap();
    let rss_kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    assert!(
        rss_kib < 16 * 1024,
        "the keeper let go of the producer's memory: {rss_kib} KiB"
    );
    for (i, handle) in handles.iter().enumerate() {
        let opened = shm::open(handle, Access::ReadOnly).unwrap();
        assert_eq!(opened.shape(), &[i as i64 + 1]);
        assert!(!descriptor_open(handle));
    }
    assert!(
        !ended(&keeper),
        "the keeper waits for this process's next hand-over"
    );
}

#[test]
fn a_killed_keeper_is_replaced_at_the_next_hand_over() {
    let first = exported_arange(1, DataType::U8).handoff().unwrap();
    let keeper: i32 = first.split('-').nth(1).unwrap().parse().unwrap();
    // SAFETY: kill takes a pid and a signal.
    assert_eq!(unsafe { libc::kill(keeper, libc::SIGKILL) }, 0);
    assert!(eventually(|| ended(&keeper.to_string())));
    assert_eq!(
        shm::open(&first, Access::ReadOnly).unwrap_err(),
        Error::ShmNotFound(first.clone()),
        "the killed keeper's hand-over is gone, and says so"
    );
    let second = exported_arange(2, DataType::U8).handoff().unwrap();
    assert_ne!(second.split('-').nth(1).unwrap(), keeper.to_string());
    let opened = shm::open(&second, Access::ReadOnly).unwrap();
    assert_eq!(opened.view().to_vec::<u8>().unwrap(), [0, 1]);
}

#[test]
fn a_hand_over_without_a_keeper_fails_loudly_and_leaks_nothing() {
    let out = helper_command("no_keeper_helper", "DLBRIDGE_SHM_NO_KEEPER", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("hand-over refused"), "{stdout}");
}

/// Runs only as the child of `a_hand_over_without_a_keeper_fails_loudly_and_leaks_nothing`:
/// with no descriptor left for the keeper's socket, the hand-over must fail (not return a
/// handle that dies with this process), and the segment must be released.
#[test]
fn no_keeper_helper() {
    if std::env::var("DLBRIDGE_SHM_NO_KEEPER").is_err() {
        return;
    }
    let shared = exported_arange(4, DataType::U8);
    let creator = shared.handle().to_owned();
    // Every descriptor number up to the limit taken: the keeper's socket cannot be made.
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit read and write one rlimit.
    unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
    let highest = std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok()?.parse::<u64>().ok())
        .max()
        .unwrap();
    let lowered = libc::rlimit {
        rlim_cur: highest + 1,
        rlim_max: limit.rlim_max,
    };
    // SAFETY: as above.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lowered) }, 0);
    let mut fill = Vec::new();
    while let Ok(f) = std::fs::File::open("/dev/null") {
        fill.push(f);
    }
    let result = shared.handoff();
    drop(fill);
    // SAFETY: as above.
    unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) };
    match result {
        Err(Error::ShmIo {
            op: "hand over", ..
        }) => {}
        other => panic!("expected a failed hand-over, got {other:?}"),
    }
    assert!(
        !descriptor_open(&creator),
        "the refused segment was released"
    );
    println!("hand-over refused");
}

#[test]
fn a_hand_over_needs_no_path() {
    let dir = std::env::temp_dir().join(format!("dlbridge-no-path-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let planted = dir.join("sleep");
    let marker = dir.join("ran");
    std::fs::write(&planted, format!("#!/bin/sh\ntouch {}\n", marker.display())).unwrap();
    std::fs::set_permissions(
        &planted,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    for path in ["", "."] {
        let out = helper_command("producer_helper", "DLBRIDGE_SHM_PRODUCER", "1")
            .env("PATH", path)
            .current_dir(&dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "PATH={path:?}");
        let handle = printed_handle(&out);
        let opened = shm::open(&handle, Access::ReadOnly).unwrap();
        assert_eq!(
            opened.view().to_vec::<i32>().unwrap(),
            [0, 1, 2],
            "PATH={path:?}"
        );
    }
    assert!(
        !marker.exists(),
        "nothing was run from the current directory"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_handed_over_segment_outlives_its_exited_producer() {
    let out = helper_command("producer_helper", "DLBRIDGE_SHM_PRODUCER", "1")
        .output()
        .unwrap();
    assert!(out.status.success());
    let handle = printed_handle(&out);
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
    let shared = exported_arange(3, DataType::I32);
    println!("handle: {}", shared.handoff().unwrap());
}

#[test]
fn a_hand_over_nobody_opens_is_freed_when_its_keeper_times_out() {
    let out = helper_command("producer_helper", "DLBRIDGE_SHM_PRODUCER", "1")
        .env("DLBRIDGE_SHM_HANDOFF_SECONDS", "1")
        .output()
        .unwrap();
    let handle = printed_handle(&out);
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
const SHAPE0_AT: usize = 96;

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
    // the first shape entry at 96 (see the header layout)
    assert!(matches!(
        corrupt(8, &9u32.to_ne_bytes()).1,
        Error::ShmInvalid { .. }
    ));
    assert_eq!(
        corrupt(12, &5000u32.to_ne_bytes()).1,
        Error::NdimOutOfRange(5000)
    );
    assert_eq!(corrupt(32, &[99]).1, Error::UnknownDtypeCode(99));
    let (name, err) = corrupt(36, &10i32.to_ne_bytes());
    assert_eq!(
        err,
        Error::ShmInvalid {
            name,
            reason: "segments hold host or CUDA memory only".into()
        }
    );
    // A CUDA segment has no data pages: this one's are where its segment should end.
    assert!(
        matches!(corrupt(36, &2i32.to_ne_bytes()).1, Error::ShmInvalid { reason, .. } if reason.contains("does not fit"))
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
    let shared = exported_arange(6, DataType::F64);
    let status = helper_command(
        "child_process_helper",
        "DLBRIDGE_SHM_CHILD",
        shared.handle(),
    )
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

#[test]
fn a_read_only_opener_that_writes_anyway_changes_only_its_own_copy() {
    let shared = exported_arange(4, DataType::U8);
    let out = helper_command(
        "careless_writer_helper",
        "DLBRIDGE_SHM_CARELESS",
        shared.handle(),
    )
    .output()
    .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "the writer survived ({:?}): {stdout}",
        out.status
    );
    assert!(stdout.contains("own copy: [9, 1, 2, 3]"), "{stdout}");
    assert_eq!(
        shared.tensor().view().as_slice::<u8>().unwrap(),
        &[0, 1, 2, 3],
        "the segment is intact"
    );
}

/// Runs only as the child of `a_read_only_opener_that_writes_anyway_changes_only_its_own_copy`:
/// writes through a read-only tensor's pointer, as a consumer that ignores READ_ONLY does.
#[test]
fn careless_writer_helper() {
    let Ok(handle) = std::env::var("DLBRIDGE_SHM_CARELESS") else {
        return;
    };
    let t = shm::open(&handle, Access::ReadOnly).unwrap();
    assert!(t.flags().contains(Flags::READ_ONLY));
    // SAFETY: deliberately ignores READ_ONLY (what the test is about); 4 mapped bytes.
    unsafe { t.data_ptr().write_volatile(9) };
    println!("own copy: {:?}", t.view().to_vec::<u8>().unwrap());
}

#[test]
fn a_read_only_mapping_follows_the_segment_until_it_writes() {
    let shared = shm::empty(&[2], DataType::U8).unwrap();
    let ro = shm::open(shared.handle(), Access::ReadOnly).unwrap();
    // SAFETY: the creator's mapping holds 2 writable bytes.
    unsafe { shared.tensor().data_ptr().add(1).write(7) };
    assert_eq!(ro.view().to_vec::<u8>().unwrap(), [0, 7]);
}

#[test]
fn a_segment_the_system_cannot_back_is_an_allocation_failure() {
    let huge = [1i64 << 40];
    assert!(matches!(
        Tensor::empty(&huge, DataType::U8),
        Err(Error::AllocationFailed(_))
    ));
    assert!(matches!(
        shm::empty(&huge, DataType::U8),
        Err(Error::AllocationFailed(_))
    ));
}

#[test]
fn opening_a_leased_segment_fails_at_once() {
    let (holder, handle) =
        Helper::spawn_printing("lease_holder_helper", "DLBRIDGE_SHM_LEASE", "1", "handle: ");
    let (sender, receiver) = std::sync::mpsc::channel();
    let opener = handle.clone();
    std::thread::spawn(move || {
        let started = std::time::Instant::now();
        let _ = sender.send((shm::open(&opener, Access::ReadOnly), started.elapsed()));
    });
    let outcome = receiver.recv_timeout(std::time::Duration::from_secs(10));
    drop(holder);
    let (result, took) = outcome.expect("the open waited for the lease to break");
    match result {
        Err(Error::ShmIo {
            op: "open", reason, ..
        }) => assert!(reason.contains("lease"), "{reason}"),
        other => panic!("expected a typed open error, got {other:?}"),
    }
    assert!(took < std::time::Duration::from_secs(1), "{took:?}");
}

/// Runs only as the child of `opening_a_leased_segment_fails_at_once`: holds a read lease on a
/// size-sealed memory file and prints a handle naming it.
#[test]
fn lease_holder_helper() {
    if std::env::var("DLBRIDGE_SHM_LEASE").is_err() {
        return;
    }
    let (fd, _) = raw_segment(&[0u8; 8192], true);
    let reader = std::fs::File::open(format!("/proc/self/fd/{}", fd.as_raw_fd())).unwrap();
    drop(fd);
    // SAFETY: ignoring SIGIO (the lease-break notice) and taking a read lease on our own file.
    unsafe {
        libc::signal(libc::SIGIO, libc::SIG_IGN);
        assert_eq!(
            libc::fcntl(reader.as_raw_fd(), libc::F_SETLEASE, libc::F_RDLCK),
            0
        );
    }
    println!(
        "handle: dlbridge-{}-{}-{:016x}",
        std::process::id(),
        reader.as_raw_fd(),
        0
    );
    std::thread::sleep(std::time::Duration::from_secs(60));
}

//! Segments cannot outlive their holders: a process killed with SIGKILL takes its segment with
//! it, and `shm::sweep` removes the named segments of earlier layouts that nobody holds — never
//! one a live process maps or whose creator still runs.
#![cfg(target_os = "linux")]

use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::Command;

use dlbridge::shm::{self, Access};
use dlbridge::{DataType, Error};

mod helper_process;
use helper_process::Helper;

#[test]
fn a_segment_dies_with_its_killed_creator() {
    let (mut creator, handle) =
        Helper::spawn_printing("creator_helper", "DLBRIDGE_SHM_CREATOR", "1", "helper: ");
    let opened = shm::open(&handle, Access::ReadOnly).unwrap();
    assert_eq!(opened.view().to_vec::<u32>().unwrap(), [7, 7, 7, 7]);
    drop(opened);
    creator.0.kill().unwrap(); // SIGKILL: no destructor, no cleanup code runs
    creator.0.wait().unwrap();
    assert_eq!(
        shm::open(&handle, Access::ReadOnly).unwrap_err(),
        Error::ShmNotFound(handle.clone()),
        "nothing holds the segment any more: the kernel freed it"
    );
    assert!(!std::fs::read_dir("/dev/shm")
        .unwrap()
        .flatten()
        .any(|e| e.file_name().to_string_lossy().contains(&handle)));
}

/// Runs only as the child of `a_segment_dies_with_its_killed_creator`: makes a segment, prints
/// its handle and waits to be killed.
#[test]
fn creator_helper() {
    if std::env::var("DLBRIDGE_SHM_CREATOR").is_err() {
        return;
    }
    let shared = shm::empty(&[4], DataType::U32).unwrap();
    let data = shared.tensor().data_ptr() as *mut u32;
    // SAFETY: the segment holds 4 writable u32s.
    unsafe { (0..4).for_each(|i| data.add(i).write(7)) };
    println!("helper: {}", shared.handle());
    std::thread::sleep(std::time::Duration::from_secs(60));
}

/// The bytes of a named segment as dlbridge's first layout wrote it: magic, version 1, a header.
fn legacy_bytes() -> Vec<u8> {
    let mut bytes = vec![0u8; 8192];
    bytes[..8].copy_from_slice(b"DLBRIDGE");
    bytes[8..12].copy_from_slice(&1u32.to_ne_bytes());
    bytes
}

/// Writes a named segment of the first layout.
fn legacy_segment(name: &str) -> String {
    let path = format!("/dev/shm/{name}");
    std::fs::write(&path, legacy_bytes()).unwrap();
    path
}

#[test]
fn sweep_removes_only_unheld_segments_of_dead_creators() {
    let mut exited = Command::new("true").spawn().unwrap();
    let dead = exited.id();
    exited.wait().unwrap();
    let me = std::process::id();
    let orphan = legacy_segment(&format!("dlbridge-{dead}-0-0000abcd"));
    // The holder makes this one itself: a sweep running in another test's process at any
    // moment must never find it unheld.
    let mapped = format!("/dev/shm/dlbridge-{dead}-1-0000abcd");
    let creator_alive = legacy_segment(&format!("dlbridge-{me}-2-0000abcd"));
    let not_ours = "/dev/shm/dlbridge-other-program".to_owned();
    std::fs::write(&not_ours, b"DLBRIDGE").unwrap();
    let (holder, ready) =
        Helper::spawn_printing("mapper_helper", "DLBRIDGE_SHM_MAPPER", &mapped, "helper: ");
    assert_eq!(ready, "mapped");

    // (Another test's process may sweep at the same time: check the files, not the count.)
    shm::sweep().unwrap();
    assert!(
        !Path::new(&orphan).exists(),
        "dead creator, no holder: removed"
    );
    assert!(Path::new(&mapped).exists(), "a live process maps it: kept");
    assert!(Path::new(&creator_alive).exists(), "its creator runs: kept");
    assert!(
        Path::new(&not_ours).exists(),
        "not a dlbridge segment name: kept"
    );

    drop(holder);
    shm::sweep().unwrap();
    assert!(!Path::new(&mapped).exists());
    for path in [creator_alive, not_ours] {
        std::fs::remove_file(path).unwrap();
    }
}

/// Runs only as the child of `sweep_removes_only_unheld_segments_of_dead_creators`: makes the
/// named segment (holding it from the start), maps it and holds it until killed.
#[test]
fn mapper_helper() {
    let Ok(path) = std::env::var("DLBRIDGE_SHM_MAPPER") else {
        return;
    };
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)
        .unwrap();
    std::io::Write::write_all(&mut file, &legacy_bytes()).unwrap();
    // SAFETY: a fresh shared read-only mapping of one page of an open file.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        )
    };
    assert_ne!(base, libc::MAP_FAILED);
    drop(file);
    println!("helper: mapped");
    std::thread::sleep(std::time::Duration::from_secs(60));
}

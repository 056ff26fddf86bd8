//! CUDA tensors through shared memory, against the stand-in driver (`tests/fake-cuda`), whose
//! device memory is host memory in memory files that live as the driver's would: the copy into
//! shareable device memory, the hand-over through the keeper, the consumer's zero-copy mapping
//! in another process, its device found by UUID, read-only mappings, and every allocation,
//! context and descriptor given back, also when a consumer is killed or the producer exits
//! first. Real GPUs run `bindings/python/tests/test_cuda_shared_memory.py`.
#![cfg(target_os = "linux")]

#[path = "../../../tests/fake-cuda/driver.rs"]
mod fake_driver;
mod helper_process;

use std::os::fd::FromRawFd;
use std::os::unix::fs::MetadataExt;

use dlbridge::shm::{self, Access};
use dlbridge::{Device, DeviceType, Error, Flags, Tensor};
use fake_driver::{cuda_tensor, driver};
use helper_process::{helper_command, Helper};

/// `0, 1, …, n-1` as f32.
fn arange(n: usize) -> Vec<f32> {
    (0..n).map(|i| i as f32).collect()
}

/// The values of a float32 CUDA tensor of the stand-in driver (its memory is the host's).
fn values(t: &Tensor) -> Vec<f32> {
    let v = t.view();
    let (shape, strides) = (v.shape(), v.strides());
    let mut out = Vec::new();
    let mut index = vec![0i64; shape.len()];
    let count: i64 = shape.iter().product();
    for _ in 0..count {
        let offset: i64 = index.iter().zip(strides).map(|(i, s)| i * s).sum();
        // SAFETY: a validated layout over memory the tensor keeps mapped.
        out.push(unsafe { (v.data_ptr() as *const f32).offset(offset as isize).read() });
        for d in (0..shape.len()).rev() {
            index[d] += 1;
            if index[d] < shape[d] {
                break;
            }
            index[d] = 0;
        }
    }
    out
}

/// The inode of the stand-in's memory file mapped at `address` in this process.
fn allocation_inode(address: usize) -> u64 {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    maps.lines()
        .find_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (start, end) = fields[0].split_once('-')?;
            let range =
                usize::from_str_radix(start, 16).ok()?..usize::from_str_radix(end, 16).ok()?;
            (range.contains(&address) && line.contains("fake-cuda-vmm"))
                .then(|| fields[4].parse().unwrap())
        })
        .expect("the device memory is a mapping of the stand-in's memory file")
}

/// The processes that map the memory file `inode` or hold a descriptor of it.
fn holders(inode: u64) -> Vec<u32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
        let mapped = maps.lines().any(|line| {
            line.contains("fake-cuda-vmm")
                && line.split_whitespace().nth(4) == Some(&inode.to_string())
        });
        let held = std::fs::read_dir(format!("/proc/{pid}/fd"))
            .map(|fds| {
                fds.flatten().any(|fd| {
                    std::fs::read_link(fd.path())
                        .is_ok_and(|t| t.to_string_lossy().contains("fake-cuda-vmm"))
                        && std::fs::metadata(fd.path()).is_ok_and(|m| m.ino() == inode)
                })
            })
            .unwrap_or(false);
        if mapped || held {
            pids.push(pid);
        }
    }
    pids
}

/// Waits up to five seconds for `condition`.
fn eventually(condition: impl Fn() -> bool) -> bool {
    (0..500).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(10));
        condition()
    })
}

/// A 3x4 float32 CUDA tensor on device 1, copied into shareable device memory and handed over.
fn handed_over() -> String {
    let t = cuda_tensor(arange(12), &[3, 4], &[4, 1], 1);
    shm::export(&t.view()).unwrap().handoff().unwrap()
}

#[test]
fn a_cuda_tensor_reaches_another_process_in_the_same_device_memory() {
    let (fake, _serial) = driver();
    let (producer, handle) = Helper::spawn_printing(
        "producer_helper",
        "DLBRIDGE_CUDA_PRODUCER",
        "stay",
        "handle: ",
    );
    let keeper = handle.split('-').nth(1).unwrap().to_owned();
    assert_ne!(
        keeper,
        producer.0.id().to_string(),
        "the handle names the keeper"
    );
    let opened = shm::open(&handle, Access::ReadWrite).unwrap();
    assert_eq!(
        opened.device(),
        Device {
            kind: DeviceType::Cuda,
            id: 1
        }
    );
    assert_eq!(
        (opened.shape(), opened.strides()),
        (&[3i64, 4][..], &[4i64, 1][..])
    );
    assert!(opened.flags().contains(Flags::IS_COPIED));
    assert!(!opened.flags().contains(Flags::READ_ONLY));
    assert_eq!(values(&opened), arange(12));
    let inode = allocation_inode(opened.data_ptr() as usize);
    let producer_pid = producer.0.id();
    assert!(
        holders(inode).contains(&producer_pid),
        "the producer still maps it"
    );
    // The consumer's writes reach the producer's mapping: one memory.
    // SAFETY: a writable mapping of 12 f32s.
    unsafe { (opened.data_ptr() as *mut f32).add(2).write(-7.0) };
    drop(producer);
    assert!(
        eventually(|| holders(inode) == [std::process::id()]),
        "the producer exited and the keeper let go: {:?}",
        holders(inode)
    );
    assert_eq!(
        values(&opened)[2],
        -7.0,
        "the consumer's mapping keeps the memory"
    );
    let calls = fake.calls();
    for call in [
        "cuMemImportFromShareableHandle",
        "cuMemSetAccess device=1 flags=3",
    ] {
        assert!(calls.iter().any(|c| c == call), "{call} in {calls:?}");
    }
    drop(opened);
    assert!(
        eventually(|| holders(inode).is_empty()),
        "nobody holds it any more"
    );
    assert_eq!(fake.live_allocations(), 0);
    assert_eq!(fake.held(), (0, 0, 0), "contexts released");
    assert_eq!(
        shm::open(&handle, Access::ReadOnly).unwrap_err(),
        Error::ShmNotFound(handle),
        "a hand-over opens once"
    );
}

/// Runs only as a child of the tests here: hands a CUDA tensor over, prints the handle, and
/// with `stay` keeps its own copy until killed; with `hold`, prints the segment's own handle
/// instead of handing it over, and waits to be killed.
#[test]
fn producer_helper() {
    let Ok(mode) = std::env::var("DLBRIDGE_CUDA_PRODUCER") else {
        return;
    };
    let _fake = driver();
    let t = cuda_tensor(arange(12), &[3, 4], &[4, 1], 1);
    let shared = shm::export(&t.view()).unwrap();
    if mode == "hold" {
        println!("handle: {}", shared.handle());
        std::thread::sleep(std::time::Duration::from_secs(60));
    }
    let mine = shared.to_tensor();
    println!("handle: {}", shared.handoff().unwrap());
    if mode == "stay" {
        std::thread::sleep(std::time::Duration::from_secs(60));
    }
    drop(mine);
}

#[test]
fn only_the_process_a_handle_names_is_asked_for_device_memory() {
    let (_fake, _serial) = driver();
    let (holder, handle) = Helper::spawn_printing(
        "producer_helper",
        "DLBRIDGE_CUDA_PRODUCER",
        "hold",
        "handle: ",
    );
    // This process takes the abstract name a keeper of the holder would listen on, as another
    // process (of any user) can.
    // SAFETY: socket, bind and listen on a fresh descriptor owned below; the address is a live
    // local of the length given.
    let squatter = unsafe {
        let fd = libc::socket(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0);
        let squatter = std::os::fd::OwnedFd::from_raw_fd(fd);
        let mut address: libc::sockaddr_un = std::mem::zeroed();
        address.sun_family = libc::AF_UNIX as libc::sa_family_t;
        let name = format!("dlbridge-keeper-{}", holder.0.id());
        for (i, b) in name.bytes().enumerate() {
            address.sun_path[i + 1] = b as libc::c_char;
        }
        let len = std::mem::size_of::<libc::sa_family_t>() + 1 + name.len();
        let bound = libc::bind(
            fd,
            (&address as *const libc::sockaddr_un).cast(),
            len as u32,
        );
        assert_eq!(bound, 0);
        assert_eq!(libc::listen(fd, 4), 0);
        squatter
    };
    let err = shm::open(&handle, Access::ReadOnly).unwrap_err();
    assert!(
        matches!(&err, Error::ShmIo { reason, .. } if reason.contains("another process")),
        "{err}"
    );
    drop(squatter);
}

#[test]
fn the_producer_may_exit_before_the_consumer_opens() {
    let (fake, _serial) = driver();
    let out = helper_command("producer_helper", "DLBRIDGE_CUDA_PRODUCER", "exit")
        .output()
        .unwrap();
    assert!(out.status.success());
    let handle = String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("handle: "))
        .unwrap()
        .to_owned();
    let opened = shm::open(&handle, Access::ReadOnly).unwrap();
    assert!(opened.flags().contains(Flags::READ_ONLY));
    assert_eq!(values(&opened), arange(12));
    assert!(
        fake.calls()
            .iter()
            .any(|c| c == "cuMemSetAccess device=1 flags=3"),
        "mapped read-write all the same: a device write to a read-only mapping is a fatal fault"
    );
    let inode = allocation_inode(opened.data_ptr() as usize);
    drop(opened);
    assert!(eventually(|| holders(inode).is_empty()));
}

/// Runs only as a child: opens the handle in `DLBRIDGE_CUDA_CONSUMER` and prints what it got
/// (the device and the values, or the error), then with `DLBRIDGE_CUDA_HOLD` waits to be killed.
#[test]
fn consumer_helper() {
    let Ok(handle) = std::env::var("DLBRIDGE_CUDA_CONSUMER") else {
        return;
    };
    if std::env::var("DLBRIDGE_CUDA_NO_DRIVER").is_err() {
        let _fake = driver();
    }
    match shm::open(&handle, Access::ReadOnly) {
        Ok(t) => {
            println!("opened: {} {:?}", t.device(), values(&t));
            if std::env::var("DLBRIDGE_CUDA_HOLD").is_ok() {
                std::thread::sleep(std::time::Duration::from_secs(60));
            }
        }
        Err(e) => println!("error: {e:?}"),
    }
}

/// What a consumer helper printed.
fn consumer_says(handle: &str, env: &[(&str, &str)]) -> String {
    let mut command = helper_command("consumer_helper", "DLBRIDGE_CUDA_CONSUMER", handle);
    command.envs(env.iter().copied());
    let out = command.output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find(|l| l.starts_with("opened: ") || l.starts_with("error: "))
        .unwrap_or_else(|| panic!("the consumer printed nothing: {out:?}"))
        .to_owned()
}

#[test]
fn the_consumer_finds_the_device_by_its_uuid_whatever_its_number() {
    let (_fake, _serial) = driver();
    let handle = handed_over();
    let said = consumer_says(&handle, &[("FAKE_CUDA_DEVICE_ORDER", "reversed")]);
    assert_eq!(said, format!("opened: cuda:0 {:?}", arange(12)));
}

#[test]
fn a_consumer_that_cannot_map_the_memory_gets_a_typed_error_and_leaves_the_hand_over() {
    let (fake, _serial) = driver();
    let handle = handed_over();
    let said = consumer_says(&handle, &[("FAKE_CUDA_MACHINE", "b")]);
    assert!(
        said.starts_with("error: ShmInvalid")
            && said.contains("GPU-")
            && said.contains("does not see"),
        "{said}"
    );
    let said = consumer_says(&handle, &[("DLBRIDGE_CUDA_NO_DRIVER", "1")]);
    assert!(said.starts_with("error: ShmInvalid"), "{said}");
    let opened = shm::open(&handle, Access::ReadOnly).unwrap();
    assert_eq!(
        values(&opened),
        arange(12),
        "the hand-over waited for a consumer that can map it"
    );
    drop(opened);
    assert_eq!(fake.live_allocations(), 0);
}

#[test]
fn a_killed_consumer_releases_what_it_held() {
    let (_fake, _serial) = driver();
    let handle = handed_over();
    let mut command = helper_command("consumer_helper", "DLBRIDGE_CUDA_CONSUMER", &handle);
    command.env("DLBRIDGE_CUDA_HOLD", "1");
    let (consumer, said) = Helper::spawn_printing_with(command, "opened: ");
    assert_eq!(said, format!("cuda:1 {:?}", arange(12)));
    let pid = consumer.0.id();
    let inode = (0..500)
        .find_map(|_| {
            std::thread::sleep(std::time::Duration::from_millis(10));
            mapped_inode(pid)
        })
        .expect("the consumer maps the memory");
    assert!(
        eventually(|| holders(inode) == [pid]),
        "{:?}",
        holders(inode)
    );
    drop(consumer);
    assert!(
        eventually(|| holders(inode).is_empty()),
        "{:?}",
        holders(inode)
    );
}

/// The inode of the stand-in's memory file that process `pid` maps, if it maps one.
fn mapped_inode(pid: u32) -> Option<u64> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    maps.lines()
        .find(|line| line.contains("fake-cuda-vmm"))
        .and_then(|line| line.split_whitespace().nth(4)?.parse().ok())
}

#[test]
fn dense_layouts_keep_their_strides_and_others_arrive_c_contiguous() {
    let (fake, _serial) = driver();
    // A transposed 3x4 (dense): one copy, strides kept.
    let t = cuda_tensor(arange(12), &[4, 3], &[1, 4], 0);
    let handle = shm::export(&t.view()).unwrap().handoff().unwrap();
    let opened = shm::open(&handle, Access::ReadOnly).unwrap();
    assert_eq!(opened.strides(), &[1, 4]);
    assert_eq!(values(&opened), values(&t));
    let copies: Vec<String> = fake
        .calls()
        .into_iter()
        .filter(|c| c.starts_with("cuMemcpy"))
        .collect();
    assert_eq!(
        copies,
        ["cuMemcpyDtoDAsync bytes=48 stream=legacy device=0"]
    );
    assert!(fake
        .calls()
        .iter()
        .any(|c| c == "cuStreamSynchronize stream=legacy device=0"));
    // Every other element of each row of a 3x8: each element is a row of a 2-D copy, one copy
    // per row of the tensor.
    fake.clear_log();
    let t = cuda_tensor(arange(24), &[3, 4], &[8, 2], 0);
    let handle = shm::export(&t.view()).unwrap().handoff().unwrap();
    let opened2 = shm::open(&handle, Access::ReadOnly).unwrap();
    assert_eq!(opened2.strides(), &[4, 1]);
    assert_eq!(values(&opened2), values(&t));
    let copies = fake
        .calls()
        .into_iter()
        .filter(|c| c.starts_with("cuMemcpy"))
        .count();
    assert_eq!(copies, 3, "one 2-D copy per row");
    // A column block of a 2x3x5 (contiguous rows of 2 elements).
    let t = cuda_tensor(arange(30), &[2, 3, 2], &[15, 5, 1], 0);
    let handle = shm::export(&t.view()).unwrap().handoff().unwrap();
    let opened3 = shm::open(&handle, Access::ReadOnly).unwrap();
    assert_eq!(values(&opened3), values(&t));
    drop((opened, opened2, opened3));
    assert_eq!(fake.live_allocations(), 0);
}

#[test]
fn size_one_dimensions_take_no_part_whatever_their_strides() {
    let (fake, _serial) = driver();
    // Every other element of 3 rows of 8, with a size-1 axis of stride 0 in between (what
    // `a[:, None, ::2]` gives) and one of a negative stride at the end.
    let t = cuda_tensor(arange(24), &[3, 1, 4, 1], &[8, 0, 2, -5], 0);
    let handle = shm::export(&t.view()).unwrap().handoff().unwrap();
    let opened = shm::open(&handle, Access::ReadOnly).unwrap();
    assert_eq!(opened.strides(), &[4, 4, 1, 1]);
    assert_eq!(values(&opened), values(&t));
    let copies = fake
        .calls()
        .into_iter()
        .filter(|c| c.starts_with("cuMemcpy2DAsync"))
        .count();
    assert_eq!(copies, 3);
    drop(opened);
    assert_eq!(fake.live_allocations(), 0);
}

#[test]
fn reserving_a_handed_over_cuda_segment_admits_one_more_opener() {
    let (fake, _serial) = driver();
    let handle = handed_over();
    shm::reserve(&handle).unwrap();
    let first = shm::open(&handle, Access::ReadOnly).unwrap();
    let second = shm::open(&handle, Access::ReadWrite).unwrap();
    assert_eq!(values(&second), arange(12));
    // SAFETY: a writable mapping of 12 f32s.
    unsafe { (second.data_ptr() as *mut f32).write(9.0) };
    assert_eq!(values(&first)[0], 9.0, "both map the same memory");
    assert_eq!(
        shm::open(&handle, Access::ReadOnly).unwrap_err(),
        Error::ShmNotFound(handle)
    );
    drop((first, second));
    assert_eq!(fake.live_allocations(), 0);
}

#[test]
fn broadcast_and_negative_strides_are_refused_by_name() {
    let (fake, _serial) = driver();
    for strides in [[0i64, 1], [-4, 1]] {
        let t = cuda_tensor(arange(12), &[3, 4], &strides, 0);
        let err = shm::export(&t.view()).unwrap_err();
        assert!(
            matches!(&err, Error::UnsupportedLayout(m) if m.contains(&format!("{strides:?}")) && m.contains("contiguous")),
            "{err}"
        );
    }
    assert_eq!(fake.live_allocations(), 0);
}

#[test]
fn a_cuda_segment_opens_only_through_its_hand_over() {
    let (fake, _serial) = driver();
    let t = cuda_tensor(arange(4), &[4], &[1], 0);
    let shared = shm::export(&t.view()).unwrap();
    let err = shm::open(shared.handle(), Access::ReadOnly).unwrap_err();
    assert!(
        matches!(&err, Error::ShmInvalid { reason, .. } if reason.contains("hand-over")),
        "{err}"
    );
    assert_eq!(
        values(shared.tensor()),
        arange(4),
        "the creator's own mapping works"
    );
    drop(shared);
    assert_eq!(fake.live_allocations(), 0);
    assert_eq!(fake.held(), (0, 0, 0));
}

#[test]
fn a_driver_failure_is_typed_and_leaks_nothing() {
    let (fake, _serial) = driver();
    let t = cuda_tensor(arange(4), &[4], &[1], 0);
    fake.fail_next(c"cuMemCreate", 2);
    let err = shm::export(&t.view()).unwrap_err();
    assert!(
        matches!(
            &err,
            Error::CudaDriver {
                call: "cuMemCreate",
                code: 2,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(fake.live_allocations(), 0);
    assert_eq!(fake.held(), (0, 0, 0));
}

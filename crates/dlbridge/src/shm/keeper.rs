//! Keepers: small processes that hold a handed-over segment for its consumer, so that a producer
//! may exit before the consumer opens the handle.
//!
//! A segment lives only while some process holds its descriptor or a mapping. When a producer
//! hands a segment over ([`super::SharedTensor::handoff`]), a keeper — the system's `sleep`,
//! started with the segment's descriptor and nothing else, so it holds no copy of the producer's
//! memory — takes that role and the handle names it. The consumer that takes the last pending
//! hand-over ends the keeper; a handle nobody opens is freed when the keeper's time runs out
//! ([`handoff_seconds`]), so even an abandoned hand-over does not leak.

use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

/// How long a keeper waits for its consumer: `DLBRIDGE_SHM_HANDOFF_SECONDS`, default 600.
pub fn handoff_seconds() -> u64 {
    std::env::var("DLBRIDGE_SHM_HANDOFF_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|&s| s > 0)
        .unwrap_or(600)
}

/// The `argv[0]` a keeper of the segment with `token` runs under (what a consumer checks before
/// ending it).
fn keeper_name(token: u64) -> String {
    format!("dlbridge-shm-keeper-{token:016x}")
}

/// Starts a keeper holding `fd` under the same descriptor number; returns its process id. A
/// thread of this process reaps it when it ends.
pub(super) fn spawn(fd: BorrowedFd<'_>, token: u64) -> std::io::Result<u32> {
    let n = fd.as_raw_fd();
    let mut command = Command::new("sleep");
    command
        .arg0(keeper_name(token))
        .arg(handoff_seconds().to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: the hook runs in the forked child before exec and only makes calls that are
    // async-signal-safe (close_range, fcntl, sigemptyset, pthread_sigmask); it allocates nothing
    // and touches no locks.
    unsafe {
        command.pre_exec(move || {
            // Every other descriptor closes at exec (best effort: close_range needs Linux 5.11;
            // descriptors that are not close-on-exec are rare and only delay their own EOF).
            let cloexec = libc::CLOSE_RANGE_CLOEXEC as libc::c_uint;
            if n > 3 {
                libc::syscall(libc::SYS_close_range, 3u32, (n - 1) as u32, cloexec);
            }
            libc::syscall(libc::SYS_close_range, (n + 1) as u32, u32::MAX, cloexec);
            if libc::fcntl(n, libc::F_SETFD, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // Hosts block signals in their threads (Julia blocks SIGTERM, SIGINT, ...); the
            // keeper starts with none blocked, so that it ends like any process.
            let mut none: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut none);
            libc::pthread_sigmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
            Ok(())
        })
    };
    let mut child = command.spawn()?;
    let pid = child.id();
    std::thread::Builder::new()
        .name("dlbridge-keeper-reaper".into())
        .spawn(move || child.wait())?;
    Ok(pid)
}

/// Ends the keeper `pid` of the segment with `token`, if that process is one: called by the
/// consumer that took the last pending hand-over. `pidfd`, where the system has them, pins the
/// process that was checked (otherwise a plain `kill` follows the check at once).
pub(super) fn end(pid: u32, pidfd: Option<&OwnedFd>, token: u64) {
    let expected = keeper_name(token);
    let is_keeper = std::fs::read(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|cmdline| cmdline.split(|&b| b == 0).next() == Some(expected.as_bytes()));
    if !is_keeper {
        return;
    }
    match pidfd {
        Some(pidfd) => {
            // SAFETY: signals the process the pidfd refers to (never a reused process id); a
            // process that already exited makes this fail harmlessly.
            let sent = unsafe {
                libc::syscall(
                    libc::SYS_pidfd_send_signal,
                    pidfd.as_raw_fd(),
                    libc::SIGKILL,
                    std::ptr::null::<libc::siginfo_t>(),
                    0u32,
                )
            };
            if sent == 0 {
                // Wait (briefly) until it has exited, so that the handle stops opening before
                // this open returns.
                let mut exited = libc::pollfd {
                    fd: pidfd.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: polls one valid pollfd; a pidfd turns readable when its process exits.
                unsafe { libc::poll(&mut exited, 1, 1000) };
            }
        }
        None => {
            // SAFETY: kill takes a pid and a signal; the process was a keeper a moment ago.
            if unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) } == 0 {
                let gone = || {
                    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| {
                        stat.rsplit(')')
                            .next()
                            .is_some_and(|s| s.trim_start().starts_with('Z'))
                    })
                };
                for _ in 0..1000 {
                    if gone() {
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
            }
        }
    }
}

/// A pidfd for `pid`, pinning that process while its descriptor is checked.
pub(super) fn pidfd(pid: u32) -> Option<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let raw = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0u32) };
    let raw = i32::try_from(raw).ok().filter(|&fd| fd >= 0)?;
    // SAFETY: a fresh descriptor that nothing else owns.
    Some(unsafe { std::os::fd::FromRawFd::from_raw_fd(raw) })
}

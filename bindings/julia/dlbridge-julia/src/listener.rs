//! Julia's signal-listener thread, parked so that it cannot take the host's signals.
//!
//! Julia's start creates a thread that waits (`sigtimedwait`) for SIGINT, SIGTERM, SIGABRT,
//! SIGQUIT and SIGUSR1, which Julia blocks everywhere else. The host unblocks them again, but a
//! signal sent to the process may still be handed to that waiting thread (always, while the
//! host's threads block it), which then runs Julia's action instead of the host's: SIGUSR1 never
//! reaches Python's handler, SIGABRT or SIGQUIT end the process through Julia. Right after the
//! start, the listener is sent a signal whose handler never returns: it waits, every signal
//! blocked, until the process exits, so the kernel never picks it for a signal again. Julia's
//! profiler (`Profile`), which is driven by that thread, does not run.

use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Whether the listener has entered [`park`].
static PARKED: AtomicBool = AtomicBool::new(false);

/// How long the listener is given to start waiting, and then to enter [`park`].
const WAIT: Duration = Duration::from_secs(2);

/// The kernel ids of this process's threads.
pub(crate) fn thread_ids() -> Vec<i32> {
    std::fs::read_dir("/proc/self/task")
        .map(|entries| {
            entries
                .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Parks the thread among those not in `before` that waits in `rt_sigtimedwait` (Julia's
/// listener); returns whether one was parked.
pub(crate) fn park_listener(before: &[i32]) -> bool {
    let deadline = Instant::now() + WAIT;
    let listener = loop {
        let waiting = thread_ids()
            .into_iter()
            .filter(|tid| !before.contains(tid))
            .find(|&tid| in_sigtimedwait(tid));
        match waiting {
            Some(tid) => break tid,
            None if Instant::now() >= deadline => return false,
            None => std::thread::sleep(Duration::from_millis(1)),
        }
    };
    // SIGRTMAX: a signal neither Julia nor usual hosts use, and unblocked in the listener (it
    // blocks only the signals it waits for). Its action is the host's again afterwards.
    let signal = libc::SIGRTMAX();
    // SAFETY: sigaction with a zeroed action plus a handler of the plain signature; the host's
    // action is read first and put back below; tgkill names a thread of this process.
    unsafe {
        let mut parking: libc::sigaction = std::mem::zeroed();
        parking.sa_sigaction = park as extern "C" fn(c_int) as usize;
        libc::sigfillset(&mut parking.sa_mask);
        let mut host: libc::sigaction = std::mem::zeroed();
        libc::sigaction(signal, &parking, &mut host);
        libc::syscall(
            libc::SYS_tgkill,
            libc::getpid(),
            listener,
            signal as libc::c_long,
        );
        let deadline = Instant::now() + WAIT;
        while !PARKED.load(Ordering::SeqCst) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        libc::sigaction(signal, &host, std::ptr::null_mut());
    }
    PARKED.load(Ordering::SeqCst)
}

/// Whether thread `tid` of this process is blocked in the `rt_sigtimedwait` system call.
fn in_sigtimedwait(tid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/self/task/{tid}/syscall")).is_ok_and(|text| {
        text.split_whitespace().next().and_then(|n| n.parse().ok())
            == Some(libc::SYS_rt_sigtimedwait)
    })
}

/// The handler the listener is parked in: it never returns, and waits with every signal
/// blocked, so no signal is ever delivered to that thread again.
extern "C" fn park(_: c_int) {
    PARKED.store(true, Ordering::SeqCst);
    // SAFETY: sigfillset and sigsuspend are async-signal-safe and only touch the local set.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        loop {
            libc::sigsuspend(&all);
        }
    }
}

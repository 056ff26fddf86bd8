//! `fork()` after Julia started: the child never uses Julia, nor reaches the parent's memory.
//!
//! Julia's code generator writes the machine code it compiles through a descriptor of
//! `/proc/self/mem`, opened once in the process that started Julia. A forked child inherits that
//! descriptor, which still names the *parent's* memory: code the child compiled would be written
//! into the parent. Julia (its threads, its locks, its event loop) does not survive a fork
//! anyway, so a child refuses every call ([`crate::Error::Forked`]); and so that nothing in the
//! child can write into the parent even by accident, the fork handler points that descriptor
//! at the child's own memory before the child runs any code.

use std::ffi::c_int;
use std::sync::atomic::{AtomicI32, Ordering};

/// The descriptor of `/proc/<pid>/mem` that Julia opened, found just before each fork (-1: none).
static MEM_FD: AtomicI32 = AtomicI32::new(-1);

/// Installs the fork handlers (once, when Julia has started).
pub(crate) fn install() {
    // SAFETY: both handlers are `extern "C"` functions living as long as the process.
    unsafe { libc::pthread_atfork(Some(before_fork), None, Some(in_child)) };
}

/// In the parent, before the fork: finds the descriptor Julia writes its code through.
extern "C" fn before_fork() {
    let own = format!("/proc/{}/mem", std::process::id());
    let found = std::fs::read_dir("/proc/self/fd").ok().and_then(|entries| {
        entries.flatten().find_map(|entry| {
            let target = std::fs::read_link(entry.path()).ok()?;
            (target.as_os_str() == own.as_str())
                .then(|| entry.file_name().to_str()?.parse::<c_int>().ok())
                .flatten()
        })
    });
    MEM_FD.store(found.unwrap_or(-1), Ordering::SeqCst);
}

/// In the child, before it runs anything else: the descriptor now names the child's memory.
extern "C" fn in_child() {
    let fd = MEM_FD.load(Ordering::SeqCst);
    if fd < 0 {
        return;
    }
    // SAFETY: open, dup3 and close are async-signal-safe; `fd` is the inherited descriptor,
    // replaced atomically by dup3 (keeping its close-on-exec flag).
    unsafe {
        let own = libc::open(
            c"/proc/self/mem".as_ptr(),
            libc::O_RDWR | libc::O_SYNC | libc::O_CLOEXEC,
        );
        if own >= 0 {
            libc::dup3(own, fd, libc::O_CLOEXEC);
            libc::close(own);
        } else {
            // No memory file for the child: no write through `fd` may reach the parent.
            let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
            if null >= 0 {
                libc::dup3(null, fd, libc::O_CLOEXEC);
                libc::close(null);
            }
        }
    }
}

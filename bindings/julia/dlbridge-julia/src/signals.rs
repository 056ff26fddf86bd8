//! Julia's signal handlers, scoped to Julia's own code: the host keeps every signal it had.
//!
//! Julia needs its SIGSEGV handler (on an alternate signal stack) to turn a stack overflow into
//! a `StackOverflowError`; without it a deep recursion kills the host. Julia is therefore started
//! with its handlers installed, and right after its start every signal's action and the thread's
//! signal mask are put back as the host had them, except:
//! - SIGSEGV, which goes to a dispatcher: a fault on Julia's thread while Julia code runs there
//!   goes to Julia's handler, any other fault to the host's previous action (Python's
//!   `faulthandler`, or the default action: a core dump);
//! - SIGUSR2, which Julia uses to suspend its thread (it installs that handler even when told
//!   not to handle signals).

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, Ordering};

/// The signals whose actions are saved before Julia starts and put back afterwards.
const RESTORED: std::ops::RangeInclusive<c_int> = 1..=31;

/// Julia's SIGSEGV action, taken over after its start (leaked: read by the signal handler).
static JULIA_ACTION: AtomicPtr<libc::sigaction> = AtomicPtr::new(std::ptr::null_mut());
/// The host's SIGSEGV action from before Julia started (leaked, as above).
static HOST_ACTION: AtomicPtr<libc::sigaction> = AtomicPtr::new(std::ptr::null_mut());
/// The kernel thread id of Julia's thread.
static JULIA_TID: AtomicI32 = AtomicI32::new(0);
/// Whether Julia code is running on Julia's thread (set around every entry into Julia).
static IN_JULIA: AtomicBool = AtomicBool::new(false);

/// The host's signal actions and mask, saved before Julia starts.
pub(crate) struct HostSignals {
    actions: Vec<(c_int, libc::sigaction)>,
    mask: libc::sigset_t,
}

impl HostSignals {
    /// Saves the actions of signals 1 to 31 and this thread's mask.
    pub(crate) fn save() -> HostSignals {
        let mut actions = Vec::new();
        for sig in RESTORED {
            if sig == libc::SIGKILL || sig == libc::SIGSTOP {
                continue;
            }
            // SAFETY: a zeroed sigaction is a valid out-parameter; a NULL new action only reads.
            unsafe {
                let mut old: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(sig, std::ptr::null(), &mut old) == 0 {
                    actions.push((sig, old));
                }
            }
        }
        // SAFETY: a NULL new set only reads this thread's mask into `mask`.
        let mask = unsafe {
            let mut mask: libc::sigset_t = std::mem::zeroed();
            libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut mask);
            mask
        };
        HostSignals { actions, mask }
    }

    /// Puts the host's actions and mask back after Julia's start, keeping Julia's SIGUSR2 and
    /// routing SIGSEGV through [`on_segv`].
    pub(crate) fn restore(self) {
        // SAFETY: sigaction and pthread_sigmask with actions and a mask read from the kernel
        // before; the leaked actions stay valid for the process's life, as the handler reads them.
        unsafe {
            for (sig, action) in &self.actions {
                match *sig {
                    libc::SIGUSR2 => {}
                    libc::SIGSEGV => {
                        let mut julia: libc::sigaction = std::mem::zeroed();
                        libc::sigaction(libc::SIGSEGV, std::ptr::null(), &mut julia);
                        HOST_ACTION.store(Box::into_raw(Box::new(*action)), Ordering::SeqCst);
                        JULIA_ACTION.store(Box::into_raw(Box::new(julia)), Ordering::SeqCst);
                        JULIA_TID.store(libc::gettid(), Ordering::SeqCst);
                        let mut dispatcher: libc::sigaction = std::mem::zeroed();
                        dispatcher.sa_sigaction = on_segv
                            as extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void)
                            as usize;
                        dispatcher.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
                        libc::sigemptyset(&mut dispatcher.sa_mask);
                        libc::sigaction(libc::SIGSEGV, &dispatcher, std::ptr::null_mut());
                    }
                    _ => {
                        libc::sigaction(*sig, action, std::ptr::null_mut());
                    }
                }
            }
            libc::pthread_sigmask(libc::SIG_SETMASK, &self.mask, std::ptr::null_mut());
        }
    }
}

/// Marks Julia code as running on Julia's thread while it lives (entries do not nest: Julia
/// never calls back into this crate).
pub(crate) struct InJulia(());

impl InJulia {
    pub(crate) fn enter() -> InJulia {
        IN_JULIA.store(true, Ordering::SeqCst);
        InJulia(())
    }
}

impl Drop for InJulia {
    fn drop(&mut self) {
        IN_JULIA.store(false, Ordering::SeqCst);
    }
}

/// The SIGSEGV dispatcher: Julia's handler for faults in Julia code on Julia's thread (a stack
/// overflow becomes a `StackOverflowError` there), the host's previous action otherwise.
extern "C" fn on_segv(sig: c_int, info: *mut libc::siginfo_t, context: *mut c_void) {
    // SAFETY: gettid is async-signal-safe; the actions were leaked before this handler was
    // installed and are never freed.
    unsafe {
        let ours =
            IN_JULIA.load(Ordering::SeqCst) && libc::gettid() == JULIA_TID.load(Ordering::SeqCst);
        let action = if ours { &JULIA_ACTION } else { &HOST_ACTION };
        forward(&*action.load(Ordering::SeqCst), sig, info, context);
    }
}

/// Runs `action` for a signal being handled.
///
/// # Safety
/// Called from a signal handler with the kernel's `info` and `context`.
unsafe fn forward(
    action: &libc::sigaction,
    sig: c_int,
    info: *mut libc::siginfo_t,
    context: *mut c_void,
) {
    let handler = action.sa_sigaction;
    if handler == libc::SIG_DFL || handler == libc::SIG_IGN {
        // The default action: a real fault happens again on return and kills the process as
        // if nothing had been installed; a signal sent with kill() is raised again (it stays
        // pending until this handler returns).
        // SAFETY: sigaction, raise and the siginfo read are async-signal-safe.
        unsafe {
            let mut default: libc::sigaction = std::mem::zeroed();
            default.sa_sigaction = libc::SIG_DFL;
            libc::sigaction(sig, &default, std::ptr::null_mut());
            if (*info).si_code <= 0 {
                libc::raise(sig);
            }
        }
    } else if action.sa_flags & libc::SA_SIGINFO != 0 {
        // SAFETY: an SA_SIGINFO action's handler has this signature.
        let handler: extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void) =
            unsafe { std::mem::transmute(handler) };
        handler(sig, info, context);
    } else {
        // SAFETY: a plain action's handler takes the signal number only.
        let handler: extern "C" fn(c_int) = unsafe { std::mem::transmute(handler) };
        handler(sig);
    }
}

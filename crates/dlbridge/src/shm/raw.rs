//! System calls made without the C library, for the keeper process: once it has unmapped
//! everything it inherited from its producer, only code that touches no C-library state (no
//! `errno`, no locks, no heap) may run there. Each call is one system-call instruction and
//! returns the kernel's value: a result, or `-errno`.

/// Makes system call `number` with up to six arguments.
///
/// # Safety
/// The arguments are valid for that system call (pointers point at what it reads or writes).
#[inline(always)]
pub(super) unsafe fn syscall(number: libc::c_long, args: [usize; 6]) -> isize {
    let ret: isize;
    // SAFETY: the caller's contract; the kernel clobbers rcx and r11 and nothing else.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        core::arch::asm!(
            "syscall",
            inlateout("rax") number as isize => ret,
            in("rdi") args[0],
            in("rsi") args[1],
            in("rdx") args[2],
            in("r10") args[3],
            in("r8") args[4],
            in("r9") args[5],
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    // SAFETY: the caller's contract; the kernel returns in x0 and preserves the other registers.
    #[cfg(target_arch = "aarch64")]
    unsafe {
        core::arch::asm!(
            "svc 0",
            in("x8") number,
            inlateout("x0") args[0] as isize => ret,
            in("x1") args[1],
            in("x2") args[2],
            in("x3") args[3],
            in("x4") args[4],
            in("x5") args[5],
            options(nostack),
        );
    }
    ret
}

/// Moves the stack pointer to `stack_top` and calls `entry(a, b, c)`, which never returns.
///
/// # Safety
/// `stack_top` is the 16-byte-aligned end of writable memory large enough for `entry`'s frames,
/// and nothing still running uses the old stack.
pub(super) unsafe fn run_on_stack(
    stack_top: usize,
    entry: extern "C" fn(usize, usize, usize) -> !,
    a: usize,
    b: usize,
    c: usize,
) -> ! {
    // SAFETY: the caller's contract; `call` pushes the return address, leaving the stack aligned
    // as the C ABI expects at a function's entry.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        core::arch::asm!(
            "mov rsp, {top}",
            "call {entry}",
            top = in(reg) stack_top,
            entry = in(reg) entry,
            in("rdi") a,
            in("rsi") b,
            in("rdx") c,
            options(noreturn),
        );
    }
    // SAFETY: the caller's contract (`blr` leaves the stack as it is, aligned).
    #[cfg(target_arch = "aarch64")]
    unsafe {
        core::arch::asm!(
            "mov sp, {top}",
            "blr {entry}",
            top = in(reg) stack_top,
            entry = in(reg) entry,
            in("x0") a,
            in("x1") b,
            in("x2") c,
            options(noreturn),
        );
    }
}

/// This thread's thread pointer (the C library's per-thread block, which also holds the area the
/// kernel updates on every return to user space when restartable sequences are registered).
pub(super) fn thread_pointer() -> usize {
    let tp: usize;
    // SAFETY: on x86_64 Linux the first word of the thread control block points at itself.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        core::arch::asm!("mov {}, qword ptr fs:[0]", out(reg) tp, options(nostack, readonly));
    }
    // SAFETY: reads the thread-pointer register.
    #[cfg(target_arch = "aarch64")]
    unsafe {
        core::arch::asm!("mrs {}, tpidr_el0", out(reg) tp, options(nostack, nomem));
    }
    tp
}

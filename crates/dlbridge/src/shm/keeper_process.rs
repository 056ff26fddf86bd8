//! The keeper process itself: what runs in the child that [`super::keeper`] forks.
//!
//! The child is a copy of the producer, so before it keeps anything it lets go of everything it
//! inherited: it moves to a stack of its own, closes every descriptor but its control socket,
//! resets every signal handler, leaves the producer's session, and unmaps every mapping but the
//! files of its own code and of the C library, its thread block and the vDSO: the producer's
//! heap, stacks, tensors, other segments and other libraries go. From then on it makes system
//! calls only through [`super::raw`].
//!
//! Protocol on the control socket (`SOCK_SEQPACKET`): the keeper first sends its process id
//! (`u32`). Each hand-over is one message carrying the segment's descriptor (`SCM_RIGHTS`), then
//! for a CUDA segment the descriptor sharing its device memory, and the seconds it may wait for
//! its consumer (`u64`); the keeper answers with the segment descriptor's number in the keeper
//! (`i32`), or `-errno`. The keeper closes a segment's descriptors once it has no pending
//! hand-over (read from the segment's header with `pread`) or its time is up: it checks at least
//! once a second while it holds any, and at once when a consumer connects to its abstract socket
//! `dlbridge-keeper-<pid>`. A consumer sends one request there
//! ([`super::keeper::REQUEST_LEN`] bytes): for a held descriptor number and the token its
//! segment's header carries, the keeper answers `1` with a duplicate of the device memory's
//! descriptor attached, or `0` if it holds no such CUDA segment; for -1 (a consumer that took a
//! hand-over, see [`super::keeper::release_taken`]) it releases first, then answers `1`. It exits
//! when the producer (every copy of the other end of the socket) is gone and it holds nothing.

use super::raw::{run_on_stack, syscall, thread_pointer};

/// Bytes of the keeper's own stack.
const STACK_LEN: usize = 256 * 1024;
/// Descriptors one keeper holds at most (its table is mapped lazily: untouched slots cost
/// nothing).
const CAPACITY: usize = 1 << 16;
/// Bytes read from `/proc/self/maps` at most.
const MAPS_LEN: usize = 16 << 20;
/// How often (seconds) the keeper checks its descriptors while it holds any.
const CHECK_SECONDS: u64 = 1;
/// How long (milliseconds) the keeper waits for a connected consumer's request.
const REQUEST_MILLISECONDS: i64 = 200;

/// One held segment: its descriptor, the one sharing its device memory (-1 for host segments),
/// and its deadline (seconds on the monotonic clock).
#[repr(C)]
struct Slot {
    fd: i32,
    device: i32,
    deadline: u64,
}

/// Runs in the first child of a fork (no other threads, a copy of the producer's memory): forks
/// the keeper, which is adopted by the system once this child exits at once. Never returns.
///
/// # Safety
/// Called only right after a fork, in the child; `control` is the keeper's end of the control
/// socket.
pub(super) unsafe fn start(control: i32) -> ! {
    // SAFETY: a plain fork (the keeper's exit signal is SIGCHLD, for whichever process adopts
    // it); no pointers.
    let pid = unsafe { syscall(libc::SYS_clone, [libc::SIGCHLD as usize, 0, 0, 0, 0, 0]) };
    if pid == 0 {
        // SAFETY: a fresh private mapping; no pointers in.
        let stack = unsafe { map_anonymous(STACK_LEN) };
        if stack > 0 {
            // SAFETY: the new stack is STACK_LEN writable bytes and page-aligned; nothing uses
            // the inherited stack after the switch.
            unsafe {
                run_on_stack(
                    stack as usize + STACK_LEN,
                    keep,
                    control as usize,
                    stack as usize,
                    thread_pointer(),
                )
            }
        }
        exit(1)
    }
    exit(if pid > 0 { 0 } else { 1 })
}

/// Ends this process with `code`.
fn exit(code: i32) -> ! {
    loop {
        // SAFETY: exit_group takes a status and ends the process.
        unsafe { syscall(libc::SYS_exit_group, [code as usize, 0, 0, 0, 0, 0]) };
    }
}

/// A new private, zero-filled read-write mapping of `len` bytes (not charged to the commit
/// limit), or `-errno`.
///
/// # Safety
/// None beyond the system call's own checks.
unsafe fn map_anonymous(len: usize) -> isize {
    let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE;
    // SAFETY: a fresh anonymous mapping at an address the kernel picks.
    unsafe {
        syscall(
            libc::SYS_mmap,
            [
                0,
                len,
                (libc::PROT_READ | libc::PROT_WRITE) as usize,
                flags as usize,
                usize::MAX,
                0,
            ],
        )
    }
}

/// Seconds on the monotonic clock.
fn now() -> u64 {
    let mut ts = [0i64; 2];
    // SAFETY: clock_gettime fills a `timespec` (two 64-bit words on 64-bit Linux).
    unsafe {
        syscall(
            libc::SYS_clock_gettime,
            [
                libc::CLOCK_MONOTONIC as usize,
                ts.as_mut_ptr() as usize,
                0,
                0,
                0,
                0,
            ],
        )
    };
    ts[0].max(0) as u64
}

/// Closes descriptor `fd`.
fn close(fd: i32) {
    if fd >= 0 {
        // SAFETY: closing a descriptor number; no pointers.
        unsafe { syscall(libc::SYS_close, [fd as usize, 0, 0, 0, 0, 0]) };
    }
}

/// Sends `bytes` on socket `fd` without waiting and without SIGPIPE.
fn send(fd: i32, bytes: &[u8]) {
    let flags = (libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT) as usize;
    // SAFETY: sendto reads `bytes.len()` bytes from `bytes`; no address.
    unsafe {
        syscall(
            libc::SYS_sendto,
            [
                fd as usize,
                bytes.as_ptr() as usize,
                bytes.len(),
                flags,
                0,
                0,
            ],
        )
    };
}

/// The keeper's main loop, on its own stack at `[stack, stack + STACK_LEN)`; `thread` is the
/// thread pointer of the thread that forked.
extern "C" fn keep(control: usize, stack: usize, thread: usize) -> ! {
    let control = control as i32;
    detach(control);
    unmap_inherited(stack, stack + STACK_LEN, thread);
    // SAFETY: a fresh anonymous mapping for the table; no pointers in.
    let table = unsafe { map_anonymous(CAPACITY * std::mem::size_of::<Slot>()) };
    if table <= 0 {
        exit(1);
    }
    let table = table as *mut Slot;
    // SAFETY: getpid has no arguments.
    let pid = unsafe { syscall(libc::SYS_getpid, [0; 6]) } as u32;
    send(control, &pid.to_ne_bytes());
    let listener = listen(pid);
    let mut held = 0usize;
    let mut producer_gone = false;
    let mut checked = now();
    loop {
        if producer_gone && held == 0 {
            exit(0);
        }
        let mut polled = [
            libc::pollfd {
                fd: if producer_gone { -1 } else { control },
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: listener,
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        let timeout = [CHECK_SECONDS as i64, 0];
        let timeout = if held == 0 {
            0
        } else {
            timeout.as_ptr() as usize
        };
        // SAFETY: ppoll reads and writes the two pollfds and reads the timespec (none: wait
        // until an event); no signal mask.
        let ready = unsafe {
            syscall(
                libc::SYS_ppoll,
                [polled.as_mut_ptr() as usize, 2, timeout, 0, 8, 0],
            )
        };
        if ready > 0 && polled[0].revents != 0 {
            match receive(control) {
                // A CUDA segment opens only through the keeper's socket: without one, its
                // hand-over could never be taken.
                Received::Descriptor(fd, device, _) if device >= 0 && listener < 0 => {
                    close(fd);
                    close(device);
                    send(control, &(-libc::EADDRINUSE).to_ne_bytes());
                }
                Received::Descriptor(fd, device, seconds) if held < CAPACITY => {
                    let deadline = now().saturating_add(seconds);
                    // SAFETY: slot `held` lies inside the table (held < CAPACITY).
                    unsafe {
                        table.add(held).write(Slot {
                            fd,
                            device,
                            deadline,
                        })
                    };
                    held += 1;
                    send(control, &fd.to_ne_bytes());
                }
                Received::Descriptor(fd, device, _) => {
                    close(fd);
                    close(device);
                    send(control, &(-libc::EMFILE).to_ne_bytes());
                }
                Received::Malformed => send(control, &(-libc::EINVAL).to_ne_bytes()),
                Received::Nothing => {}
                Received::Closed => producer_gone = true,
            }
        }
        if ready > 0 && polled[1].revents != 0 {
            answer_consumers(listener, table, &mut held);
        }
        if now() >= checked.saturating_add(CHECK_SECONDS) || producer_gone {
            checked = now();
            // SAFETY: the first `held` slots are initialised and inside the table.
            held = unsafe { release(table, held) };
        }
    }
}

/// Leaves the producer's session and working directory, resets every signal handler (the
/// producer's handlers are unmapped below) and unblocks every signal, ignores SIGPIPE, closes
/// every descriptor but `control`, and raises the descriptor limit to its maximum.
fn detach(control: i32) {
    // SAFETY: none of these calls reads or writes memory but the local arrays and the
    // NUL-terminated path passed to it.
    unsafe {
        syscall(libc::SYS_setsid, [0; 6]);
        syscall(libc::SYS_chdir, [c"/".as_ptr() as usize, 0, 0, 0, 0, 0]);
        let default = [0u64; 4];
        let ignore = [libc::SIG_IGN as u64, 0, 0, 0];
        for signal in 1..=64usize {
            if signal == libc::SIGKILL as usize || signal == libc::SIGSTOP as usize {
                continue;
            }
            let action = if signal == libc::SIGPIPE as usize {
                &ignore
            } else {
                &default
            };
            syscall(
                libc::SYS_rt_sigaction,
                [signal, action.as_ptr() as usize, 0, 8, 0, 0],
            );
        }
        let none = 0u64;
        syscall(
            libc::SYS_rt_sigprocmask,
            [
                libc::SIG_SETMASK as usize,
                &none as *const u64 as usize,
                0,
                8,
                0,
                0,
            ],
        );
        let control = control as u32;
        let ranges = [(0, control.checked_sub(1)), (control + 1, Some(u32::MAX))];
        for (first, last) in ranges {
            let Some(last) = last else {
                continue;
            };
            let done = syscall(
                libc::SYS_close_range,
                [first as usize, last as usize, 0, 0, 0, 0],
            );
            if done != 0 {
                // No close_range (Linux < 5.9): close what a process usually has.
                for fd in first..last.min(65_536) {
                    close(fd as i32);
                }
            }
        }
        let mut limit = [0u64; 2];
        if syscall(
            libc::SYS_prlimit64,
            [
                0,
                libc::RLIMIT_NOFILE as usize,
                0,
                limit.as_mut_ptr() as usize,
                0,
                0,
            ],
        ) == 0
        {
            limit[0] = limit[1];
            syscall(
                libc::SYS_prlimit64,
                [
                    0,
                    libc::RLIMIT_NOFILE as usize,
                    limit.as_ptr() as usize,
                    0,
                    0,
                    0,
                ],
            );
        }
    }
}

/// Unmaps every mapping inherited from the producer except the files of this code and of the
/// C library (whose `memset`/`memcpy` compiled code may call, and which read the library's
/// data), the system's vDSO pages, this process's stack `[keep_start, keep_end)` and the mapping
/// holding the thread block at `thread` (the kernel writes this thread's restartable-sequence
/// area there, and kills a process whose area is gone).
fn unmap_inherited(keep_start: usize, keep_end: usize, thread: usize) {
    // SAFETY: a fresh anonymous mapping; no pointers in.
    let buffer = unsafe { map_anonymous(MAPS_LEN) };
    if buffer <= 0 {
        exit(1);
    }
    let buffer = buffer as usize;
    let path = c"/proc/self/maps";
    // SAFETY: a NUL-terminated path; no other pointers.
    let fd = unsafe {
        syscall(
            libc::SYS_openat,
            [
                libc::AT_FDCWD as usize,
                path.as_ptr() as usize,
                libc::O_RDONLY as usize,
                0,
                0,
                0,
            ],
        )
    };
    if fd < 0 {
        exit(1);
    }
    let mut len = 0usize;
    while len < MAPS_LEN {
        // SAFETY: reads into the rest of the buffer, which is mapped and writable.
        let n = unsafe {
            syscall(
                libc::SYS_read,
                [fd as usize, buffer + len, MAPS_LEN - len, 0, 0, 0],
            )
        };
        if n <= 0 {
            break;
        }
        len += n as usize;
    }
    close(fd as i32);
    // SAFETY: the first `len` bytes of the buffer were written by read above.
    let text = unsafe { std::slice::from_raw_parts(buffer as *const u8, len) };
    let code = keep as *const () as usize;
    let c_library = libc::memset as *const () as usize;
    let mut code_file: &[u8] = b"";
    let mut c_library_file: &[u8] = b"";
    for line in text.split(|&b| b == b'\n') {
        if let Some(m) = parse(line) {
            if (m.start..m.end).contains(&code) {
                code_file = m.path;
            }
            if (m.start..m.end).contains(&c_library) {
                c_library_file = m.path;
            }
        }
    }
    for line in text.split(|&b| b == b'\n') {
        let Some(m) = parse(line) else {
            continue;
        };
        let file =
            m.path.first() == Some(&b'/') && (m.path == code_file || m.path == c_library_file);
        let special = m.path.starts_with(b"[vdso")
            || m.path.starts_with(b"[vvar")
            || m.path.starts_with(b"[vsyscall");
        if file || special || (m.start..m.end).contains(&thread) {
            continue;
        }
        // The kernel may have merged the stack or the buffer into a neighbouring mapping with
        // the same flags: unmap everything of the line but them.
        let (low, high) = if keep_start < buffer {
            ((keep_start, keep_end), (buffer, buffer + MAPS_LEN))
        } else {
            ((buffer, buffer + MAPS_LEN), (keep_start, keep_end))
        };
        let mut from = m.start;
        for (hole_start, hole_end) in [low, high, (m.end, m.end)] {
            let to = hole_start.clamp(from, m.end);
            if to > from {
                // SAFETY: unmaps a range this process inherited and no longer uses.
                unsafe { syscall(libc::SYS_munmap, [from, to - from, 0, 0, 0, 0]) };
            }
            from = from.max(hole_end.min(m.end));
        }
    }
    // SAFETY: the buffer is no longer used.
    unsafe { syscall(libc::SYS_munmap, [buffer, MAPS_LEN, 0, 0, 0, 0]) };
}

/// One line of `/proc/self/maps`.
struct MapsLine<'a> {
    start: usize,
    end: usize,
    /// The mapped file, `[name]` of a special mapping, or empty.
    path: &'a [u8],
}

/// Parses a line of `/proc/self/maps` (`start-end perms offset device inode [path]`).
fn parse(line: &[u8]) -> Option<MapsLine<'_>> {
    let mut fields = line.split(|&b| b == b' ').filter(|field| !field.is_empty());
    let range = fields.next()?;
    let _perms = fields.next()?;
    let _offset = fields.next()?;
    let _device = fields.next()?;
    let _inode = fields.next()?;
    let path = fields.next().unwrap_or(b"");
    let dash = range.iter().position(|&b| b == b'-')?;
    let start = hex(&range[..dash])?;
    let end = hex(&range[dash + 1..])?;
    (end > start).then_some(MapsLine { start, end, path })
}

/// A hexadecimal number.
fn hex(digits: &[u8]) -> Option<usize> {
    let mut value = 0usize;
    for &d in digits {
        let digit = match d {
            b'0'..=b'9' => d - b'0',
            b'a'..=b'f' => d - b'a' + 10,
            _ => return None,
        };
        value = value.checked_mul(16)?.checked_add(digit as usize)?;
    }
    Some(value)
}

/// The abstract socket `dlbridge-keeper-<pid>` consumers connect to after taking a hand-over,
/// or -1 if it cannot be made (the keeper then relies on its periodic checks).
fn listen(pid: u32) -> i32 {
    let kind = (libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK) as usize;
    // SAFETY: socket takes no pointers.
    let fd = unsafe { syscall(libc::SYS_socket, [libc::AF_UNIX as usize, kind, 0, 0, 0, 0]) };
    if fd < 0 {
        return -1;
    }
    let fd = fd as i32;
    let (address, len) = super::keeper::abstract_address(pid);
    // SAFETY: bind and listen read `len` bytes of the local address.
    let bound = unsafe {
        syscall(
            libc::SYS_bind,
            [fd as usize, &address as *const _ as usize, len, 0, 0, 0],
        ) == 0
            && syscall(libc::SYS_listen, [fd as usize, 128, 0, 0, 0, 0]) == 0
    };
    if bound {
        fd
    } else {
        close(fd);
        -1
    }
}

/// Most connections answered before the keeper goes back to its own checks.
const ANSWERS_PER_ROUND: usize = 16;

/// Answers the waiting consumers (at most [`ANSWERS_PER_ROUND`]), each only if it runs as this
/// keeper's user. A request for a CUDA segment's device memory gets its descriptor (before
/// anything is released: the consumer takes its hand-over after). Any other connection comes
/// from a consumer that took a hand-over: the descriptors whose hand-overs were taken are
/// released (that consumer's included), then it is answered.
fn answer_consumers(listener: i32, table: *mut Slot, held: &mut usize) {
    for _ in 0..ANSWERS_PER_ROUND {
        // SAFETY: accept4 with no peer address.
        let conn = unsafe {
            syscall(
                libc::SYS_accept4,
                [listener as usize, 0, 0, libc::SOCK_CLOEXEC as usize, 0, 0],
            )
        };
        if conn < 0 {
            return;
        }
        let conn = conn as i32;
        if !same_user(conn) {
            close(conn);
            continue;
        }
        match read_request(conn) {
            Some((fd, token)) if fd >= 0 => {
                // SAFETY: the first `held` slots are initialised and inside the table.
                let device = unsafe { device_of(table, *held, fd, token) };
                if device >= 0 {
                    send_descriptor(conn, device);
                } else {
                    send(conn, &[0]);
                }
            }
            _ => {
                // SAFETY: the first `held` slots are initialised and inside the table.
                *held = unsafe { release(table, *held) };
                send(conn, &[1]);
            }
        }
        close(conn);
    }
}

/// Sends the byte `1` on socket `conn` with a duplicate of descriptor `fd` attached
/// (`SCM_RIGHTS`), without waiting and without SIGPIPE.
fn send_descriptor(conn: i32, fd: i32) {
    let answer = [1u8];
    let mut iov = libc::iovec {
        iov_base: answer.as_ptr() as *mut libc::c_void,
        iov_len: 1,
    };
    // Room for one `cmsghdr` (16 bytes on 64-bit Linux) and one descriptor, 8-byte aligned.
    let mut ancillary = [0u64; 3];
    let header_len = std::mem::size_of::<libc::cmsghdr>();
    // SAFETY: cmsghdr is plain data; written at the start of the 8-byte aligned buffer, which
    // holds it and the descriptor after it.
    unsafe {
        let mut header: libc::cmsghdr = std::mem::zeroed();
        header.cmsg_len = (header_len + 4) as _;
        header.cmsg_level = libc::SOL_SOCKET;
        header.cmsg_type = libc::SCM_RIGHTS;
        (ancillary.as_mut_ptr() as *mut libc::cmsghdr).write(header);
        (ancillary.as_mut_ptr() as *mut u8)
            .add(header_len)
            .cast::<i32>()
            .write(fd);
    }
    // SAFETY: msghdr is plain data; every field used is set below.
    let mut message: libc::msghdr = unsafe { std::mem::zeroed() };
    message.msg_iov = &mut iov;
    message.msg_iovlen = 1;
    message.msg_control = ancillary.as_mut_ptr().cast();
    message.msg_controllen = (header_len + 8) as _;
    let flags = (libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT) as usize;
    // SAFETY: sendmsg reads the message and the buffers it points at.
    unsafe {
        syscall(
            libc::SYS_sendmsg,
            [
                conn as usize,
                &message as *const libc::msghdr as usize,
                flags,
                0,
                0,
                0,
            ],
        )
    };
}

/// Whether the process at the other end of socket `conn` runs as this keeper's user.
fn same_user(conn: i32) -> bool {
    let mut credentials = [0u32; 3]; // struct ucred: pid, uid, gid
    let mut len = std::mem::size_of_val(&credentials) as u32;
    // SAFETY: getsockopt writes at most `len` bytes into `credentials` and its length into
    // `len`; getuid takes nothing.
    unsafe {
        let got = syscall(
            libc::SYS_getsockopt,
            [
                conn as usize,
                libc::SOL_SOCKET as usize,
                libc::SO_PEERCRED as usize,
                credentials.as_mut_ptr() as usize,
                &mut len as *mut u32 as usize,
                0,
            ],
        );
        got == 0 && credentials[1] as isize == syscall(libc::SYS_getuid, [0; 6])
    }
}

/// Reads a consumer's request from `conn`, waiting for it briefly: the held descriptor it names
/// and the token, or None (no request, or a malformed one).
fn read_request(conn: i32) -> Option<(i32, u64)> {
    let mut polled = [libc::pollfd {
        fd: conn,
        events: libc::POLLIN,
        revents: 0,
    }];
    let timeout = [0i64, REQUEST_MILLISECONDS * 1_000_000];
    // SAFETY: ppoll reads and writes one pollfd and reads the timespec; no signal mask.
    let ready = unsafe {
        syscall(
            libc::SYS_ppoll,
            [
                polled.as_mut_ptr() as usize,
                1,
                timeout.as_ptr() as usize,
                0,
                8,
                0,
            ],
        )
    };
    if ready <= 0 {
        return None;
    }
    let mut request = [0u8; super::keeper::REQUEST_LEN];
    // SAFETY: recvfrom writes at most REQUEST_LEN bytes into the buffer; no address.
    let n = unsafe {
        syscall(
            libc::SYS_recvfrom,
            [
                conn as usize,
                request.as_mut_ptr() as usize,
                request.len(),
                libc::MSG_DONTWAIT as usize,
                0,
                0,
            ],
        )
    };
    if n != request.len() as isize {
        return None;
    }
    let fd = i32::from_ne_bytes(request[..4].try_into().expect("4 bytes"));
    let token = u64::from_ne_bytes(request[8..].try_into().expect("8 bytes"));
    Some((fd, token))
}

/// The device memory descriptor of the held CUDA segment whose descriptor is `fd` and whose
/// header carries `token` (read with `pread`, so a number reused for another segment is never
/// answered for), or -1.
///
/// # Safety
/// The first `held` slots of `table` are initialised.
unsafe fn device_of(table: *mut Slot, held: usize, fd: i32, token: u64) -> i32 {
    for i in 0..held {
        // SAFETY: `i < held`, an initialised slot (the function's contract).
        let slot = unsafe { &*table.add(i) };
        if slot.fd == fd && slot.device >= 0 && read_u64(fd, super::TOKEN_AT) == Some(token) {
            return slot.device;
        }
    }
    -1
}

/// Message received on the control socket.
enum Received {
    /// A segment's descriptor to hold, its device memory's (or -1), and the seconds it may wait.
    Descriptor(i32, i32, u64),
    /// A message without one or two descriptors and its seconds.
    Malformed,
    /// Nothing (interrupted).
    Nothing,
    /// The producer closed its end.
    Closed,
}

/// Receives one message from the control socket.
fn receive(control: i32) -> Received {
    let mut seconds = [0u8; 8];
    // Room for one `cmsghdr` (16 bytes on 64-bit Linux) and two descriptors, 8-byte aligned.
    let mut ancillary = [0u64; 4];
    let mut iov = libc::iovec {
        iov_base: seconds.as_mut_ptr().cast(),
        iov_len: 8,
    };
    // SAFETY: msghdr is plain data; every field is set below.
    let mut message: libc::msghdr = unsafe { std::mem::zeroed() };
    message.msg_iov = &mut iov;
    message.msg_iovlen = 1;
    message.msg_control = ancillary.as_mut_ptr().cast();
    message.msg_controllen = std::mem::size_of_val(&ancillary) as _;
    let flags = (libc::MSG_CMSG_CLOEXEC | libc::MSG_DONTWAIT) as usize;
    // SAFETY: recvmsg writes into the buffers the message points at, within their lengths.
    let n = unsafe {
        syscall(
            libc::SYS_recvmsg,
            [
                control as usize,
                &mut message as *mut libc::msghdr as usize,
                flags,
                0,
                0,
                0,
            ],
        )
    };
    if n == 0 {
        return Received::Closed;
    }
    if n < 0 {
        return match -n as i32 {
            libc::EINTR | libc::EAGAIN => Received::Nothing,
            _ => Received::Closed,
        };
    }
    let rights = super::keeper::Rights::received(&message, &ancillary);
    let fds = rights.descriptors();
    // A truncated message (no room left for descriptors in this process) lost some of them.
    if rights.truncated || !(1..=2).contains(&fds.len()) || n != 8 {
        fds.iter().for_each(|&fd| close(fd));
        return Received::Malformed;
    }
    let device = fds.get(1).copied().unwrap_or(-1);
    Received::Descriptor(fds[0], device, u64::from_ne_bytes(seconds))
}

/// Closes the held descriptors whose segment has no pending hand-over (or cannot be read) or
/// whose time is up, compacting the table; returns how many are still held.
///
/// # Safety
/// The first `held` slots of `table` are initialised.
unsafe fn release(table: *mut Slot, held: usize) -> usize {
    let now = now();
    let mut i = 0;
    let mut held = held;
    while i < held {
        // SAFETY: `i < held`, an initialised slot (the function's contract).
        let slot = unsafe { &*table.add(i) };
        if slot.deadline > now && pending(slot.fd) {
            i += 1;
            continue;
        }
        close(slot.fd);
        close(slot.device);
        held -= 1;
        // SAFETY: both slots are initialised and inside the table.
        unsafe { table.add(i).write(table.add(held).read()) };
    }
    held
}

/// Whether the segment behind `fd` has a pending hand-over (its header's counter, read with
/// `pread`: the size is sealed, so this never faults; a short read counts as none).
fn pending(fd: i32) -> bool {
    let mut count = [0u8; 4];
    read_at(fd, super::HANDOFFS_AT, &mut count) && u32::from_ne_bytes(count) > 0
}

/// The `u64` at byte `at` of the segment behind `fd`, read with `pread`.
fn read_u64(fd: i32, at: usize) -> Option<u64> {
    let mut bytes = [0u8; 8];
    read_at(fd, at, &mut bytes).then(|| u64::from_ne_bytes(bytes))
}

/// Fills `bytes` from byte `at` of the file behind `fd` with `pread`; false on a short read.
fn read_at(fd: i32, at: usize, bytes: &mut [u8]) -> bool {
    // SAFETY: pread writes at most `bytes.len()` bytes into `bytes`.
    let n = unsafe {
        syscall(
            libc::SYS_pread64,
            [
                fd as usize,
                bytes.as_mut_ptr() as usize,
                bytes.len(),
                at,
                0,
                0,
            ],
        )
    };
    n == bytes.len() as isize
}

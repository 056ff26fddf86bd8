//! The keeper: one process per producer process that holds handed-over segments for their
//! consumers, so that a producer may exit before a consumer opens a handle.
//!
//! A segment lives only while some process holds its descriptor or a mapping. The first
//! hand-over of a process ([`super::SharedTensor::handoff`]) forks its keeper
//! ([`super::keeper_process`]): a process that keeps nothing of the producer but read-only code
//! and talks to it over a Unix socket. Each hand-over then sends the segment's descriptor there
//! (`SCM_RIGHTS`), with the descriptor that shares its device memory for a CUDA segment, and gets
//! back the segment's number in the keeper; the handle names the keeper and that number. The
//! consumer of a CUDA segment asks the keeper for its device memory's descriptor
//! ([`device_descriptor`]): it cannot be reopened through `/proc` as a memory file can. No program is looked up or executed, a hand-over costs one round trip on the socket,
//! and however many hand-overs are pending, a producer has one keeper. The keeper closes a
//! descriptor when its hand-over is taken — the consumer that takes it tells the keeper
//! ([`release_taken`]) — or when its time ([`handoff_seconds`]) is up, and exits once its
//! producer is gone and it holds nothing. A hand-over that cannot reach a keeper is an error,
//! never a silent fallback.

use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::Mutex;
use std::time::Duration;

#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
use super::keeper_process;

/// How long a keeper waits for its consumer: `DLBRIDGE_SHM_HANDOFF_SECONDS`, default 600.
pub fn handoff_seconds() -> u64 {
    std::env::var("DLBRIDGE_SHM_HANDOFF_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|&s| s > 0)
        .unwrap_or(600)
}

/// How long a producer waits for its keeper's answer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a consumer waits for the keeper to release a taken hand-over.
const RELEASE_TIMEOUT: Duration = Duration::from_millis(500);

/// This process's keeper.
struct Keeper {
    /// The keeper's process id (what handles name).
    pid: u32,
    /// The producer's end of the control socket.
    control: OwnedFd,
    /// The process that started it (a forked child of the producer starts its own).
    owner: u32,
}

static KEEPER: Mutex<Option<Keeper>> = Mutex::new(None);

/// Hands `fd` (a segment with a pending hand-over) and `device` (the descriptor sharing a CUDA
/// segment's memory) to this process's keeper, starting it if needed (again, if it died);
/// returns the keeper's process id and the segment descriptor's number there.
pub(super) fn hand_over(
    fd: BorrowedFd<'_>,
    device: Option<BorrowedFd<'_>>,
) -> std::io::Result<(u32, i32)> {
    let seconds = handoff_seconds();
    let mut keeper = KEEPER
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let mut retried = false;
    loop {
        if keeper
            .as_ref()
            .is_none_or(|k| k.owner != std::process::id())
        {
            *keeper = Some(start()?);
        }
        let current = keeper.as_ref().expect("started above");
        match send(current, fd, device, seconds) {
            Ok(number) => return Ok((current.pid, number)),
            Err(e) => {
                // A keeper that failed once is never used again (its answers could lag).
                *keeper = None;
                let gone = matches!(
                    e.raw_os_error(),
                    Some(libc::EPIPE | libc::ECONNRESET | libc::ENOTCONN)
                ) || e.kind() == std::io::ErrorKind::UnexpectedEof;
                if !gone || retried {
                    return Err(e);
                }
                retried = true;
            }
        }
    }
}

/// Sends one hand-over and reads the answer.
fn send(
    keeper: &Keeper,
    fd: BorrowedFd<'_>,
    device: Option<BorrowedFd<'_>>,
    seconds: u64,
) -> std::io::Result<i32> {
    let descriptors = [fd.as_raw_fd(), device.map_or(-1, |d| d.as_raw_fd())];
    let count = if device.is_some() { 2 } else { 1 };
    send_with_descriptors(
        keeper.control.as_raw_fd(),
        &seconds.to_ne_bytes(),
        &descriptors[..count],
    )?;
    let answer = read_i32(&keeper.control)?;
    if answer < 0 {
        return Err(std::io::Error::from_raw_os_error(-answer));
    }
    Ok(answer)
}

/// Sends `payload` on socket `socket` with `descriptors` (one or two) attached (`SCM_RIGHTS`).
fn send_with_descriptors(socket: i32, payload: &[u8], descriptors: &[i32]) -> std::io::Result<()> {
    let mut iov = libc::iovec {
        iov_base: payload.as_ptr() as *mut libc::c_void,
        iov_len: payload.len(),
    };
    let bytes = (4 * descriptors.len()) as u32;
    // Room for one cmsghdr and two descriptors, 8-byte aligned.
    let mut ancillary = [0u64; 4];
    // SAFETY: msghdr is plain data; the fields used are set below.
    let mut message: libc::msghdr = unsafe { std::mem::zeroed() };
    message.msg_iov = &mut iov;
    message.msg_iovlen = 1;
    message.msg_control = ancillary.as_mut_ptr().cast();
    // SAFETY: CMSG_SPACE computes a size from a length.
    message.msg_controllen = unsafe { libc::CMSG_SPACE(bytes) } as _;
    // SAFETY: the control buffer (32 bytes) holds CMSG_SPACE(8) bytes, room for the header and
    // two ints.
    unsafe {
        let header = libc::CMSG_FIRSTHDR(&message);
        (*header).cmsg_level = libc::SOL_SOCKET;
        (*header).cmsg_type = libc::SCM_RIGHTS;
        (*header).cmsg_len = libc::CMSG_LEN(bytes) as _;
        let data = libc::CMSG_DATA(header) as *mut i32;
        for (i, &fd) in descriptors.iter().enumerate() {
            std::ptr::write_unaligned(data.add(i), fd);
        }
    }
    // SAFETY: sendmsg reads the message and the buffers it points at.
    if unsafe { libc::sendmsg(socket, &message, libc::MSG_NOSIGNAL) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Reads one 4-byte message from the control socket (its receive timeout bounds the wait).
fn read_i32(control: &OwnedFd) -> std::io::Result<i32> {
    let mut bytes = [0u8; 4];
    loop {
        // SAFETY: recv writes at most 4 bytes into the 4-byte buffer.
        let n = unsafe { libc::recv(control.as_raw_fd(), bytes.as_mut_ptr().cast(), 4, 0) };
        match n {
            4 => return Ok(i32::from_ne_bytes(bytes)),
            0 => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            n if n < 0 => {
                let e = std::io::Error::last_os_error();
                if e.kind() != std::io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
            _ => return Err(std::io::ErrorKind::InvalidData.into()),
        }
    }
}

/// Sets a socket's send and receive timeouts.
fn set_timeouts(fd: &OwnedFd, timeout: Duration) -> std::io::Result<()> {
    let tv = libc::timeval {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_usec: timeout.subsec_micros() as libc::suseconds_t,
    };
    for option in [libc::SO_RCVTIMEO, libc::SO_SNDTIMEO] {
        // SAFETY: setsockopt reads one timeval.
        let done = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                option,
                (&tv as *const libc::timeval).cast(),
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            )
        };
        if done != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Forks this process's keeper and waits for its greeting.
fn start() -> std::io::Result<Keeper> {
    let mut pair = [0; 2];
    // SAFETY: socketpair writes two descriptors into `pair`.
    let made = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            pair.as_mut_ptr(),
        )
    };
    if made != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: two fresh descriptors that nothing else owns.
    let (control, theirs) =
        unsafe { (OwnedFd::from_raw_fd(pair[0]), OwnedFd::from_raw_fd(pair[1])) };
    set_timeouts(&control, ANSWER_TIMEOUT)?;
    fork_keeper(control, theirs)
}

/// Keepers need raw system calls written for this architecture.
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn fork_keeper(_control: OwnedFd, _theirs: OwnedFd) -> std::io::Result<Keeper> {
    Err(std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        "keeper processes are implemented for x86_64 and aarch64 only",
    ))
}

/// Forks the keeper with `theirs` as its end of the control socket and reads its greeting.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn fork_keeper(control: OwnedFd, theirs: OwnedFd) -> std::io::Result<Keeper> {
    // Every signal stays blocked across the fork: the host's handlers must never run in the
    // child (the keeper resets them, then unblocks).
    // SAFETY: sigfillset fills a local set; pthread_sigmask swaps this thread's mask with it.
    let saved = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut saved: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut saved);
        saved
    };
    // A fork without an exit signal (no SIGCHLD reaches the host); its child, the keeper, is
    // adopted by the system when this intermediate process exits at once.
    // SAFETY: clone with only an exit-signal of 0 is a fork; no pointers.
    let child = unsafe { libc::syscall(libc::SYS_clone, 0usize, 0usize, 0usize, 0usize, 0usize) };
    if child != 0 {
        // SAFETY: restores the mask saved above.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &saved, std::ptr::null_mut()) };
    }
    if child == 0 {
        // SAFETY: in the child of the fork above; `theirs` is the keeper's end.
        unsafe { keeper_process::start(theirs.as_raw_fd()) }
    }
    if child < 0 {
        return Err(std::io::Error::last_os_error());
    }
    drop(theirs);
    let mut status = 0;
    loop {
        // SAFETY: waits for our own child; `status` is a local int.
        let waited = unsafe { libc::waitpid(child as libc::pid_t, &mut status, libc::__WALL) };
        if waited >= 0 || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted
        {
            break;
        }
    }
    let pid = read_i32(&control).map_err(|e| {
        std::io::Error::new(e.kind(), format!("the keeper process did not start: {e}"))
    })?;
    Ok(Keeper {
        pid: pid as u32,
        control,
        owner: std::process::id(),
    })
}

/// Tells keeper `pid` that a consumer took a hand-over, and waits (briefly) until it has closed
/// the descriptors of taken hand-overs, so that the handle stops naming the segment before the
/// open returns. A process that is no keeper (the handle names a segment's creator) refuses the
/// connection at once.
pub(super) fn release_taken(pid: u32) {
    if let Ok(socket) = ask(pid, -1, 0, RELEASE_TIMEOUT) {
        let mut done = [0u8; 1];
        // SAFETY: recv writes at most one byte into `done`.
        unsafe { libc::recv(socket.as_raw_fd(), done.as_mut_ptr().cast(), 1, 0) };
    }
}

/// Asks keeper `pid` for a duplicate of the descriptor sharing the device memory of the CUDA
/// segment it holds as descriptor `fd`, whose header carries `token`. `Ok(None)`: the keeper
/// holds no such segment (its hand-over was taken, or its time is up). Errors: no keeper answers
/// at `pid` (the process named is gone, or is no keeper), or the answer is malformed.
pub(super) fn device_descriptor(pid: u32, fd: i32, token: u64) -> std::io::Result<Option<OwnedFd>> {
    let socket = ask(pid, fd, token, ANSWER_TIMEOUT)?;
    let mut answer = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: answer.as_mut_ptr().cast(),
        iov_len: 1,
    };
    // Room for one cmsghdr and one descriptor, 8-byte aligned.
    let mut ancillary = [0u64; 4];
    // SAFETY: msghdr is plain data; every field used is set below.
    let mut message: libc::msghdr = unsafe { std::mem::zeroed() };
    message.msg_iov = &mut iov;
    message.msg_iovlen = 1;
    message.msg_control = ancillary.as_mut_ptr().cast();
    message.msg_controllen = std::mem::size_of_val(&ancillary) as _;
    // SAFETY: recvmsg writes into the buffers the message points at, within their lengths.
    let n = unsafe { libc::recvmsg(socket.as_raw_fd(), &mut message, libc::MSG_CMSG_CLOEXEC) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let rights = Rights::received(&message, &ancillary);
    // Every descriptor received is owned here, so that any this answer should not carry closes.
    let mut received: Vec<OwnedFd> = rights
        .descriptors()
        .iter()
        .map(|&fd| {
            // SAFETY: the kernel installed this descriptor for this process; nothing else owns
            // it.
            unsafe { OwnedFd::from_raw_fd(fd) }
        })
        .collect();
    match (n, answer[0], received.len(), rights.truncated) {
        (1, 1, 1, false) => Ok(received.pop()),
        (1, 0, 0, false) => Ok(None),
        _ => Err(std::io::ErrorKind::InvalidData.into()),
    }
}

/// The descriptors an `SCM_RIGHTS` message brought, read from the 32-byte control buffer it was
/// received into: as many as its header says, within what arrived (at most 4). Plain memory
/// reads, so the keeper (which makes raw system calls only) parses its messages with it too.
pub(super) struct Rights {
    fds: [i32; 4],
    count: usize,
    /// The kernel dropped descriptors that found no room (`MSG_CTRUNC`).
    pub(super) truncated: bool,
}

impl Rights {
    /// What `message`, received into `ancillary`, carries.
    pub(super) fn received(message: &libc::msghdr, ancillary: &[u64; 4]) -> Rights {
        let header_len = std::mem::size_of::<libc::cmsghdr>();
        // SAFETY: the ancillary buffer is 8-byte aligned and larger than a cmsghdr.
        let header = unsafe { &*(ancillary.as_ptr() as *const libc::cmsghdr) };
        // `msg_controllen`'s type differs between C libraries.
        let controllen: usize = message.msg_controllen as _;
        let is_rights = controllen >= header_len
            && header.cmsg_level == libc::SOL_SOCKET
            && header.cmsg_type == libc::SCM_RIGHTS;
        let arrived = controllen.saturating_sub(header_len) / 4;
        let count = if is_rights {
            (((header.cmsg_len as u64).saturating_sub(header_len as u64) / 4) as usize)
                .min(arrived)
                .min(4)
        } else {
            0
        };
        let mut fds = [-1; 4];
        for (i, fd) in fds.iter_mut().enumerate().take(count) {
            // SAFETY: descriptor `i < count` follows the header inside the 32-byte buffer.
            *fd = unsafe {
                (ancillary.as_ptr() as *const u8)
                    .add(header_len + 4 * i)
                    .cast::<i32>()
                    .read_unaligned()
            };
        }
        Rights {
            fds,
            count,
            truncated: message.msg_flags & libc::MSG_CTRUNC != 0,
        }
    }

    /// The descriptors received, in order.
    pub(super) fn descriptors(&self) -> &[i32] {
        &self.fds[..self.count]
    }
}

/// Connects to keeper `pid`'s abstract socket and sends it a request: the device memory of
/// held descriptor `fd` with `token`, or (`fd` -1) the release of taken hand-overs.
fn ask(pid: u32, fd: i32, token: u64, timeout: Duration) -> std::io::Result<OwnedFd> {
    // SAFETY: socket takes no pointers.
    let raw = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor that nothing else owns.
    let socket = unsafe { OwnedFd::from_raw_fd(raw) };
    set_timeouts(&socket, timeout)?;
    let (address, len) = abstract_address(pid);
    // SAFETY: connect reads `len` bytes of the address.
    let connected = unsafe {
        libc::connect(
            socket.as_raw_fd(),
            (&address as *const libc::sockaddr_un).cast(),
            len as libc::socklen_t,
        )
    };
    if connected != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // An abstract socket's name is anyone's to take: only the keeper the handle names, running
    // as this user, is asked.
    let mut credentials: libc::ucred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `credentials` and its length into `len`.
    let got = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut credentials as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    // SAFETY: geteuid takes nothing.
    let user = unsafe { libc::geteuid() };
    if got != 0 || credentials.pid as u32 != pid || credentials.uid != user {
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!("the socket of keeper {pid} belongs to another process or user"),
        ));
    }
    let mut request = [0u8; REQUEST_LEN];
    request[..4].copy_from_slice(&fd.to_ne_bytes());
    request[8..].copy_from_slice(&token.to_ne_bytes());
    // SAFETY: send reads the request's bytes.
    let sent = unsafe {
        libc::send(
            socket.as_raw_fd(),
            request.as_ptr().cast(),
            REQUEST_LEN,
            libc::MSG_NOSIGNAL,
        )
    };
    if sent != REQUEST_LEN as isize {
        return Err(std::io::Error::last_os_error());
    }
    Ok(socket)
}

/// A consumer's request to a keeper: a held descriptor's number (`i32`, -1 for none), four
/// zero bytes and the segment's token (`u64`).
pub(super) const REQUEST_LEN: usize = 16;

/// The `sockaddr_un` of keeper `pid`'s abstract socket (`"\0dlbridge-keeper-<pid>"`) and its
/// length, built without allocating.
pub(super) fn abstract_address(pid: u32) -> (libc::sockaddr_un, usize) {
    // SAFETY: sockaddr_un is plain data; zero is a valid value of every field.
    let mut address: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    address.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let prefix = b"dlbridge-keeper-";
    let mut len = 1; // sun_path[0] stays NUL: an abstract name
    for &b in prefix {
        address.sun_path[len] = b as libc::c_char;
        len += 1;
    }
    let mut digits = [0u8; 10];
    let mut n = 0;
    let mut rest = pid;
    loop {
        digits[n] = b'0' + (rest % 10) as u8;
        n += 1;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    while n > 0 {
        n -= 1;
        address.sun_path[len] = digits[n] as libc::c_char;
        len += 1;
    }
    (address, std::mem::size_of::<libc::sa_family_t>() + len)
}

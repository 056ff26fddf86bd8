//! Shared-memory transport: tensors for runtimes that cannot share a process.
//!
//! A segment is an anonymous shared-memory file (`memfd`) holding a small header (DLPack metadata,
//! two counters and a random token), the shape and strides, and the data at a page-aligned
//! offset. Its size is sealed at creation (`F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL`): no
//! process — not even one that opens the segment to attack it — can truncate it under another
//! one's mapping, so a mapped segment never raises SIGBUS. Exporting copies a tensor into a new
//! segment once ([`export`]); a tensor allocated in a segment from the start ([`empty`]) is shared
//! with no copy at all. Opening ([`open`]) maps the segment — its data copy-on-write for
//! [`Access::ReadOnly`] — copies its header once and validates the copy like any foreign tensor;
//! it never copies data, and it never waits (a file lease on the segment is an error).
//!
//! Handles ([`handle`]) name the process holding the segment's descriptor and its number there:
//! another process of the same user opens the segment through `/proc/<pid>/fd/<fd>`. Lifetime:
//! the creating process keeps the descriptor while it has tensors over the segment or a
//! reservation is pending ([`reserve`]); after [`SharedTensor::handoff`], the process's keeper
//! holds it until the hand-over is taken; each opener maps the memory and keeps it for as long
//! as its tensors live. The kernel frees a segment when its last descriptor and mapping are gone
//! — on a normal exit, a crash or `kill -9` alike — so segments cannot leak. A handle opens while
//! its creating process lives and holds the descriptor; after that, [`open`] reports
//! [`Error::ShmNotFound`]. [`sweep`] removes named segments left in `/dev/shm` by dlbridge
//! versions before this layout.

use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

mod device;
pub mod handle;
mod keeper;
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
mod keeper_process;
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
mod raw;
mod sweep;

pub use handle::HANDLE_WHAT;
pub use keeper::handoff_seconds;

pub use sweep::sweep;

use handle::Handle;

use crate::cuda_driver::SharedAllocation;
use crate::dtype::DataType;
use crate::error::{Error, Result};
use crate::ffi::{DLDataType, DLDevice, DLTensor};
use crate::flags::Flags;
use crate::layout::{self, Order};
use crate::tensor::Tensor;
use crate::validate::validate;
use crate::view::TensorView;
use crate::{Device, DeviceType, MAX_NDIM};

/// First bytes of every segment.
const MAGIC: [u8; 8] = *b"DLBRIDGE";
/// Version of the segment layout below (1: named POSIX objects without a token; 2: without the
/// `handed` state, so that racing openers could both join a handed-over segment; 3: host memory
/// only, without the device's UUID).
const LAYOUT_VERSION: u32 = 4;

/// The start of a segment; `2 * ndim` `i64`s (shape, then strides) follow it.
#[repr(C)]
struct Header {
    magic: [u8; 8],
    layout_version: u32,
    ndim: u32,
    /// Mappings holding a reference (creator and openers).
    refcount: AtomicU32,
    /// References handed over by a producer to the next opener.
    handoffs: AtomicU32,
    flags: u64,
    dtype: DLDataType,
    device: DLDevice,
    /// Nonzero once the creator handed its own reference over ([`SharedTensor::handoff`]): from
    /// then on only a pending hand-over admits an opener, so each hand-over opens exactly once.
    handed: AtomicU32,
    data_offset: u64,
    data_len: u64,
    segment_len: u64,
    /// The token every handle of this segment carries.
    token: u64,
    /// For a CUDA segment, the UUID of the device its memory is on (zeros for host memory).
    device_uuid: [u8; 16],
}

const HEADER_LEN: usize = std::mem::size_of::<Header>();

/// Where the pending hand-over count lies in a segment (what a keeper reads with `pread`).
const HANDOFFS_AT: usize = std::mem::offset_of!(Header, handoffs);
/// Where the token lies in a segment (what a keeper reads with `pread`).
const TOKEN_AT: usize = std::mem::offset_of!(Header, token);

/// How an opened segment's data may be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// The tensor is flagged READ_ONLY and its data pages are mapped copy-on-write
    /// (`MAP_PRIVATE`): a consumer that writes anyway (ignoring the flag) neither crashes nor
    /// changes the segment — its writes land in private copies of the pages it wrote, which from
    /// then on no longer follow the segment. A CUDA segment's device memory is mapped read-write
    /// all the same (a device mapping without write access would make such a write a fatal
    /// fault); it opens once, by hand-over, so only the producer's own tensor over it, if it
    /// kept one, could see such a write.
    ReadOnly,
    /// The data is writable and writes are seen by every side.
    ReadWrite,
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(page)
        .ok()
        .filter(|&p| p > 0)
        .unwrap_or(4096)
}

fn os_error(op: &'static str, name: &str) -> Error {
    Error::ShmIo {
        op,
        name: name.to_owned(),
        reason: std::io::Error::last_os_error().to_string(),
    }
}

fn invalid(name: &str, reason: impl Into<String>) -> Error {
    Error::ShmInvalid {
        name: name.to_owned(),
        reason: reason.into(),
    }
}

/// One mapping of a segment in this process. Dropping it releases its reference (unless handed
/// over) and unmaps; the creator's mapping also closes the segment's descriptor, or parks it
/// while a hand-over is pending.
struct Mapping {
    base: *mut u8,
    len: usize,
    name: String,
    handed_over: AtomicBool,
    /// The descriptor the handle names (creator only).
    descriptor: Option<OwnedFd>,
    /// A keeper process holds the descriptor for the pending hand-over.
    kept: AtomicBool,
    /// A CUDA segment's device memory.
    device: Option<DeviceMemory>,
}

/// A CUDA segment's device memory as this process maps it, and (creator only) the descriptor
/// that shares it, for the keeper.
struct DeviceMemory {
    allocation: SharedAllocation,
    descriptor: Option<OwnedFd>,
}

// SAFETY: the mapping is plain shared memory; the header's counters are atomics, and the data is
// accessed through tensor views like any other DLPack memory.
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

impl Mapping {
    fn header(&self) -> &Header {
        // SAFETY: every Mapping spans at least HEADER_LEN bytes, page-aligned (so aligned for
        // Header), and the header stays mapped for as long as `self`.
        unsafe { &*(self.base as *const Header) }
    }

    /// Where the segment's data starts: at `data_offset` in the mapping, or in the device memory.
    fn data(&self, data_offset: usize) -> *mut u8 {
        match &self.device {
            Some(device) => device.allocation.address() as *mut u8,
            None => self.base.wrapping_add(data_offset),
        }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        if !self.handed_over.load(Ordering::Acquire) {
            self.header().refcount.fetch_sub(1, Ordering::AcqRel);
        }
        // SAFETY: `base`/`len` are exactly what mmap returned; nothing borrows the mapping any
        // more (tensors over it hold this Mapping alive).
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.len) };
        if let Some(fd) = self.descriptor.take() {
            if !self.kept.load(Ordering::Acquire) && pending_handoffs(&fd) > 0 {
                parked().push(fd);
            }
        }
    }
}

/// Descriptors of segments this process made whose mappings are gone but whose hand-over is
/// still pending: they keep the handles openable until the consumers have opened them.
fn parked() -> std::sync::MutexGuard<'static, Vec<OwnedFd>> {
    static PARKED: Mutex<Vec<OwnedFd>> = Mutex::new(Vec::new());
    PARKED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Closes the parked descriptors whose hand-overs have all been taken.
fn release_taken_handoffs() {
    parked().retain(|fd| pending_handoffs(fd) > 0);
}

/// The segment's pending hand-over count, read through its descriptor (never faults: the size
/// is sealed and a short read counts as none).
fn pending_handoffs(fd: &OwnedFd) -> u32 {
    let mut bytes = [0u8; 4];
    let at = HANDOFFS_AT;
    // SAFETY: reads at most 4 bytes into a 4-byte buffer from our descriptor.
    let n = unsafe {
        libc::pread(
            fd.as_raw_fd(),
            bytes.as_mut_ptr().cast(),
            4,
            at as libc::off_t,
        )
    };
    if n == 4 {
        u32::from_ne_bytes(bytes)
    } else {
        0
    }
}

/// Maps `len` bytes of an open shared-memory file read-write.
fn map(fd: libc::c_int, len: usize, name: &str) -> Result<*mut u8> {
    // SAFETY: a fresh shared mapping of an open descriptor; the kernel validates the arguments.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd,
            0,
        )
    };
    if base == libc::MAP_FAILED {
        return Err(os_error("map", name));
    }
    Ok(base as *mut u8)
}

/// A tensor living in a shared-memory segment created by this process.
pub struct SharedTensor {
    mapping: Arc<Mapping>,
    tensor: Tensor,
}

impl std::fmt::Debug for SharedTensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedTensor")
            .field("handle", &self.handle())
            .field("tensor", &self.tensor)
            .finish()
    }
}

impl SharedTensor {
    /// The handle other processes pass to [`open`].
    pub fn handle(&self) -> &str {
        &self.mapping.name
    }

    /// The tensor over the segment (writes are seen by every process that opened it).
    pub fn tensor(&self) -> &Tensor {
        &self.tensor
    }

    /// Another tensor over the same segment, keeping it mapped for as long as it lives.
    pub fn to_tensor(&self) -> Tensor {
        let v = self.tensor.view();
        // SAFETY: the same validated layout over the same mapping, kept alive by the Arc.
        unsafe {
            Tensor::from_raw_parts(
                v.data_ptr(),
                v.shape(),
                Some(v.strides()),
                v.dtype(),
                v.device(),
                v.flags(),
                Box::new(self.mapping.clone()),
            )
        }
        .expect("layout already validated")
    }

    /// Gives this side's reference to the next process that opens the segment, and returns the
    /// handle to send it. This process may exit at once: its keeper process holds the segment
    /// until that consumer opens it (or for [`handoff_seconds`] if nobody does); the consumer
    /// then keeps the memory for as long as it needs. The handle opens exactly once: the first
    /// [`open`] takes the hand-over, any later or racing one gets [`Error::ShmNotFound`].
    ///
    /// Errors: [`Error::ShmIo`] (`op` "hand over") if no keeper can be started or reached; the
    /// segment is then released as if it had never been handed over.
    pub fn handoff(self) -> Result<String> {
        let header = self.mapping.header();
        header.handed.store(1, Ordering::Release);
        header.handoffs.fetch_add(1, Ordering::AcqRel);
        self.mapping.handed_over.store(true, Ordering::Release);
        // SAFETY: the token lies in the mapped header; a volatile read of a plain integer.
        let token = unsafe { std::ptr::read_volatile(std::ptr::addr_of!(header.token)) };
        let fd = self
            .mapping
            .descriptor
            .as_ref()
            .expect("a SharedTensor's mapping holds the descriptor");
        let device = self
            .mapping
            .device
            .as_ref()
            .and_then(|d| d.descriptor.as_ref())
            .map(|d| d.as_fd());
        match keeper::hand_over(fd.as_fd(), device) {
            Ok((pid, fd)) => {
                self.mapping.kept.store(true, Ordering::Release);
                Ok(Handle { pid, fd, token }.format())
            }
            Err(e) => {
                // Take the hand-over back: dropping `self` then releases this side's reference.
                header.handoffs.fetch_sub(1, Ordering::AcqRel);
                self.mapping.handed_over.store(false, Ordering::Release);
                Err(Error::ShmIo {
                    op: "hand over",
                    name: self.mapping.name.clone(),
                    reason: format!("no keeper process holds it: {e}"),
                })
            }
        }
    }
}

/// A new, zero-filled segment holding a C-contiguous tensor: `empty_shared` in the frontends.
pub fn empty(shape: &[i64], dtype: DataType) -> Result<SharedTensor> {
    create(shape, dtype, Flags::empty())
}

/// Copies `view` (any layout, host memory) into a new segment in C order. The segment's tensor
/// is flagged IS_COPIED, so the consumer knows this exchange cost one copy.
///
/// A tensor in CUDA device memory is copied, device to device, into a new allocation on its
/// device that other processes can map: a dense layout as it is (its strides kept), any other
/// with positive strides in C order; broadcast or negative strides are
/// [`Error::UnsupportedLayout`]. The copy runs on the legacy stream (`CU_STREAM_LEGACY`) and is
/// waited for, so the handle names finished data; order a tensor's pending work before it
/// ([`Tensor::order_stream`] with [`crate::stream_order::LEGACY_STREAM`]). A CUDA segment opens
/// through its hand-over only ([`SharedTensor::handoff`]): its consumer gets the device memory's
/// descriptor from the keeper.
pub fn export(view: &TensorView<'_>) -> Result<SharedTensor> {
    if view.device().kind == DeviceType::Cuda {
        return export_cuda(view);
    }
    view.require_host()?;
    let shared = create(
        view.shape(),
        view.dtype(),
        Flags::IS_COPIED | (view.flags() & Flags::IS_SUBBYTE_TYPE_PADDED),
    )?;
    crate::copy::copy_into(view, &shared.tensor.view())?;
    Ok(shared)
}

/// Bytes per element of `dtype` in a segment: packed sub-byte elements cannot be shared.
fn item_size(dtype: DataType, flags: Flags) -> Result<usize> {
    dtype
        .storage_size(flags.contains(Flags::IS_SUBBYTE_TYPE_PADDED))
        .ok_or_else(|| {
            Error::UnsupportedLayout(format!("packed {dtype} elements cannot be shared"))
        })
}

fn create(shape: &[i64], dtype: DataType, flags: Flags) -> Result<SharedTensor> {
    let item = item_size(dtype, flags)?;
    let size = crate::tensor::check_shape(shape, item)?;
    let data_len = size * item;
    let strides = layout::compact_strides(shape, Order::C);
    let layout = SegmentLayout {
        shape,
        strides: &strides,
        dtype,
        flags,
        device: Device::CPU,
        data_len,
        device_uuid: [0; 16],
    };
    let mapping = Arc::new(layout.create(None)?);
    // SAFETY: the data area holds `data_len` zeroed, writable bytes: the compact layout's span.
    let tensor = unsafe {
        Tensor::from_raw_parts(
            mapping.data(layout.data_offset()),
            shape,
            Some(&strides),
            dtype,
            Device::CPU,
            flags,
            Box::new(mapping.clone()),
        )
    }?;
    Ok(SharedTensor { mapping, tensor })
}

/// [`export`] of a CUDA tensor: its copy in new shareable device memory, described by a segment
/// without data pages.
fn export_cuda(view: &TensorView<'_>) -> Result<SharedTensor> {
    let flags = Flags::IS_COPIED | (view.flags() & Flags::IS_SUBBYTE_TYPE_PADDED);
    let item = item_size(view.dtype(), flags)?;
    crate::tensor::check_shape(view.shape(), item)?;
    let plan = device::CopyPlan::of(view, item)?;
    let exported = device::export(view, &plan)?;
    let layout = SegmentLayout {
        shape: view.shape(),
        strides: plan.strides(),
        dtype: view.dtype(),
        flags,
        device: view.device(),
        data_len: exported.size,
        device_uuid: exported.uuid,
    };
    let mapping = Arc::new(layout.create(Some(DeviceMemory {
        allocation: exported.allocation,
        descriptor: Some(exported.descriptor),
    }))?);
    // SAFETY: the device memory holds the copy in this layout (the plan's strides), mapped for
    // as long as the mapping lives.
    let tensor = unsafe {
        Tensor::from_raw_parts(
            mapping.data(0),
            view.shape(),
            Some(plan.strides()),
            view.dtype(),
            view.device(),
            flags,
            Box::new(mapping.clone()),
        )
    }?;
    Ok(SharedTensor { mapping, tensor })
}

/// What a new segment describes.
struct SegmentLayout<'a> {
    shape: &'a [i64],
    strides: &'a [i64],
    dtype: DataType,
    flags: Flags,
    device: Device,
    /// Bytes of data: in the segment for host memory, in the device allocation for CUDA.
    data_len: usize,
    device_uuid: [u8; 16],
}

impl SegmentLayout<'_> {
    /// Where the data (or, for CUDA, the segment's end) lies: the first page after the dims.
    fn data_offset(&self) -> usize {
        let page = page_size();
        (HEADER_LEN + 16 * self.shape.len()).div_ceil(page) * page
    }

    /// Creates the sealed segment, writes its header and dims, and maps it for this process (its
    /// creator): host data follows the dims, zero-filled; `device` memory holds a CUDA
    /// segment's.
    fn create(&self, device: Option<DeviceMemory>) -> Result<Mapping> {
        let page = page_size();
        let data_offset = self.data_offset();
        let data_pages = match device {
            Some(_) => 0,
            None => self.data_len.div_ceil(page).max(1),
        };
        let segment_len = data_pages
            .checked_mul(page)
            .and_then(|len| len.checked_add(data_offset))
            .filter(|&len| len <= isize::MAX as usize)
            .ok_or(Error::AllocationFailed(self.data_len))?;
        check_backable(segment_len)?;

        release_taken_handoffs();
        sweep::sweep_once();
        let token = random_token();
        let fd = create_sealed(segment_len, token)?;
        let name = Handle {
            pid: std::process::id(),
            fd: fd.as_raw_fd(),
            token,
        }
        .format();
        let base = map(fd.as_raw_fd(), segment_len, &name)?;
        let ndim = self.shape.len();
        let header = Header {
            magic: MAGIC,
            layout_version: LAYOUT_VERSION,
            ndim: ndim as u32,
            refcount: AtomicU32::new(1),
            handoffs: AtomicU32::new(0),
            flags: self.flags.bits(),
            dtype: self.dtype.to_raw(),
            device: self.device.to_raw(),
            handed: AtomicU32::new(0),
            data_offset: data_offset as u64,
            data_len: self.data_len as u64,
            segment_len: segment_len as u64,
            token,
            device_uuid: self.device_uuid,
        };
        // SAFETY: the fresh mapping is `segment_len` writable bytes, page-aligned; the header
        // and dims fit before `data_offset` by construction.
        unsafe {
            std::ptr::write(base as *mut Header, header);
            let dims = base.add(HEADER_LEN) as *mut i64;
            std::ptr::copy_nonoverlapping(self.shape.as_ptr(), dims, ndim);
            std::ptr::copy_nonoverlapping(self.strides.as_ptr(), dims.add(ndim), ndim);
        }
        Ok(Mapping {
            base,
            len: segment_len,
            name,
            handed_over: AtomicBool::new(false),
            descriptor: Some(fd),
            kept: AtomicBool::new(false),
            device,
        })
    }
}

/// Refuses a segment the system could not back, with the error a failed allocation gives.
///
/// Pages of a memory file are charged only when touched, so creating one never meets the
/// kernel's overcommit check, and touching an unbackable one summons the OOM killer. This asks
/// the kernel the question a private allocation of the same size would ask — it maps (and at
/// once unmaps) that many bytes of private, accounted, untouched memory — so that
/// [`empty`] fails exactly where [`Tensor::empty`] fails, with [`Error::AllocationFailed`].
fn check_backable(len: usize) -> Result<()> {
    // SAFETY: a fresh private mapping that nothing touches; unmapped below.
    let probe = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if probe == libc::MAP_FAILED {
        return Err(Error::AllocationFailed(len));
    }
    // SAFETY: exactly the mapping made above.
    unsafe { libc::munmap(probe, len) };
    Ok(())
}

/// A random, nonzero token for a new segment.
fn random_token() -> u64 {
    let mut bytes = [0u8; 8];
    // SAFETY: fills at most 8 bytes of an 8-byte buffer.
    let n = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), 8, 0) };
    let random = u64::from_ne_bytes(bytes);
    if n == 8 && random != 0 {
        return random;
    }
    // No entropy source: the clock and a counter still make the token unique in practice.
    use std::sync::atomic::AtomicU64;
    static COUNTER: AtomicU64 = AtomicU64::new(1);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    (nanos ^ (u64::from(std::process::id()) << 32))
        .wrapping_add(COUNTER.fetch_add(1, Ordering::Relaxed))
        | 1
}

/// Creates an anonymous shared-memory file of `len` bytes and seals its size.
fn create_sealed(len: usize, token: u64) -> Result<OwnedFd> {
    let label = format!("dlbridge-{token:016x}");
    let cname = CString::new(label.clone()).expect("no NUL in a formatted name");
    // SAFETY: a valid C string; the flags ask for a close-on-exec, sealable file.
    let raw =
        unsafe { libc::memfd_create(cname.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING) };
    if raw < 0 {
        return Err(os_error("create", &label));
    }
    // SAFETY: a fresh descriptor that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    // A keeper gets the descriptor under the same number, next to its standard streams: keep the
    // number above them (a host may have closed stdin, freeing 0).
    let fd = if raw < 3 {
        // SAFETY: duplicates our descriptor to the lowest free number >= 3, close-on-exec.
        let dup = unsafe { libc::fcntl(raw, libc::F_DUPFD_CLOEXEC, 3) };
        if dup < 0 {
            return Err(os_error("create", &label));
        }
        // SAFETY: a fresh descriptor that nothing else owns (`fd`, the original, closes here).
        unsafe { OwnedFd::from_raw_fd(dup) }
    } else {
        fd
    };
    // SAFETY: resizing our own fresh file.
    if unsafe { libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) } != 0 {
        return Err(os_error("resize", &label));
    }
    let seals = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;
    // SAFETY: adding seals to our own file; no other process can reach it yet.
    if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, seals) } != 0 {
        return Err(os_error("seal", &label));
    }
    Ok(fd)
}

/// Opens a segment by handle and returns a tensor over it (no copy). The segment's header is
/// validated like any foreign tensor; bad or truncated segments give [`Error::ShmInvalid`]. A
/// handed-over segment ([`SharedTensor::handoff`]) opens once per pending hand-over: the first
/// opener takes it, later and racing ones get [`Error::ShmNotFound`]. Opening never waits: a
/// segment another process holds a file lease on gives [`Error::ShmIo`] at once.
pub fn open(handle: &str, access: Access) -> Result<Tensor> {
    release_taken_handoffs();
    let (mapping, header, dims) = map_checked(handle, Claim::Open, access)?;
    tensor_over(mapping, &header, dims, access)
}

/// Reserves one reference for a future [`open`], as [`SharedTensor::handoff`] does: the segment
/// then survives until that opener is done, even if every current side lets go first, as long
/// as the process holding its descriptor lives (its creator keeps the descriptor for the
/// pending opener).
pub fn reserve(handle: &str) -> Result<()> {
    release_taken_handoffs();
    let (mapping, _, _) = map_checked(handle, Claim::Reserve, Access::ReadWrite)?;
    mapping.header().handoffs.fetch_add(1, Ordering::AcqRel);
    mapping.handed_over.store(true, Ordering::Release);
    Ok(())
}

/// What a mapper claims of a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Claim {
    /// A reference for an opener: a pending hand-over if there is one, else (unless the segment
    /// was handed over) a new reference.
    Open,
    /// A new reference, to be passed on as a pending hand-over.
    Reserve,
}

/// Maps a segment, copies and checks its header and dims, and takes a reference as `claim`
/// says. [`Access::ReadOnly`] remaps the data pages copy-on-write. An opener that took the last
/// pending hand-over has the keeper release its descriptor.
fn map_checked(
    handle: &str,
    claim: Claim,
    access: Access,
) -> Result<(Mapping, HeaderCopy, Vec<i64>)> {
    let parsed = Handle::parse(handle)?;
    let (fd, size) = open_descriptor(&parsed, handle)?;
    if size < HEADER_LEN {
        return Err(invalid(
            handle,
            format!("truncated: {size} bytes, a header needs {HEADER_LEN}"),
        ));
    }
    // The mapping keeps the memory alive; this process's descriptor closes when `fd` goes.
    let base = map(fd.as_raw_fd(), size, handle)?;
    // Until a reference is claimed, unmap without touching the counters.
    let unmap = |e: Error| {
        // SAFETY: exactly the mapping made above, not yet owned by anything.
        unsafe { libc::munmap(base as *mut libc::c_void, size) };
        e
    };
    // SAFETY: the mapping is at least HEADER_LEN readable bytes and page-aligned.
    let mut copy = unsafe { HeaderCopy::read(base) };
    if copy.magic == MAGIC && copy.layout_version == LAYOUT_VERSION && copy.token != parsed.token {
        // The descriptor slot now holds another segment: ours is gone.
        return Err(unmap(Error::ShmNotFound(handle.to_owned())));
    }
    check_header(&copy, size, handle).map_err(unmap)?;
    // A CUDA segment's memory is mapped before the claim: an opener that cannot map it (no
    // driver, another machine's device) leaves the hand-over to another.
    let device = if claim == Claim::Open && copy.device.device_type == crate::ffi::kDLCUDA {
        Some(open_device(&parsed, &mut copy, handle).map_err(unmap)?)
    } else {
        None
    };
    if access == Access::ReadOnly {
        remap_private(
            fd.as_raw_fd(),
            base,
            size,
            copy.data_offset as usize,
            handle,
        )
        .map_err(unmap)?;
    }
    // SAFETY: check_header proved the dims lie inside the mapping, before `data_offset`.
    let dims = unsafe { copy.read_dims(base) };
    // SAFETY: as above; only the atomic counters are used through this reference.
    let header = unsafe { &*(base as *const Header) };
    let handed = claim_reference(header, handle, claim).map_err(unmap)?;
    if handed && header.handoffs.load(Ordering::Acquire) == 0 && parsed.pid != std::process::id() {
        // This opener took the last pending hand-over: the keeper's descriptor can go.
        keeper::release_taken(parsed.pid);
    }
    let mapping = Mapping {
        base,
        len: size,
        name: handle.to_owned(),
        handed_over: AtomicBool::new(false),
        descriptor: None,
        kept: AtomicBool::new(false),
        device,
    };
    Ok((mapping, copy, dims))
}

/// Maps a CUDA segment's device memory, whose descriptor the keeper the handle names gives out,
/// and numbers the header copy's device as this process does.
fn open_device(parsed: &Handle, copy: &mut HeaderCopy, handle: &str) -> Result<DeviceMemory> {
    let descriptor = match keeper::device_descriptor(parsed.pid, parsed.fd, parsed.token) {
        Ok(Some(descriptor)) => descriptor,
        Ok(None) => return Err(Error::ShmNotFound(handle.to_owned())),
        Err(e) if matches!(e.raw_os_error(), Some(libc::ECONNREFUSED | libc::ENOENT)) => {
            return Err(invalid(
                handle,
                "a CUDA segment opens through its hand-over's handle only, and no keeper \
                 process answers for this one",
            ))
        }
        Err(e) => {
            return Err(Error::ShmIo {
                op: "open device memory",
                name: handle.to_owned(),
                reason: e.to_string(),
            })
        }
    };
    let (allocation, device) = device::import(
        &descriptor,
        copy.data_len as usize,
        &copy.device_uuid,
        handle,
    )?;
    copy.device.device_id = device.id;
    Ok(DeviceMemory {
        allocation,
        descriptor: None,
    })
}

/// Replaces the data pages `[offset, size)` of the shared mapping at `base` by a private,
/// copy-on-write mapping of the same file range: reads see the segment (until this process
/// writes a page), writes stay in this process.
fn remap_private(
    fd: libc::c_int,
    base: *mut u8,
    size: usize,
    offset: usize,
    name: &str,
) -> Result<()> {
    if offset >= size {
        return Ok(());
    }
    // SAFETY: `[base + offset, base + size)` lies inside our own fresh mapping (check_header
    // proved `offset` page-aligned and inside it), which nothing else uses yet; MAP_FIXED
    // replaces exactly those pages.
    let data = unsafe {
        libc::mmap(
            base.add(offset).cast(),
            size - offset,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_FIXED,
            fd,
            offset as libc::off_t,
        )
    };
    if data == libc::MAP_FAILED {
        return Err(os_error("map", name));
    }
    Ok(())
}

/// Opens the segment a handle names, read-write, and returns its descriptor and size.
///
/// The file behind `/proc/<pid>/fd/<fd>` is first named without being opened (`O_PATH`, so a
/// device or FIFO that took over the descriptor number is never opened), and accepted only if it
/// is a regular file whose size is sealed: a segment this process maps can never shrink.
fn open_descriptor(handle: &Handle, text: &str) -> Result<(OwnedFd, usize)> {
    let not_found = || Error::ShmNotFound(text.to_owned());
    let path = CString::new(handle.descriptor_path()).expect("no NUL in a formatted path");
    // SAFETY: a valid C string; O_PATH opens nothing but a reference to the file.
    let raw = unsafe { libc::open(path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
    if raw < 0 {
        return Err(match std::io::Error::last_os_error().raw_os_error() {
            Some(libc::ENOENT | libc::ESRCH | libc::ENOTDIR) => not_found(),
            _ => os_error("open", text),
        });
    }
    // SAFETY: a fresh descriptor that nothing else owns.
    let reference = unsafe { OwnedFd::from_raw_fd(raw) };
    let regular = fstat(&reference).is_some_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFREG);
    if !regular {
        return Err(not_found());
    }
    let again = CString::new(format!("/proc/self/fd/{}", reference.as_raw_fd()))
        .expect("no NUL in a formatted path");
    // SAFETY: a valid C string naming the regular file referenced above.
    let raw = unsafe {
        libc::open(
            again.as_ptr(),
            libc::O_RDWR | libc::O_CLOEXEC | libc::O_NOCTTY | libc::O_NONBLOCK,
        )
    };
    if raw < 0 {
        let error = std::io::Error::last_os_error();
        let reason = if error.raw_os_error() == Some(libc::EWOULDBLOCK) {
            // Another process holds a file lease on it: a blocking open would wait for the
            // kernel's lease-break time.
            format!("another process holds a file lease on the segment ({error})")
        } else {
            error.to_string()
        };
        return Err(Error::ShmIo {
            op: "open",
            name: text.to_owned(),
            reason,
        });
    }
    // SAFETY: a fresh descriptor that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: F_GET_SEALS reads a property of our descriptor's file.
    let seals = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GET_SEALS) };
    let sealed = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW;
    if seals < 0 {
        // Not a sealable memory file: whatever holds that descriptor now is no segment.
        return Err(not_found());
    }
    if seals & sealed != sealed {
        return Err(invalid(text, "the segment's size is not sealed"));
    }
    let size = fstat(&fd).map_or(0, |st| st.st_size.max(0) as usize);
    Ok((fd, size))
}

/// `fstat` of a descriptor.
fn fstat(fd: &OwnedFd) -> Option<libc::stat> {
    // SAFETY: `st` is plain data that fstat fills for our descriptor.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        (libc::fstat(fd.as_raw_fd(), &mut st) == 0).then_some(st)
    }
}

/// A segment's header fields, copied once out of the shared mapping.
///
/// Any process that can open a segment can write its header at any time, so opening reads each
/// field exactly once into this private copy, checks the copy, and builds the tensor from the
/// copy alone: nothing it has checked can change afterwards.
struct HeaderCopy {
    magic: [u8; 8],
    layout_version: u32,
    ndim: u32,
    flags: u64,
    dtype: DLDataType,
    device: DLDevice,
    data_offset: u64,
    data_len: u64,
    segment_len: u64,
    token: u64,
    device_uuid: [u8; 16],
}

impl HeaderCopy {
    /// Copies the header at `base` with one volatile read per field.
    ///
    /// # Safety
    /// `base` points at least `HEADER_LEN` mapped, readable bytes aligned for [`Header`].
    unsafe fn read(base: *const u8) -> HeaderCopy {
        let h = base as *const Header;
        // SAFETY: each field lies inside the mapped header (the function's contract); volatile
        // reads never assume the bytes stay unchanged, and every bit pattern is a valid value.
        unsafe {
            HeaderCopy {
                magic: std::ptr::read_volatile(std::ptr::addr_of!((*h).magic)),
                layout_version: std::ptr::read_volatile(std::ptr::addr_of!((*h).layout_version)),
                ndim: std::ptr::read_volatile(std::ptr::addr_of!((*h).ndim)),
                flags: std::ptr::read_volatile(std::ptr::addr_of!((*h).flags)),
                dtype: std::ptr::read_volatile(std::ptr::addr_of!((*h).dtype)),
                device: std::ptr::read_volatile(std::ptr::addr_of!((*h).device)),
                data_offset: std::ptr::read_volatile(std::ptr::addr_of!((*h).data_offset)),
                data_len: std::ptr::read_volatile(std::ptr::addr_of!((*h).data_len)),
                segment_len: std::ptr::read_volatile(std::ptr::addr_of!((*h).segment_len)),
                token: std::ptr::read_volatile(std::ptr::addr_of!((*h).token)),
                device_uuid: std::ptr::read_volatile(std::ptr::addr_of!((*h).device_uuid)),
            }
        }
    }

    /// Copies the `2 * ndim` dims (shape, then strides) that follow the header at `base`.
    ///
    /// # Safety
    /// [`check_header`] accepted this copy for a mapping at `base`: the dims lie inside it.
    unsafe fn read_dims(&self, base: *const u8) -> Vec<i64> {
        // SAFETY: the dims lie inside the mapping (the function's contract), 8-byte aligned
        // after the header; volatile reads, as for the header.
        unsafe {
            let dims = base.add(HEADER_LEN) as *const i64;
            (0..2 * self.ndim as usize)
                .map(|i| std::ptr::read_volatile(dims.add(i)))
                .collect()
        }
    }
}

/// Checks everything in the header except the tensor fields (those go through validation).
fn check_header(h: &HeaderCopy, size: usize, handle: &str) -> Result<()> {
    if h.magic != MAGIC {
        return Err(invalid(handle, "not a dlbridge segment (bad magic bytes)"));
    }
    if h.layout_version != LAYOUT_VERSION {
        return Err(invalid(
            handle,
            format!(
                "segment layout version {} (this build reads {LAYOUT_VERSION})",
                h.layout_version
            ),
        ));
    }
    if h.ndim as usize > MAX_NDIM {
        return Err(Error::NdimOutOfRange(h.ndim.into()));
    }
    let dims_end = HEADER_LEN + 16 * h.ndim as usize;
    let (offset, len) = (h.data_offset as usize, h.data_len as usize);
    if h.segment_len as usize != size {
        return Err(invalid(
            handle,
            format!(
                "truncated or resized: header says {} bytes, segment has {size}",
                h.segment_len
            ),
        ));
    }
    // A CUDA segment's data is in device memory: its segment ends where host data would start.
    let cuda = h.device.device_type == crate::ffi::kDLCUDA;
    let fits = if cuda {
        offset == size
    } else {
        offset.checked_add(len).is_some_and(|end| end <= size)
    };
    if offset % page_size() != 0 || offset < dims_end || !fits {
        return Err(invalid(
            handle,
            format!(
                "data at {offset}..+{len} does not fit {} {size}-byte segment after the header",
                crate::indefinite_article(&size.to_string())
            ),
        ));
    }
    if Device::from_raw(h.device)? != Device::CPU && !cuda {
        return Err(invalid(handle, "segments hold host or CUDA memory only"));
    }
    Ok(())
}

/// Takes a reference as `claim` says: for [`Claim::Open`], a pending hand-over if there is one,
/// else — unless the segment was handed over, whose openers are its hand-overs' takers only —
/// a new one; for [`Claim::Reserve`], a new one. A new reference needs a live one (some side
/// still holds the segment). Returns whether a hand-over was taken.
fn claim_reference(h: &Header, handle: &str, claim: Claim) -> Result<bool> {
    let take = |counter: &AtomicU32, from_zero: bool| {
        counter
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| match n {
                0 if !from_zero => None,
                n => n.checked_add(1),
            })
            .is_ok()
    };
    if claim == Claim::Open {
        let taken = h
            .handoffs
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .is_ok();
        if taken {
            return Ok(true);
        }
        if h.handed.load(Ordering::Acquire) != 0 {
            return Err(Error::ShmNotFound(handle.to_owned()));
        }
    }
    if take(&h.refcount, false) {
        Ok(false)
    } else {
        Err(Error::ShmNotFound(handle.to_owned()))
    }
}

/// Validates the tensor fields of a checked header copy (`dims`: shape then strides) like any
/// foreign tensor, for data at `data`, and keeps the layout inside the data area.
/// Returns the validated tensor and its byte span relative to the data area. Packed sub-byte
/// dtypes are refused, as [`empty`] refuses them.
fn check_layout(
    h: &HeaderCopy,
    dims: &mut [i64],
    data: *mut u8,
    name: &str,
) -> Result<(crate::validate::Validated, layout::ByteSpan)> {
    let ndim = h.ndim as usize;
    let flags = Flags::from_bits_retain(h.flags);
    let len = h.data_len as usize;
    let (shape, strides) = dims.split_at_mut(ndim);
    let raw = DLTensor {
        data: data as *mut libc::c_void,
        device: h.device,
        ndim: ndim as i32,
        dtype: h.dtype,
        shape: shape.as_mut_ptr(),
        strides: strides.as_mut_ptr(),
        byte_offset: 0,
    };
    // SAFETY: shape and strides point at `ndim` local values each.
    let v = unsafe { validate(&raw, flags)? };
    let (shape, strides) = (&*shape, &*strides);
    let item = v
        .dtype
        .storage_size(flags.contains(Flags::IS_SUBBYTE_TYPE_PADDED))
        .ok_or_else(|| {
            invalid(
                name,
                format!("packed {} elements cannot be shared", v.dtype),
            )
        })?;
    let span = layout::byte_span(shape, strides, item, 0)?;
    if !span.is_empty() && (span.start < 0 || span.end as usize > len) {
        return Err(invalid(
            name,
            format!(
                "shape {shape:?} with strides {strides:?} reaches outside the {len}-byte data area"
            ),
        ));
    }
    Ok((v, span))
}

/// Checks a segment's bytes exactly as [`open`] checks a mapped segment — header copied once and
/// checked against `bytes.len()`, dims copied, tensor fields validated, layout kept inside the
/// data area — without the system calls around it. Returns the shape and the byte range of
/// `bytes` the tensor would reach. The entry point of the `shm_open` fuzz target.
#[doc(hidden)]
pub fn check_segment_bytes(bytes: &[u8]) -> Result<(Vec<i64>, std::ops::Range<usize>)> {
    let name = "fuzz-input";
    if bytes.len() < HEADER_LEN {
        return Err(invalid(name, format!("truncated: {} bytes", bytes.len())));
    }
    // An aligned private copy stands for the mapping (mappings are page-aligned).
    let mut words = vec![0u64; bytes.len().div_ceil(8)];
    // SAFETY: `words` holds at least `bytes.len()` bytes; the two buffers do not overlap.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), words.as_mut_ptr().cast(), bytes.len())
    };
    let base = words.as_mut_ptr().cast::<u8>();
    // SAFETY: `base` holds at least HEADER_LEN readable bytes, 8-byte aligned.
    let copy = unsafe { HeaderCopy::read(base) };
    check_header(&copy, bytes.len(), name)?;
    // SAFETY: check_header proved the dims lie inside the buffer, before `data_offset`.
    let mut dims = unsafe { copy.read_dims(base) };
    let data = base.wrapping_add(copy.data_offset as usize);
    let (_, span) = check_layout(&copy, &mut dims, data, name)?;
    let shape = dims[..copy.ndim as usize].to_vec();
    let start = copy.data_offset as usize;
    let reach = if span.is_empty() {
        start..start
    } else {
        start + span.start as usize..start + span.end as usize
    };
    Ok((shape, reach))
}

/// Builds the tensor over a referenced mapping from the checked copy of its header and dims
/// (never from the mapped header, which other processes may be changing).
fn tensor_over(
    mapping: Mapping,
    h: &HeaderCopy,
    mut dims: Vec<i64>,
    access: Access,
) -> Result<Tensor> {
    let ndim = h.ndim as usize;
    let mut flags = Flags::from_bits_retain(h.flags);
    let data = mapping.data(h.data_offset as usize);
    let (v, _) = check_layout(h, &mut dims, data, &mapping.name)?;
    let (shape, strides) = dims.split_at(ndim);
    if access == Access::ReadOnly {
        // Host data pages are private copy-on-write pages (map_checked): writes that ignore the
        // flag stay in this process. (See Access::ReadOnly for CUDA segments.)
        flags |= Flags::READ_ONLY;
    }
    // SAFETY: validated layout inside the data area, mapped for as long as the owner (the
    // mapping) lives.
    unsafe {
        Tensor::from_raw_parts(
            v.data,
            shape,
            Some(strides),
            v.dtype,
            v.device,
            flags,
            Box::new(mapping),
        )
    }
}

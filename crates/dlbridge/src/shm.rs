//! Shared-memory transport: tensors for runtimes that cannot share a process.
//!
//! A segment is a POSIX shared-memory object holding a small header (DLPack metadata and two
//! counters), the shape and strides, and the data at a page-aligned offset. The handle string is
//! the object's name. Exporting copies a tensor into a new segment once ([`export`]); a tensor
//! allocated in a segment from the start ([`empty`]) is shared with no copy at all. Opening
//! ([`open`]) maps the segment — read-only pages for [`Access::ReadOnly`] — and validates the
//! header like any foreign tensor; it never copies.
//!
//! Lifetime: the header counts the mappings that hold a reference. Creating a segment takes one,
//! each [`open`] takes one, and each side releases its own when its last tensor is dropped; the
//! side that releases the last reference removes the segment's name, so nothing is left behind.
//! A producer that will not outlive the hand-over calls [`SharedTensor::handoff`]: its reference
//! passes to the next [`open`] instead of being released. When that opener becomes the only
//! holder, the segment's name is removed at once, so the memory goes with the opener's mapping
//! even if its process dies without cleaning up.

use std::ffi::CString;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::dtype::DataType;
use crate::error::{Error, Result};
use crate::ffi::{DLDataType, DLDevice, DLTensor};
use crate::flags::Flags;
use crate::layout::{self, Order};
use crate::tensor::Tensor;
use crate::validate::validate;
use crate::view::TensorView;
use crate::{Device, MAX_NDIM};

/// First bytes of every segment.
const MAGIC: [u8; 8] = *b"DLBRIDGE";
/// Version of the segment layout below.
const LAYOUT_VERSION: u32 = 1;

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
    data_offset: u64,
    data_len: u64,
    segment_len: u64,
}

const HEADER_LEN: usize = std::mem::size_of::<Header>();

/// How an opened segment's data may be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// The data pages are mapped read-only and the tensor is flagged READ_ONLY.
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

/// What [`Error::UnknownName`] calls a malformed handle: the one classification of handle
/// errors, which every frontend maps to its own error (Python `ValueError`, Node `TypeError`
/// `ERR_DLBRIDGE_INVALID_SHM_HANDLE`, C `DLB_ERR_UNKNOWN_NAME`).
pub const HANDLE_WHAT: &str = "shared memory handle";

/// The object name for a handle: handles are plain names, which become "/name" for the OS.
/// A handle starts with a letter or digit (so never ".", ".." or a hidden name) and continues
/// with letters, digits, `-`, `_` and `.`, at most 200 bytes.
fn object_name(handle: &str) -> Result<CString> {
    let ok = handle.len() <= 200
        && handle
            .as_bytes()
            .first()
            .is_some_and(u8::is_ascii_alphanumeric)
        && handle
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
    if !ok {
        return Err(Error::UnknownName {
            what: HANDLE_WHAT,
            name: handle.to_owned(),
        });
    }
    Ok(CString::new(format!("/{handle}")).expect("no NUL in a validated handle"))
}

/// One mapping of a segment in this process. Dropping it releases its reference (unless handed
/// over) and unmaps.
struct Mapping {
    base: *mut u8,
    len: usize,
    name: String,
    handed_over: AtomicBool,
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
}

impl Drop for Mapping {
    fn drop(&mut self) {
        if !self.handed_over.load(Ordering::Acquire)
            && self.header().refcount.fetch_sub(1, Ordering::AcqRel) == 1
        {
            if let Ok(name) = object_name(&self.name) {
                // SAFETY: a valid C string; a failure (already removed) is harmless.
                unsafe { libc::shm_unlink(name.as_ptr()) };
            }
        }
        // SAFETY: `base`/`len` are exactly what mmap returned; nothing borrows the mapping any
        // more (tensors over it hold this Mapping alive).
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.len) };
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
    /// handle to send it. The segment then outlives this process until that consumer is done.
    pub fn handoff(self) -> String {
        let name = self.mapping.name.clone();
        self.mapping
            .header()
            .handoffs
            .fetch_add(1, Ordering::AcqRel);
        self.mapping.handed_over.store(true, Ordering::Release);
        name
    }
}

/// A new, zero-filled segment holding a C-contiguous tensor: `empty_shared` in the frontends.
pub fn empty(shape: &[i64], dtype: DataType) -> Result<SharedTensor> {
    create(shape, dtype, Flags::empty())
}

/// Copies `view` (any layout, host memory) into a new segment in C order. The segment's tensor
/// is flagged IS_COPIED, so the consumer knows this exchange cost one copy.
pub fn export(view: &TensorView<'_>) -> Result<SharedTensor> {
    view.require_host()?;
    let shared = create(
        view.shape(),
        view.dtype(),
        Flags::IS_COPIED | (view.flags() & Flags::IS_SUBBYTE_TYPE_PADDED),
    )?;
    crate::copy::copy_into(view, &shared.tensor.view())?;
    Ok(shared)
}

static COUNTER: AtomicU64 = AtomicU64::new(0);

fn create(shape: &[i64], dtype: DataType, flags: Flags) -> Result<SharedTensor> {
    let item = dtype
        .storage_size(flags.contains(Flags::IS_SUBBYTE_TYPE_PADDED))
        .ok_or_else(|| {
            Error::UnsupportedLayout(format!("packed {dtype} elements cannot be shared"))
        })?;
    let size = crate::tensor::check_shape(shape, item)?;
    let data_len = size * item;
    let strides = layout::compact_strides(shape, Order::C);
    let page = page_size();
    let dims_len = 16 * shape.len();
    let data_offset = (HEADER_LEN + dims_len).div_ceil(page) * page;
    let segment_len = data_offset + data_len.div_ceil(page).max(1) * page;

    let (fd, name) = create_object()?;
    let cname = object_name(&name)?;
    let fail = |e: Error| {
        // SAFETY: removing the object we just created; `fd` is ours to close.
        unsafe {
            libc::close(fd);
            libc::shm_unlink(cname.as_ptr());
        }
        e
    };
    // SAFETY: `fd` is an open shared-memory object.
    if unsafe { libc::ftruncate(fd, segment_len as libc::off_t) } != 0 {
        return Err(fail(os_error("resize", &name)));
    }
    let base = map(fd, segment_len, &name).map_err(fail)?;
    // SAFETY: the mapping keeps the object alive; the descriptor is no longer needed.
    unsafe { libc::close(fd) };
    let header = Header {
        magic: MAGIC,
        layout_version: LAYOUT_VERSION,
        ndim: shape.len() as u32,
        refcount: AtomicU32::new(1),
        handoffs: AtomicU32::new(0),
        flags: flags.bits(),
        dtype: dtype.to_raw(),
        device: Device::CPU.to_raw(),
        data_offset: data_offset as u64,
        data_len: data_len as u64,
        segment_len: segment_len as u64,
    };
    // SAFETY: the fresh mapping is `segment_len` writable bytes, page-aligned; the header and
    // dims fit before `data_offset` by construction.
    unsafe {
        std::ptr::write(base as *mut Header, header);
        let dims = base.add(HEADER_LEN) as *mut i64;
        std::ptr::copy_nonoverlapping(shape.as_ptr(), dims, shape.len());
        std::ptr::copy_nonoverlapping(strides.as_ptr(), dims.add(shape.len()), shape.len());
    }
    let mapping = Arc::new(Mapping {
        base,
        len: segment_len,
        name,
        handed_over: AtomicBool::new(false),
    });
    // SAFETY: the data area holds `data_len` zeroed, writable bytes: the compact layout's span.
    let tensor = unsafe {
        Tensor::from_raw_parts(
            base.add(data_offset),
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

/// Creates a new, uniquely named shared-memory object.
fn create_object() -> Result<(libc::c_int, String)> {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    for _ in 0..16 {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let name = format!("dlbridge-{}-{n}-{nanos:08x}", std::process::id());
        let cname = object_name(&name)?;
        // SAFETY: a valid C string; O_EXCL makes the name ours alone.
        let fd = unsafe {
            libc::shm_open(
                cname.as_ptr(),
                libc::O_CREAT | libc::O_EXCL | libc::O_RDWR,
                0o600,
            )
        };
        if fd >= 0 {
            return Ok((fd, name));
        }
        if std::io::Error::last_os_error().raw_os_error() != Some(libc::EEXIST) {
            return Err(os_error("create", &name));
        }
    }
    Err(Error::ShmIo {
        op: "create",
        name: "dlbridge-*".into(),
        reason: "no unused name found".into(),
    })
}

/// Opens a segment by handle and returns a tensor over it (no copy). The segment's header is
/// validated like any foreign tensor; bad or truncated segments give [`Error::ShmInvalid`].
pub fn open(handle: &str, access: Access) -> Result<Tensor> {
    let (mapping, header, dims) = map_checked(handle)?;
    tensor_over(mapping, &header, dims, access)
}

/// Reserves one reference for a future [`open`], as [`SharedTensor::handoff`] does: the segment
/// then survives until that opener is done, even if every current side lets go first.
pub fn reserve(handle: &str) -> Result<()> {
    let (mapping, _, _) = map_checked(handle)?;
    mapping.header().handoffs.fetch_add(1, Ordering::AcqRel);
    mapping.handed_over.store(true, Ordering::Release);
    Ok(())
}

/// Maps a segment, copies and checks its header and dims, and takes a reference.
fn map_checked(handle: &str) -> Result<(Mapping, HeaderCopy, Vec<i64>)> {
    let cname = object_name(handle)?;
    // SAFETY: a valid C string.
    let fd = unsafe { libc::shm_open(cname.as_ptr(), libc::O_RDWR, 0) };
    if fd < 0 {
        return Err(match std::io::Error::last_os_error().raw_os_error() {
            Some(libc::ENOENT) => Error::ShmNotFound(handle.to_owned()),
            _ => os_error("open", handle),
        });
    }
    // SAFETY: `st` is plain data filled by fstat on our descriptor.
    let size = unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        let ok = libc::fstat(fd, &mut st) == 0;
        if ok {
            Some(st.st_size as usize)
        } else {
            None
        }
    };
    let Some(size) = size.filter(|&s| s >= HEADER_LEN) else {
        // SAFETY: our descriptor.
        unsafe { libc::close(fd) };
        return Err(invalid(
            handle,
            format!(
                "truncated: {} bytes, a header needs {HEADER_LEN}",
                size.unwrap_or(0)
            ),
        ));
    };
    let mapped = map(fd, size, handle);
    // SAFETY: our descriptor; a mapping (if any) keeps the object alive.
    unsafe { libc::close(fd) };
    let base = mapped?;
    // Until a reference is claimed, unmap without touching the counters.
    let unmap = |e: Error| {
        // SAFETY: exactly the mapping made above, not yet owned by anything.
        unsafe { libc::munmap(base as *mut libc::c_void, size) };
        e
    };
    // SAFETY: the mapping is at least HEADER_LEN readable bytes and page-aligned.
    let copy = unsafe { HeaderCopy::read(base) };
    check_header(&copy, size, handle).map_err(unmap)?;
    // SAFETY: check_header proved the dims lie inside the mapping, before `data_offset`.
    let dims = unsafe { copy.read_dims(base) };
    // SAFETY: as above; only the atomic counters are used through this reference.
    let header = unsafe { &*(base as *const Header) };
    let handed = claim_reference(header, handle).map_err(unmap)?;
    if handed
        && header.refcount.load(Ordering::Acquire) == 1
        && header.handoffs.load(Ordering::Acquire) == 0
    {
        // This opener took over the only reference of a handed-over segment: nobody else may
        // open it, so its name goes now. The memory stays while mapped and is freed by the
        // kernel when this side unmaps — even if this process dies without cleaning up.
        // SAFETY: a valid C string; the object stays alive through our mapping.
        unsafe { libc::shm_unlink(cname.as_ptr()) };
    }
    let mapping = Mapping {
        base,
        len: size,
        name: handle.to_owned(),
        handed_over: AtomicBool::new(false),
    };
    Ok((mapping, copy, dims))
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
    if offset % page_size() != 0
        || offset < dims_end
        || offset.checked_add(len).is_none_or(|end| end > size)
    {
        return Err(invalid(
            handle,
            format!("data at {offset}..+{len} does not fit a {size}-byte segment after the header"),
        ));
    }
    if Device::from_raw(h.device)? != Device::CPU {
        return Err(invalid(handle, "segments hold host memory only"));
    }
    Ok(())
}

/// Takes a reference: a pending hand-over if there is one, else a new one — unless every side
/// already released the segment. Returns whether a hand-over was taken.
fn claim_reference(h: &Header, handle: &str) -> Result<bool> {
    let take = |counter: &AtomicU32, from_zero: bool| {
        counter
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| match n {
                0 if !from_zero => None,
                n => n.checked_add(1),
            })
            .is_ok()
    };
    let handed = h
        .handoffs
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
        .is_ok();
    if handed || take(&h.refcount, false) {
        Ok(handed)
    } else {
        Err(Error::ShmNotFound(handle.to_owned()))
    }
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
    let (offset, len) = (h.data_offset as usize, h.data_len as usize);
    let (shape, strides) = dims.split_at_mut(ndim);
    let raw = DLTensor {
        data: mapping.base.wrapping_add(offset) as *mut libc::c_void,
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
    let span = layout::byte_span(
        shape,
        strides,
        v.dtype
            .storage_size(flags.contains(Flags::IS_SUBBYTE_TYPE_PADDED))
            .unwrap_or(1),
        0,
    )?;
    if !span.is_empty() && (span.start < 0 || span.end as usize > len) {
        return Err(invalid(
            &mapping.name,
            format!(
                "shape {shape:?} with strides {strides:?} reaches outside the {len}-byte data area"
            ),
        ));
    }
    if access == Access::ReadOnly {
        flags |= Flags::READ_ONLY;
        let pages = (mapping.len - offset).max(1);
        // SAFETY: the data pages belong to this mapping; only this process's view of them changes.
        if unsafe {
            libc::mprotect(
                mapping.base.add(offset) as *mut libc::c_void,
                pages,
                libc::PROT_READ,
            )
        } != 0
        {
            return Err(os_error("protect", &mapping.name));
        }
    }
    // SAFETY: validated layout inside the data area, mapped (writable unless READ_ONLY) for as
    // long as the owner (the mapping) lives.
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

//! The importer check: a fake producer builds a `DLManagedTensorVersioned` or a legacy
//! `DLManagedTensor` from arbitrary bytes (every field: version, flags, ndim, shape, strides,
//! dtype code/bits/lanes, device, byte_offset, data and deleter), the core imports it, and
//! everything the importer promises is checked.
//!
//! This file is shared by the `import_versioned`/`import_legacy` fuzz targets and by the stable
//! test that replays the committed corpora, so it uses nothing but `dlbridge` and `std`.
//!
//! What is checked, for any input:
//! - the deleter runs exactly once (never when the producer gives none), and not before the
//!   importer is done with the tensor;
//! - a major version other than 1 is rejected after reading only `version`, `manager_ctx` and
//!   `deleter` (the fake allocates nothing beyond them, so a further read is a heap overflow);
//! - an accepted tensor has sane metadata, and its byte span equals an independent computation in
//!   128-bit integers and lies inside the address space;
//! - when the span lies inside the producer's data buffer (and the tensor is small), the copy
//!   kernel's C- and F-order copies and `read_at` return exactly the bytes a naive strided walk
//!   reads from the buffer; the buffer is sized exactly, so any read outside it is a heap
//!   overflow under the address sanitizer (and an index panic in the naive walk);
//! - an accepted tensor exports and re-imports with identical metadata, in both ABI kinds;
//! - non-host tensors are never read: copies fail with a typed error.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ffi::c_void;
use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};

use dlbridge::ffi::{
    DLDataType, DLDevice, DLManagedTensor, DLManagedTensorVersioned, DLPackVersion, DLTensor,
};
use dlbridge::{export, AsTensorView, Error, Flags, ManagedTensor, Order, Tensor, TensorView};

/// Bytes of the producer's data buffer; accepted layouts inside it are read and copied.
const BUFFER_LEN: usize = 512;
/// Largest copy (in bytes) the check makes: a zero stride can describe a huge tensor over a few
/// bytes, and the point is to check reads, not to allocate.
const MAX_COPY_BYTES: i128 = 1 << 12;
/// Shape and stride arrays are allocated with exactly `ndim` entries up to this many; beyond it
/// (far above `MAX_NDIM`) the importer must reject `ndim` without reading them.
const MAX_ARRAY_LEN: usize = 2 * dlbridge::MAX_NDIM;

/// Reads fields from the fuzz input; an exhausted input reads as zeros.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn byte(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }

    fn array<const N: usize>(&mut self) -> [u8; N] {
        let mut out = [0; N];
        out.iter_mut().for_each(|b| *b = self.byte());
        out
    }

    fn u16(&mut self) -> u16 {
        u16::from_le_bytes(self.array())
    }

    fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.array())
    }

    fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.array())
    }

    /// A value that is mostly `common[byte % len]`, and a raw 64-bit read for bytes at or above
    /// 0xF0, so both plausible and hostile values are one mutation away.
    fn pick(&mut self, common: &[i64]) -> i64 {
        match self.byte() {
            b if b < 0xF0 => common[b as usize % common.len()],
            0xF0 => i64::MAX,
            0xF1 => i64::MIN,
            0xF2 => 1 << 62,
            0xF3 => 1 << 32,
            0xF4 => 3_037_000_500, // ⌈√i64::MAX⌉: products of two overflow
            _ => self.u64() as i64,
        }
    }
}

/// How far a check got; the corpus replay uses it to show the corpus reaches every stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Outcome {
    /// The importer returned an error.
    Rejected,
    /// The importer accepted the tensor; its memory lies outside what the check can read.
    Accepted,
    /// Accepted, and the copies and reads were compared with a naive walk of the buffer.
    Read,
}

/// Where the producer's `data` pointer points.
#[derive(Debug, Clone, Copy)]
enum Data {
    Null,
    /// This many bytes into the data buffer.
    Buffer(usize),
    /// An arbitrary address, never dereferenced unless it happens to fall inside the buffer.
    Wild(usize),
}

/// One producer tensor, decoded from fuzz input.
#[derive(Debug)]
struct Case {
    null_managed: bool,
    version: DLPackVersion,
    flags: u64,
    ndim: i32,
    /// `None` sends a NULL pointer; otherwise the entries (`ndim` of them, within
    /// `MAX_ARRAY_LEN`).
    shape: Option<Vec<i64>>,
    strides: Option<Vec<i64>>,
    dtype: DLDataType,
    device: DLDevice,
    byte_offset: u64,
    data: Data,
    with_deleter: bool,
}

impl Case {
    fn decode(bytes: &[u8]) -> Case {
        let mut input = Input(bytes);
        let control = input.byte();
        let version = match input.byte() {
            b if b < 0xF0 => DLPackVersion {
                major: 1,
                minor: u32::from(b % 5),
            },
            _ => DLPackVersion {
                major: input.u32(),
                minor: input.u32(),
            },
        };
        let flags = match input.byte() {
            b if b < 0xF0 => u64::from(b & 7),
            _ => input.u64(),
        };
        let ndim = match input.byte() {
            b if b < 0xF0 => i32::from(b % 7),
            0xF0 => dlbridge::MAX_NDIM as i32,
            0xF1 => dlbridge::MAX_NDIM as i32 + 1,
            0xF2 => -1,
            _ => input.u32() as i32,
        };
        let dtype = DLDataType {
            code: match input.byte() {
                b if b < 0xE0 => b % 18,
                b => b,
            },
            bits: match input.byte() {
                b if b < 0xF0 => [8, 16, 32, 64, 4, 1, 6, 128, 0, 2, 24][b as usize % 11],
                _ => input.byte(),
            },
            lanes: match input.byte() {
                b if b < 0xF0 => [1, 1, 1, 1, 2, 4, 0, 3][b as usize % 8],
                _ => input.u16(),
            },
        };
        let device = DLDevice {
            device_type: match input.byte() {
                b if b < 0xC0 => dlbridge::ffi::kDLCPU,
                b if b < 0xF0 => [2, 3, 4, 7, 10, 11, 13, 0, 19, 5][b as usize % 10],
                _ => input.u32() as i32,
            },
            device_id: match input.byte() {
                b if b < 0xF0 => i32::from(b % 4),
                _ => input.u32() as i32,
            },
        };
        let byte_offset = match input.byte() {
            b if b < 0xF0 => u64::from(b % 64),
            _ => input.u64(),
        };
        let data = match (control >> 4) & 3 {
            2 => Data::Null,
            3 => Data::Wild(input.u64() as usize),
            _ => Data::Buffer(usize::from(input.byte()) % (BUFFER_LEN + 1)),
        };
        let len = usize::try_from(ndim).map_or(0, |n| n.min(MAX_ARRAY_LEN));
        let mut dims = |common: &[i64]| (0..len).map(|_| input.pick(common)).collect::<Vec<_>>();
        let shape = dims(&[1, 2, 3, 0, 4, 5, 1, 7, -1]);
        let strides = dims(&[1, 2, -1, 0, 3, -2, 4, 6, -3, 8, 12, 24]);
        Case {
            null_managed: control == 0xFF,
            version,
            flags,
            ndim,
            shape: (control & 2 == 0).then_some(shape),
            strides: (control & 1 == 0).then_some(strides),
            dtype,
            device,
            byte_offset,
            data,
            with_deleter: control & 4 == 0,
        }
    }
}

/// Everything the fake tensor points at; owned by the check, so it outlives the import.
struct Producer {
    shape: Option<Vec<i64>>,
    strides: Option<Vec<i64>>,
    buffer: Vec<u8>,
    deletions: AtomicUsize,
}

impl Producer {
    fn new(case: &Case) -> Producer {
        Producer {
            shape: case.shape.clone(),
            strides: case.strides.clone(),
            buffer: (0..BUFFER_LEN).map(|i| (i * 7 + 3) as u8).collect(),
            deletions: AtomicUsize::new(0),
        }
    }

    fn deletions(&self) -> usize {
        self.deletions.load(Ordering::SeqCst)
    }

    fn dl_tensor(&mut self, case: &Case) -> DLTensor {
        let array =
            |a: &mut Option<Vec<i64>>| a.as_mut().map_or(ptr::null_mut(), |v| v.as_mut_ptr());
        DLTensor {
            data: match case.data {
                Data::Null => ptr::null_mut(),
                Data::Buffer(at) => self.buffer.as_mut_ptr().wrapping_add(at).cast(),
                Data::Wild(address) => address as *mut c_void,
            },
            device: case.device,
            ndim: case.ndim,
            dtype: case.dtype,
            shape: array(&mut self.shape),
            strides: array(&mut self.strides),
            byte_offset: case.byte_offset,
        }
    }

    /// The address range of the data buffer.
    fn buffer_range(&self) -> std::ops::Range<usize> {
        let start = self.buffer.as_ptr() as usize;
        start..start + BUFFER_LEN
    }

    /// Reads `len` bytes at `address`, which must lie inside the buffer (an index panic otherwise:
    /// the importer accepted a layout this walk reads outside the memory it was given).
    fn read(&self, address: usize, len: usize) -> &[u8] {
        if len == 0 {
            return &[];
        }
        let at = address.wrapping_sub(self.buffer.as_ptr() as usize);
        &self.buffer[at..at + len]
    }
}

/// The deleter of the fake: counts, and releases nothing (the check owns the memory).
unsafe extern "C" fn count_versioned(managed: *mut DLManagedTensorVersioned) {
    // SAFETY: manager_ctx is the `Producer` the check keeps alive until after the import.
    unsafe {
        (*((*managed).manager_ctx as *const Producer))
            .deletions
            .fetch_add(1, Ordering::SeqCst)
    };
}

/// As [`count_versioned`], for legacy tensors.
unsafe extern "C" fn count_legacy(managed: *mut DLManagedTensor) {
    // SAFETY: as in `count_versioned`.
    unsafe {
        (*((*managed).manager_ctx as *const Producer))
            .deletions
            .fetch_add(1, Ordering::SeqCst)
    };
}

/// Imports the versioned tensor `bytes` describe and checks the importer's promises (see the
/// module docs). Panics on any violation.
pub fn check_versioned(bytes: &[u8]) -> Outcome {
    let case = Case::decode(bytes);
    if case.null_managed {
        // SAFETY: NULL is accepted and rejected without a read.
        let result = unsafe { ManagedTensor::from_versioned(ptr::null_mut()) };
        assert_eq!(result.unwrap_err(), Error::NullTensor);
        return Outcome::Rejected;
    }
    let mut producer = Producer::new(&case);
    let dl_tensor = producer.dl_tensor(&case);
    let managed = DLManagedTensorVersioned {
        version: case.version,
        manager_ctx: &producer as *const Producer as *mut c_void,
        deleter: case.with_deleter.then_some(count_versioned as _),
        flags: case.flags,
        dl_tensor,
    };
    let foreign_major = case.version.major != 1;
    // A producer of another major version promises only the first three fields: allocate
    // exactly those, so that reading any other field is a heap overflow.
    let size = if foreign_major {
        std::mem::offset_of!(DLManagedTensorVersioned, flags)
    } else {
        std::mem::size_of::<DLManagedTensorVersioned>()
    };
    let layout = Layout::from_size_align(size, std::mem::align_of::<DLManagedTensorVersioned>())
        .expect("a valid layout");
    // SAFETY: a non-zero size.
    let block = unsafe { alloc_zeroed(layout) };
    assert!(!block.is_null(), "allocation failed");
    // SAFETY: `block` holds `size` bytes, and `managed`'s first `size` bytes are its prefix.
    unsafe { ptr::copy_nonoverlapping(&managed as *const _ as *const u8, block, size) };
    let raw = block.cast::<DLManagedTensorVersioned>();
    // SAFETY: a producer tensor whose arrays hold `ndim` entries (or the importer must reject
    // `ndim` first); ownership passes to the importer.
    let result = unsafe { ManagedTensor::from_versioned(raw) };
    let outcome = match result {
        Ok(tensor) => {
            assert!(
                !foreign_major,
                "accepted major version {}",
                case.version.major
            );
            assert_eq!(tensor.version(), Some(case.version));
            assert_eq!(tensor.view().flags(), Flags::from_bits_retain(case.flags));
            check_accepted(&case, &producer, tensor)
        }
        Err(e) => {
            if foreign_major {
                assert_eq!(e, Error::UnsupportedVersion(case.version));
            }
            Outcome::Rejected
        }
    };
    assert_eq!(
        producer.deletions(),
        usize::from(case.with_deleter),
        "deleter count for {case:?}"
    );
    // SAFETY: allocated above with this layout; the importer is done with it.
    unsafe { dealloc(block, layout) };
    outcome
}

/// Imports the legacy tensor `bytes` describe (the importer's flags come from the input too) and
/// checks the importer's promises (see the module docs). Panics on any violation.
pub fn check_legacy(bytes: &[u8]) -> Outcome {
    let case = Case::decode(bytes);
    let flags = Flags::from_bits_retain(case.flags);
    if case.null_managed {
        // SAFETY: NULL is accepted and rejected without a read.
        let result = unsafe { ManagedTensor::from_legacy(ptr::null_mut(), flags) };
        assert_eq!(result.unwrap_err(), Error::NullTensor);
        return Outcome::Rejected;
    }
    let mut producer = Producer::new(&case);
    let dl_tensor = producer.dl_tensor(&case);
    let mut managed = Box::new(DLManagedTensor {
        dl_tensor,
        manager_ctx: &producer as *const Producer as *mut c_void,
        deleter: case.with_deleter.then_some(count_legacy as _),
    });
    // SAFETY: as in `check_versioned`; the box outlives the import.
    let result = unsafe { ManagedTensor::from_legacy(&mut *managed, flags) };
    let outcome = match result {
        Ok(tensor) => {
            assert!(tensor.is_legacy());
            assert_eq!(tensor.version(), None);
            assert_eq!(tensor.view().flags(), flags);
            check_accepted(&case, &producer, tensor)
        }
        Err(_) => Outcome::Rejected,
    };
    assert_eq!(
        producer.deletions(),
        usize::from(case.with_deleter),
        "deleter count for {case:?}"
    );
    outcome
}

/// The byte span of a layout computed in 128-bit integers: `(start, end)` relative to element 0.
fn reference_span(shape: &[i64], strides: &[i64], item: i128) -> (i128, i128) {
    if shape.contains(&0) {
        return (0, 0);
    }
    let (mut low, mut high) = (0i128, 0i128);
    for (&d, &s) in shape.iter().zip(strides) {
        let reach = i128::from(d - 1) * i128::from(s);
        if reach < 0 {
            low += reach;
        } else {
            high += reach;
        }
    }
    (low * item, (high + 1) * item)
}

/// Compact row-major strides in 128-bit integers.
fn reference_compact_strides(shape: &[i64]) -> Vec<i128> {
    let mut strides = vec![0i128; shape.len()];
    let mut step = 1i128;
    for (axis, &d) in shape.iter().enumerate().rev() {
        strides[axis] = step;
        step *= i128::from(d.max(1));
    }
    strides
}

/// Checks an accepted tensor, then drops it: the deleter must run exactly then.
fn check_accepted(case: &Case, producer: &Producer, tensor: ManagedTensor) -> Outcome {
    let view = tensor.view();
    let shape = view.shape();
    assert_eq!(shape.len(), case.ndim as usize);
    assert!(shape.len() <= dlbridge::MAX_NDIM);
    if let Some(sent) = &case.shape {
        assert_eq!(shape, &sent[..shape.len()]);
    }
    assert!(
        shape.iter().all(|&d| d >= 0),
        "negative dim accepted: {shape:?}"
    );
    let size: i128 = shape.iter().map(|&d| i128::from(d)).product();
    assert_eq!(size, view.size() as i128);
    match &case.strides {
        Some(s) => assert_eq!(view.strides(), &s[..shape.len()]),
        // Compact row-major; for empty tensors (whose strides mean nothing) they may saturate.
        None if size == 0 => {}
        None => assert!(view
            .strides()
            .iter()
            .zip(reference_compact_strides(shape))
            .all(|(&a, b)| i128::from(a) == b)),
    }
    assert_eq!(view.dtype().to_raw(), case.dtype);
    assert_eq!(view.device().to_raw(), case.device);
    // Packed elements occupy ⌈size·bits/8⌉ bytes from element 0 (they are C-contiguous).
    let (bytes, (start, end)) = match view.storage_size() {
        Some(item) => (
            size * item as i128,
            reference_span(shape, view.strides(), item as i128),
        ),
        None => {
            let bytes = (size * i128::from(view.dtype().total_bits()) + 7) / 8;
            (bytes, (0, bytes))
        }
    };
    assert!(bytes <= isize::MAX as i128);
    let span = view.byte_span();
    if size > 0 {
        assert_eq!((span.start as i128, span.end as i128), (start, end));
    }
    let data = view.data_ptr() as usize;
    assert_eq!(
        data,
        producer_data(case, producer).wrapping_add(case.byte_offset as usize)
    );
    if size > 0 {
        assert_ne!(
            producer_data(case, producer),
            0,
            "NULL data accepted for {size} elements"
        );
        let (lo, hi) = (data as i128 + start, data as i128 + end);
        assert!(
            lo >= 0 && hi <= isize::MAX as i128,
            "span [{lo:#x}, {hi:#x}) leaves the address space"
        );
    }
    let _ = (
        view.nbytes(),
        view.compact_order(),
        view.is_contiguous(Order::F),
    );
    if view.storage_size().is_none() {
        assert!(
            view.is_contiguous(Order::C),
            "packed elements accepted with strides {:?}",
            view.strides()
        );
    }

    let mut outcome = Outcome::Accepted;
    if !view.device().kind.is_host_accessible() {
        assert!(matches!(
            view.to_contiguous(Order::C),
            Err(Error::NotOnCpu(_))
        ));
        assert!(view.read_at::<u8>(&vec![0; shape.len()]).is_err());
    } else {
        let buffer = producer.buffer_range();
        let inside = size == 0
            || (data as i128 + start >= buffer.start as i128
                && data as i128 + end <= buffer.end as i128);
        if inside && bytes <= MAX_COPY_BYTES {
            check_reads(producer, &view);
            outcome = Outcome::Read;
        }
    }
    check_reexport(&tensor);
    assert_eq!(
        producer.deletions(),
        0,
        "deleter ran while the tensor was alive"
    );
    drop(tensor);
    outcome
}

/// The data address the producer sent.
fn producer_data(case: &Case, producer: &Producer) -> usize {
    match case.data {
        Data::Null => 0,
        Data::Buffer(at) => producer.buffer_range().start + at,
        Data::Wild(address) => address,
    }
}

/// Compares the copy kernel's C and F copies and `read_at` with a naive walk over the buffer.
fn check_reads(producer: &Producer, view: &TensorView<'_>) {
    let shape = view.shape();
    let Some(item) = view.storage_size() else {
        // Packed sub-byte elements: copied as bytes, C order only (validated C-contiguous).
        let copy = view.to_contiguous(Order::C).expect("a host copy");
        let nbytes = view.nbytes();
        assert_eq!(copy.view().nbytes(), nbytes);
        assert_eq!(
            bytes_of(&copy),
            producer.read(view.data_ptr() as usize, nbytes)
        );
        return;
    };
    let expected = |order: Order| -> Vec<u8> {
        let size = view.size();
        let mut out = Vec::with_capacity(size * item);
        let mut index = vec![0i64; shape.len()];
        let axes: Vec<usize> = match order {
            Order::C => (0..shape.len()).rev().collect(),
            Order::F => (0..shape.len()).collect(),
        };
        for _ in 0..size {
            let offset: i64 = index.iter().zip(view.strides()).map(|(i, s)| i * s).sum();
            let address = (view.data_ptr() as usize).wrapping_add((offset * item as i64) as usize);
            out.extend_from_slice(producer.read(address, item));
            for &axis in &axes {
                index[axis] += 1;
                if index[axis] < shape[axis] {
                    break;
                }
                index[axis] = 0;
            }
        }
        out
    };
    for order in [Order::C, Order::F] {
        let copy = view.to_contiguous(order).expect("a host copy");
        assert!(copy.view().is_contiguous(order));
        assert!(copy.flags().contains(Flags::IS_COPIED));
        assert_eq!(bytes_of(&copy), expected(order), "{order} copy of {view:?}");
    }
    if item == 1 && view.size() > 0 && view.dtype() == dlbridge::DataType::U8 {
        let last: Vec<usize> = shape.iter().map(|&d| d as usize - 1).collect();
        let offset: i64 = last
            .iter()
            .zip(view.strides())
            .map(|(&i, s)| i as i64 * s)
            .sum();
        let address = (view.data_ptr() as usize).wrapping_add(offset as usize);
        assert_eq!(
            view.read_at::<u8>(&last).unwrap(),
            producer.read(address, 1)[0]
        );
    }
}

/// The bytes of a compact tensor the check made.
fn bytes_of(t: &Tensor) -> &[u8] {
    let n = t.view().nbytes();
    if n == 0 {
        return &[];
    }
    // SAFETY: `t` is a compact, Rust-owned copy of `n` bytes that lives as long as the borrow.
    unsafe { std::slice::from_raw_parts(t.data_ptr(), n) }
}

/// Exports the tensor's description both ways and imports it back: same metadata, and each
/// export's deleter runs once (the original's stays pending until `tensor` drops).
fn check_reexport(tensor: &ManagedTensor) {
    let view = tensor.view();
    // Exports send NULL data for empty tensors (documented in `export`).
    let described = |v: &TensorView<'_>| {
        let data = if v.size() == 0 {
            ptr::null_mut()
        } else {
            v.data_ptr()
        };
        (
            data,
            v.shape().to_vec(),
            v.strides().to_vec(),
            v.dtype(),
            v.device(),
            v.flags(),
        )
    };
    let expected = described(&view);
    let again = || {
        // SAFETY: the re-described view borrows `tensor`, which outlives both exports below.
        unsafe {
            Tensor::from_raw_parts(
                view.data_ptr(),
                view.shape(),
                Some(view.strides()),
                view.dtype(),
                view.device(),
                view.flags(),
                Box::new(()),
            )
        }
        .expect("an accepted tensor re-describes")
    };
    let ptr = export::to_versioned(again(), Flags::empty());
    // SAFETY: a fresh export whose ownership passes back.
    let back = unsafe { ManagedTensor::from_versioned(ptr.as_ptr()) }.expect("re-import");
    assert_eq!(described(&back.view()), expected);
    drop(back);
    let ptr = export::to_legacy(again(), true).expect("legacy export");
    // SAFETY: as above.
    let back =
        unsafe { ManagedTensor::from_legacy(ptr.as_ptr(), view.flags()) }.expect("re-import");
    assert_eq!(described(&back.view()), expected);
}

//! CUDA segments: device memory shared between processes.
//!
//! A CUDA segment is a segment like any other (header, shape and strides in a sealed memory file)
//! whose data lives in one device allocation made shareable as a file descriptor
//! (`cuMemCreate` with `CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR`) instead of in the file.
//! [`export`] copies a CUDA tensor into a new allocation once, device to device; the consumer maps
//! that same allocation ([`import`]), without a copy. Such a descriptor cannot be reopened
//! through `/proc` as a memory file can, so a CUDA segment travels by hand-over only: the keeper
//! holds both descriptors and gives the consumer a duplicate of the device one
//! ([`super::keeper::device_descriptor`]). The driver frees the memory once no process maps it
//! and no descriptor of it is open: the producer may exit first, and a killed consumer's mapping
//! goes with it.

use std::os::fd::{AsFd, OwnedFd};

use crate::cuda_driver::{self, Copy2d, SharedAllocation};
use crate::error::{Error, Result};
use crate::layout;
use crate::stream_order::LEGACY_STREAM;
use crate::view::TensorView;
use crate::{Device, DeviceType};

/// Most copies one export issues (a layout that needs more is refused).
const MAX_COPIES: usize = 1 << 16;
/// The largest pitch a 2-D copy takes (`CU_DEVICE_ATTRIBUTE_MAX_PITCH` on current GPUs): rows
/// further apart are copied one by one.
const MAX_PITCH: usize = i32::MAX as usize;

/// How a tensor's elements reach the new allocation.
pub(super) enum CopyPlan {
    /// A dense layout (every byte of its span an element, no stride negative): the span is
    /// copied as it is and the strides kept.
    Span { bytes: usize, strides: Vec<i64> },
    /// Any other layout with positive strides: rows of `width` bytes, `height` at a time
    /// `src_pitch` bytes apart (one 2-D copy, or `height` plain ones when `by_row`), for each
    /// index of the outer dimensions (size and stride); the copy is C-contiguous.
    Rows {
        item: usize,
        width: usize,
        height: usize,
        src_pitch: usize,
        by_row: bool,
        outer: Vec<(i64, i64)>,
        strides: Vec<i64>,
    },
}

impl CopyPlan {
    /// The plan for `view`'s layout with `item`-byte elements. Broadcast (zero) and negative
    /// strides are refused with [`Error::UnsupportedLayout`]: make the tensor contiguous first.
    pub(super) fn of(view: &TensorView<'_>, item: usize) -> Result<CopyPlan> {
        let (shape, strides) = (view.shape(), view.strides());
        let count = layout::element_count(shape).unwrap_or(0).max(0) as usize;
        let span = layout::byte_span(shape, strides, item, 0)?;
        let unit = |d: usize| shape[d] == 1;
        if (0..shape.len()).all(|d| unit(d) || strides[d] >= 0)
            && span.start == 0
            && span.len() == count * item
        {
            return Ok(CopyPlan::Span {
                bytes: count * item,
                strides: strides.to_vec(),
            });
        }
        if let Some(d) = (0..shape.len()).find(|&d| !unit(d) && strides[d] <= 0) {
            return Err(Error::UnsupportedLayout(format!(
                "a CUDA tensor with strides {strides:?} (shape {shape:?}; dimension {d} has stride \
                 {}) cannot be shared: make it contiguous first",
                strides[d]
            )));
        }
        // Size-1 dimensions take no part in the copy, whatever their strides; some other
        // dimension has a size above 1 here (a layout of size-1 dimensions alone is dense).
        let dims: Vec<(i64, i64)> = shape
            .iter()
            .zip(strides)
            .filter(|(&n, _)| n != 1)
            .map(|(&n, &s)| (n, s))
            .collect();
        let k = dims.len();
        let (last_size, last_stride) = dims[k - 1];
        let (width, height, pitch, outer_len) = match (last_stride, k) {
            (1, 1) => (last_size as usize * item, 1, 0, 0),
            (1, _) => (
                last_size as usize * item,
                dims[k - 2].0,
                dims[k - 2].1,
                k - 2,
            ),
            _ => (item, last_size, last_stride, k - 1),
        };
        let src_pitch = pitch as usize * item;
        let by_row = height == 1 || src_pitch > MAX_PITCH;
        let outer = dims[..outer_len].to_vec();
        let blocks: usize = outer.iter().map(|&(n, _)| n as usize).product();
        let copies = blocks.saturating_mul(if by_row { height as usize } else { 1 });
        if copies > MAX_COPIES {
            return Err(Error::UnsupportedLayout(format!(
                "a CUDA tensor with shape {shape:?} and strides {strides:?} would take {copies} \
                 copies to share (at most {MAX_COPIES}): make it contiguous first"
            )));
        }
        Ok(CopyPlan::Rows {
            item,
            width,
            height: height as usize,
            src_pitch,
            by_row,
            outer,
            strides: layout::compact_strides(shape, layout::Order::C),
        })
    }

    /// Bytes the copy fills.
    pub(super) fn bytes(&self) -> usize {
        match self {
            CopyPlan::Span { bytes, .. } => *bytes,
            CopyPlan::Rows {
                width,
                height,
                outer,
                ..
            } => width * height * outer.iter().map(|&(n, _)| n as usize).product::<usize>(),
        }
    }

    /// The copy's strides (elements).
    pub(super) fn strides(&self) -> &[i64] {
        match self {
            CopyPlan::Span { strides, .. } | CopyPlan::Rows { strides, .. } => strides,
        }
    }

    /// Queues the copy from device address `src` to `dst` on the legacy stream, then waits for
    /// it: the consumer, in another process, reads the memory once it has the handle.
    fn run(&self, allocation: &SharedAllocation, src: u64, dst: u64) -> Result<()> {
        allocation.with_current(|calls| {
            match self {
                CopyPlan::Span { bytes: 0, .. } => {}
                CopyPlan::Span { bytes, .. } => calls.copy(dst, src, *bytes, LEGACY_STREAM)?,
                CopyPlan::Rows {
                    item,
                    width,
                    height,
                    src_pitch,
                    by_row,
                    outer,
                    ..
                } => {
                    let block = (width * height) as u64;
                    let mut index = vec![0i64; outer.len()];
                    let total: usize = outer.iter().map(|&(n, _)| n as usize).product();
                    for k in 0..total as u64 {
                        let offset: i64 = index
                            .iter()
                            .zip(outer)
                            .map(|(&i, &(_, stride))| i * stride)
                            .sum();
                        let (from, to) = (
                            src.wrapping_add_signed(offset * *item as i64),
                            dst + k * block,
                        );
                        if *by_row {
                            for row in 0..*height as u64 {
                                let at = from + row * *src_pitch as u64;
                                calls.copy(to + row * *width as u64, at, *width, LEGACY_STREAM)?;
                            }
                        } else {
                            let rows = Copy2d::new(from, *src_pitch, to, *width, *width, *height);
                            calls.copy_2d(&rows, LEGACY_STREAM)?;
                        }
                        for d in (0..index.len()).rev() {
                            index[d] += 1;
                            if index[d] < outer[d].0 {
                                break;
                            }
                            index[d] = 0;
                        }
                    }
                }
            }
            calls.stream_synchronize(LEGACY_STREAM)
        })
    }
}

/// A CUDA tensor's copy in a new shareable allocation, and the descriptor that shares it.
pub(super) struct Exported {
    pub(super) allocation: SharedAllocation,
    pub(super) descriptor: OwnedFd,
    pub(super) uuid: [u8; 16],
    pub(super) size: usize,
}

/// Copies the CUDA tensor `view` (`item`-byte elements) as `plan` says into a new allocation
/// on its device. The copy runs on the legacy stream and is waited for.
pub(super) fn export(view: &TensorView<'_>, plan: &CopyPlan) -> Result<Exported> {
    let ordinal = view.device().id;
    let uuid = cuda_driver::device_uuid(ordinal)?;
    let (allocation, descriptor) = SharedAllocation::create(ordinal, plan.bytes())?;
    plan.run(&allocation, view.data_ptr() as u64, allocation.address())?;
    let size = allocation.size();
    Ok(Exported {
        allocation,
        descriptor,
        uuid,
        size,
    })
}

/// Maps the `size`-byte allocation `descriptor` shares, made on the device with `uuid`, for
/// this process (loading the CUDA driver if it has not), read-write for the device (a read-only
/// open is a flag on the tensor: a device mapping without write access would turn a consumer's
/// write into a fatal fault). Returns the mapping and the device as this process numbers it.
/// Errors name the handle: a device this process does not see, or no driver, are
/// [`Error::ShmInvalid`].
pub(super) fn import(
    descriptor: &OwnedFd,
    size: usize,
    uuid: &[u8; 16],
    handle: &str,
) -> Result<(SharedAllocation, Device)> {
    let invalid = |reason: String| Error::ShmInvalid {
        name: handle.to_owned(),
        reason,
    };
    cuda_driver::load().map_err(|_| {
        invalid(
            "its memory is on a CUDA device and this process has no CUDA driver (libcuda.so.1)"
                .into(),
        )
    })?;
    let ordinal = cuda_driver::device_with_uuid(uuid)?.ok_or_else(|| {
        invalid(format!(
            "its memory is on CUDA device {}, which this process does not see",
            uuid_text(uuid)
        ))
    })?;
    let allocation = SharedAllocation::import(ordinal, descriptor.as_fd(), size)?;
    Ok((
        allocation,
        Device {
            kind: DeviceType::Cuda,
            id: ordinal,
        },
    ))
}

/// A device UUID as `nvidia-smi` writes it: `GPU-` and five groups of hexadecimal digits.
fn uuid_text(uuid: &[u8; 16]) -> String {
    let hex: String = uuid.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "GPU-{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

//! The copy kernel: any strided layout (negative strides included) into a compact C- or F-order
//! buffer, for any element size. Dimensions are reordered to follow the destination, size-1
//! dimensions dropped and mergeable dimensions coalesced, so contiguous runs become one `memcpy`.
//! A view's own copies ([`TensorView::to_contiguous`], [`TensorView::to_vec`]) are defined here,
//! so that the view module needs neither the kernel nor [`Tensor`].

use crate::dtype::Element;
use crate::error::{Error, Result};
use crate::flags::Flags;
use crate::layout::Order;
use crate::tensor::Tensor;
use crate::view::TensorView;

/// One loop of the copy: `n` steps of `src` and `dst` bytes.
#[derive(Debug, Clone, Copy)]
struct Axis {
    n: usize,
    src: isize,
    dst: isize,
}

/// Copies `view` into a new compact, Rust-owned CPU tensor in `order`, flagged IS_COPIED
/// (and writable: the copy is ours).
pub fn to_contiguous(view: &TensorView<'_>, order: Order) -> Result<Tensor> {
    view.require_host()?;
    let shape = view.shape();
    let dtype = view.dtype();
    let Some(item) = view.storage_size() else {
        // Packed sub-byte data is validated to be C-contiguous: copy its bytes as they are.
        if order == Order::F && !view.is_contiguous(Order::F) {
            return Err(Error::UnsupportedLayout(format!(
                "cannot reorder packed {dtype} elements to F order"
            )));
        }
        return copy_packed(view);
    };
    let padded = view.flags() & Flags::IS_SUBBYTE_TYPE_PADDED;
    let out = Tensor::alloc(shape, dtype, order, padded)?.with_flags(Flags::IS_COPIED);
    debug_assert_eq!(out.view().storage_size(), Some(item));
    copy_into(view, &out.view())?;
    Ok(out)
}

impl TensorView<'_> {
    /// All elements in logical row-major order, copied out.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        self.require_dtype::<T>()?;
        let copy = to_contiguous(self, Order::C)?;
        Ok(copy.view().as_slice::<T>()?.to_vec())
    }

    /// A compact copy in `order`, owned by Rust and flagged IS_COPIED.
    ///
    /// ```
    /// use dlbridge::{Order, Tensor};
    ///
    /// let t = Tensor::from_vec((0..6).collect::<Vec<i64>>(), &[2, 3])?;
    /// let f = t.view().to_contiguous(Order::F)?;
    /// assert_eq!(f.strides(), &[1, 2]);
    /// assert!(f.view().is_copied());
    /// assert_eq!(f.view().to_vec::<i64>()?, [0, 1, 2, 3, 4, 5]); // logical order
    /// # Ok::<(), dlbridge::Error>(())
    /// ```
    pub fn to_contiguous(&self, order: Order) -> Result<Tensor> {
        to_contiguous(self, order)
    }
}

/// Copies the elements of `src` into `dst`, which has the same shape and dtype and any
/// (writable, non-overlapping) layout. Both must be in host memory.
pub fn copy_into(src: &TensorView<'_>, dst: &TensorView<'_>) -> Result<()> {
    src.require_host()?;
    dst.require_host()?;
    if src.shape() != dst.shape() {
        return Err(Error::UnsupportedLayout(format!(
            "cannot copy shape {:?} into shape {:?}",
            src.shape(),
            dst.shape()
        )));
    }
    if src.dtype() != dst.dtype() {
        return Err(Error::DtypeMismatch {
            expected: dst.dtype().name(),
            actual: src.dtype().name(),
        });
    }
    if dst.is_read_only() {
        return Err(Error::ReadOnly);
    }
    let (Some(item), Some(dst_item)) = (src.storage_size(), dst.storage_size()) else {
        return Err(Error::UnsupportedLayout(format!(
            "packed {} elements cannot be copied element-wise",
            src.dtype()
        )));
    };
    if item != dst_item {
        return Err(Error::UnsupportedLayout(
            "source and destination disagree on sub-byte padding".into(),
        ));
    }
    if src.size() == 0 {
        return Ok(());
    }
    let (s, d) = (src.byte_span(), dst.byte_span());
    let (s0, d0) = (src.data_ptr() as isize, dst.data_ptr() as isize);
    if s0 + s.start < d0 + d.end && d0 + d.start < s0 + s.end {
        return Err(Error::UnsupportedLayout(
            "source and destination memory overlap".into(),
        ));
    }
    let axes: Vec<Axis> = src
        .shape()
        .iter()
        .zip(src.strides().iter().zip(dst.strides()))
        // Size-1 axes are never stepped along, and their strides may be anything: leave them out
        // (the byte strides of the others fit in isize, since their spans do).
        .filter(|&(&n, _)| n != 1)
        .map(|(&n, (&s, &d))| Axis {
            n: n as usize,
            src: s as isize * item as isize,
            dst: d as isize * item as isize,
        })
        .collect();
    // SAFETY: both spans are host memory valid for the views' lifetimes (TensorView invariant),
    // the destination is writable (not READ_ONLY) and the spans do not overlap (checked above).
    unsafe { copy_strided(src.data_ptr(), dst.data_ptr(), axes, item) };
    Ok(())
}

fn copy_packed(view: &TensorView<'_>) -> Result<Tensor> {
    let out = Tensor::alloc(view.shape(), view.dtype(), Order::C, Flags::empty())?
        .with_flags(Flags::IS_COPIED);
    let bytes = view.nbytes();
    if bytes > 0 {
        // SAFETY: both buffers hold `nbytes` bytes of the same compact packed layout.
        unsafe { std::ptr::copy_nonoverlapping(view.data_ptr(), out.data_ptr(), bytes) };
    }
    Ok(out)
}

/// Side of the square tiles used when the source's fastest axis is not the destination's:
/// 32×32 elements of up to 16 bytes stay within L1 while a tile is transposed.
const TILE: usize = 32;

/// Copies elements of `item` bytes along `axes` from `src` to `dst`.
///
/// # Safety
/// Every source element reached by the axes is readable, every destination element writable,
/// and the two ranges do not overlap.
unsafe fn copy_strided(src: *const u8, dst: *mut u8, axes: Vec<Axis>, item: usize) {
    let axes = simplify(axes);
    let n = axes.len();
    // A transpose-like pair (the source steps fastest along the outer axis) is copied in tiles.
    let tiled = n >= 2
        && axes[n - 1].src != item as isize
        && axes[n - 2].src.unsigned_abs() < axes[n - 1].src.unsigned_abs();
    let (outer, inner) = axes.split_at(n.saturating_sub(if tiled { 2 } else { 1 }));
    let copy_inner = |s: *const u8, d: *mut u8| match inner {
        // 0-d, or only size-1 dims: one element.
        // SAFETY: per the function contract.
        [] => unsafe { std::ptr::copy_nonoverlapping(s, d, item) },
        // SAFETY: `s`/`d` start a run inside the spans (per the function contract).
        [run] => unsafe { copy_run(s, d, *run, item) },
        // SAFETY: as above, for a block.
        [rows, run] => unsafe { copy_tiled(s, d, *rows, *run, item) },
        _ => unreachable!("at most two inner axes"),
    };
    let mut index = vec![0usize; outer.len()];
    let (mut s, mut d) = (src, dst);
    loop {
        copy_inner(s, d);
        // Advance the odometer over the outer axes, last fastest.
        let mut axis = outer.len();
        loop {
            if axis == 0 {
                return;
            }
            axis -= 1;
            let a = outer[axis];
            index[axis] += 1;
            s = s.wrapping_offset(a.src);
            d = d.wrapping_offset(a.dst);
            if index[axis] < a.n {
                break;
            }
            s = s.wrapping_offset(-a.src * a.n as isize);
            d = d.wrapping_offset(-a.dst * a.n as isize);
            index[axis] = 0;
        }
    }
}

/// Copies a `rows × run` block tile by tile, so that both the source's and the destination's
/// cache lines are reused while they are hot.
///
/// # Safety
/// As for [`copy_strided`], for this block.
unsafe fn copy_tiled(src: *const u8, dst: *mut u8, rows: Axis, run: Axis, item: usize) {
    for j0 in (0..rows.n).step_by(TILE) {
        for i0 in (0..run.n).step_by(TILE) {
            let piece = Axis {
                n: TILE.min(run.n - i0),
                ..run
            };
            for j in j0..(j0 + TILE).min(rows.n) {
                let s = src.wrapping_offset(rows.src * j as isize + run.src * i0 as isize);
                let d = dst.wrapping_offset(rows.dst * j as isize + run.dst * i0 as isize);
                // SAFETY: row `j`, elements `i0..i0 + piece.n` of the block, inside both spans.
                unsafe { copy_run(s, d, piece, item) };
            }
        }
    }
}

/// Drops size-1 axes, orders axes so the destination's fastest is last (ties: the source's), and merges neighbours
/// that step through memory as one.
fn simplify(mut axes: Vec<Axis>) -> Vec<Axis> {
    axes.retain(|a| a.n != 1);
    axes.sort_by_key(|a| std::cmp::Reverse((a.dst.unsigned_abs(), a.src.unsigned_abs())));
    let mut merged: Vec<Axis> = Vec::with_capacity(axes.len());
    for a in axes {
        match merged.last_mut() {
            Some(prev) if prev.src == a.src * a.n as isize && prev.dst == a.dst * a.n as isize => {
                *prev = Axis {
                    n: prev.n * a.n,
                    src: a.src,
                    dst: a.dst,
                };
            }
            _ => merged.push(a),
        }
    }
    merged
}

/// Copies one innermost run of `axis.n` elements.
///
/// # Safety
/// As for [`copy_strided`], for this run.
#[inline]
unsafe fn copy_run(src: *const u8, dst: *mut u8, axis: Axis, item: usize) {
    let item_stride = item as isize;
    if axis.src == item_stride && axis.dst == item_stride {
        // SAFETY: a contiguous run of `n * item` bytes on both sides.
        unsafe { std::ptr::copy_nonoverlapping(src, dst, axis.n * item) };
        return;
    }
    macro_rules! gather {
        ($ty:ty) => {{
            let (mut s, mut d) = (src, dst);
            for _ in 0..axis.n {
                // SAFETY: one element of the run on both sides; unaligned access is allowed.
                unsafe { (d as *mut $ty).write_unaligned((s as *const $ty).read_unaligned()) };
                s = s.wrapping_offset(axis.src);
                d = d.wrapping_offset(axis.dst);
            }
        }};
    }
    match item {
        1 => gather!(u8),
        2 => gather!(u16),
        4 => gather!(u32),
        8 => gather!(u64),
        16 => gather!(u128),
        _ => {
            let (mut s, mut d) = (src, dst);
            for _ in 0..axis.n {
                // SAFETY: one element of the run on both sides.
                unsafe { std::ptr::copy_nonoverlapping(s, d, item) };
                s = s.wrapping_offset(axis.src);
                d = d.wrapping_offset(axis.dst);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DataType;

    /// Transposed views bigger than one tile, with ragged edges and a reversed axis, copy right.
    #[test]
    fn tiled_transposes_cover_ragged_edges() {
        for (rows, cols) in [(70i64, 45i64), (33, 100), (1, 65), (64, 64)] {
            let n = rows * cols;
            let src = Tensor::from_vec((0..n as u32).collect(), &[n]).unwrap();
            for reversed in [false, true] {
                // logical (cols, rows) view of a (rows, cols) C-order buffer: a transpose
                let (strides, start) = if reversed {
                    ([1i64, -cols], (rows - 1) * cols)
                } else {
                    ([1, cols], 0)
                };
                // SAFETY: the layout stays inside `src`, which outlives `view`.
                let view = unsafe {
                    Tensor::from_raw_parts(
                        src.data_ptr().add(start as usize * 4),
                        &[cols, rows],
                        Some(&strides),
                        DataType::U32,
                        crate::Device::CPU,
                        Flags::empty(),
                        Box::new(()),
                    )
                }
                .unwrap();
                let out = to_contiguous(&view.view(), Order::C).unwrap();
                let got = out.view().as_slice::<u32>().unwrap();
                for i in 0..cols {
                    for j in 0..rows {
                        let row = if reversed { rows - 1 - j } else { j };
                        assert_eq!(
                            got[(i * rows + j) as usize],
                            (row * cols + i) as u32,
                            "{rows}x{cols} at ({i},{j})"
                        );
                    }
                }
            }
        }
    }
}

//! The three case requests: `self` (in-process), `produce` and `consume` (shared memory), and
//! the halves of an in-process exchange they share with the guest ([`crate::guest`]).

use std::sync::atomic::AtomicUsize;

use dlbridge::shm::{self, Access};
use dlbridge::{export, Flags, ManagedTensor, Tensor};

use crate::cases::{self, CaseElement, Layout};
use crate::checks;
use crate::producer::{self, count};

/// `self DTYPE LAYOUT`: export a versioned managed tensor, import it, prove zero-copy.
/// Returns the response's payload (`N zero-copy`).
pub fn self_exchange<T: CaseElement>(layout: Layout) -> Result<String, String> {
    let produced = producer::build::<T>(layout)?;
    let releases = produced.releases.clone();
    let producer_data = produced.tensor.data_ptr();
    let exported = export::to_versioned(produced.tensor, Flags::empty());
    // SAFETY: `exported` was just made by `to_versioned` and is owned by nobody else; its
    // ownership (and its deleter) passes to the import.
    let imported = unsafe { ManagedTensor::from_versioned(exported.as_ptr()) }
        .map_err(|e| format!("importing the export failed: {e}"))?;
    let imported = Tensor::from(imported);
    let n = check_import::<T>(&imported, layout, producer_data)?;
    // SAFETY: `producer_data` is the producer's element 0 of `T` (when there are elements),
    // kept alive by the export that `imported` owns.
    unsafe { check_written::<T>(layout, producer_data, &releases) }?;
    drop(imported);
    check_released(&releases)?;
    Ok(format!("{n} zero-copy"))
}

/// The consumer's checks of an in-process import of the `layout` case whose producer has
/// element 0 at `producer_data`: shape, dtype, the producer's strides, flags, every element, the
/// same element-0 address; then writes the sentinel to element 0 (unless read-only or empty).
/// Returns the number of elements checked.
pub fn check_import<T: CaseElement>(
    imported: &Tensor,
    layout: Layout,
    producer_data: *const u8,
) -> Result<usize, String> {
    let view = imported.view();
    checks::shape(&view, layout.shape())?;
    checks::dtype::<T>(&view)?;
    checks::strides(&view, &layout.memory().strides)?;
    checks::flag(
        &view,
        "READ_ONLY",
        Flags::READ_ONLY,
        layout == Layout::ReadOnly,
    )?;
    checks::flag(&view, "IS_COPIED", Flags::IS_COPIED, false)?;
    let n = checks::elements::<T>(&view)?;
    if n > 0 && view.data_ptr().cast_const() != producer_data {
        return Err(format!(
            "imported element 0 is at {:p}, the producer's at {producer_data:p}: not zero-copy",
            view.data_ptr()
        ));
    }
    if n > 0 && layout != Layout::ReadOnly {
        let data = imported
            .data_ptr_mut()
            .map_err(|e| format!("writing through the import: {e}"))?;
        let zero = vec![0; view.ndim()];
        let first: T = view.read_at(&zero).map_err(|e| e.to_string())?;
        // SAFETY: `data` is element 0 of a live, writable, host tensor of `T` (dtype checked);
        // unaligned writes are allowed.
        unsafe { (data as *mut T).write_unaligned(T::sentinel(first)) };
    }
    Ok(n)
}

/// The producer's check while the consumer's import lives: element 0 reads the sentinel
/// (unless the case is read-only or empty) and the memory was not released.
///
/// # Safety
/// When the case has elements, `producer_data` is the producer's element 0 of `T`, still alive.
pub unsafe fn check_written<T: CaseElement>(
    layout: Layout,
    producer_data: *const u8,
    releases: &AtomicUsize,
) -> Result<(), String> {
    let before = count(releases);
    if before != 0 {
        return Err(format!(
            "producer memory released {before} times while the import was alive"
        ));
    }
    if cases::size(layout.shape()) > 0 && layout != Layout::ReadOnly {
        let sentinel = T::sentinel(T::at(0));
        // SAFETY: the caller's contract; unaligned reads are allowed.
        let seen = unsafe { (producer_data as *const T).read_unaligned() };
        if seen != sentinel {
            return Err(format!(
                "the sentinel {sentinel} was written to element 0 through the import, the \
                 producer reads {seen}"
            ));
        }
    }
    Ok(())
}

/// The producer's check after the consumer dropped its import: released exactly once.
pub fn check_released(releases: &AtomicUsize) -> Result<(), String> {
    let after = count(releases);
    if after != 1 {
        return Err(format!(
            "producer memory released {after} times after the import was dropped, expected 1"
        ));
    }
    Ok(())
}

/// `produce DTYPE LAYOUT`: copy the case tensor into a handed-over segment, drop ours, check
/// our memory was released once. Returns the handle.
pub fn produce<T: CaseElement>(layout: Layout) -> Result<String, String> {
    let produced = producer::build::<T>(layout)?;
    let releases = produced.releases.clone();
    let handle = shm::export(&produced.tensor.view())
        .map_err(|e| format!("shm::export of the {layout} case: {e}"))?
        .handoff()
        .map_err(|e| format!("hand-over of the {layout} case: {e}"))?;
    drop(produced.tensor);
    let released = count(&releases);
    if released != 1 {
        // Nobody will open a segment we fail on: take the hand-over back so it goes away.
        drop(shm::open(&handle, Access::ReadOnly));
        return Err(format!(
            "producer memory released {released} times after the export, expected 1"
        ));
    }
    Ok(handle)
}

/// `consume DTYPE LAYOUT HANDLE`: open the segment, check it against the case. Returns the
/// number of elements checked.
pub fn consume<T: CaseElement>(layout: Layout, handle: &str) -> Result<String, String> {
    let read_only = layout == Layout::ReadOnly;
    let access = if read_only {
        Access::ReadOnly
    } else {
        Access::ReadWrite
    };
    let tensor =
        shm::open(handle, access).map_err(|e| format!("shm::open({handle:?}, {access:?}): {e}"))?;
    let view = tensor.view();
    checks::shape(&view, layout.shape())?;
    checks::dtype::<T>(&view)?;
    checks::flag(&view, "IS_COPIED", Flags::IS_COPIED, true)?;
    checks::flag(&view, "READ_ONLY", Flags::READ_ONLY, read_only)?;
    let n = checks::elements::<T>(&view)?;
    Ok(n.to_string())
}

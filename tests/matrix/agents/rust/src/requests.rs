//! The three case requests: `self` (in-process), `produce` and `consume` (shared memory).

use dlbridge::shm::{self, Access};
use dlbridge::{export, Flags, ManagedTensor, Tensor};

use crate::cases::{CaseElement, Layout};
use crate::checks;
use crate::producer::{self, count};

/// `self DTYPE LAYOUT`: export a versioned managed tensor, import it, prove zero-copy.
/// Returns the response's payload (`N zero-copy`).
pub fn self_exchange<T: CaseElement>(layout: Layout) -> Result<String, String> {
    let produced = producer::build::<T>(layout)?;
    let releases = produced.releases.clone();
    let producer_data = produced.tensor.data_ptr();
    let producer_strides = produced.tensor.strides().to_vec();
    let exported = export::to_versioned(produced.tensor, Flags::empty());
    // SAFETY: `exported` was just made by `to_versioned` and is owned by nobody else; its
    // ownership (and its deleter) passes to the import.
    let imported = unsafe { ManagedTensor::from_versioned(exported.as_ptr()) }
        .map_err(|e| format!("importing the export failed: {e}"))?;
    let imported = Tensor::from(imported);
    let view = imported.view();
    checks::shape(&view, layout.shape())?;
    checks::dtype::<T>(&view)?;
    checks::strides(&view, &producer_strides)?;
    checks::flag(
        &view,
        "READ_ONLY",
        Flags::READ_ONLY,
        layout == Layout::ReadOnly,
    )?;
    checks::flag(&view, "IS_COPIED", Flags::IS_COPIED, false)?;
    let n = checks::elements::<T>(&view)?;
    if n > 0 && view.data_ptr() != producer_data {
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
        let sentinel = T::sentinel(first);
        // SAFETY: `data` is element 0 of a live, writable, host tensor of `T` (dtype checked);
        // unaligned writes are allowed.
        unsafe { (data as *mut T).write_unaligned(sentinel) };
        // SAFETY: `producer_data` is the producer's element 0 of `T`, kept alive by the export
        // that `imported` owns.
        let seen = unsafe { (producer_data as *const T).read_unaligned() };
        if seen != sentinel {
            return Err(format!(
                "wrote {sentinel} to element 0 through the import, the producer reads {seen}"
            ));
        }
    }
    let before = count(&releases);
    if before != 0 {
        return Err(format!(
            "producer memory released {before} times while the import was alive"
        ));
    }
    drop(imported);
    let after = count(&releases);
    if after != 1 {
        return Err(format!(
            "producer memory released {after} times after the import was dropped, expected 1"
        ));
    }
    Ok(format!("{n} zero-copy"))
}

/// `produce DTYPE LAYOUT`: copy the case tensor into a handed-over segment, drop ours, check
/// our memory was released once. Returns the handle.
pub fn produce<T: CaseElement>(layout: Layout) -> Result<String, String> {
    let produced = producer::build::<T>(layout)?;
    let releases = produced.releases.clone();
    let handle = shm::export(&produced.tensor.view())
        .map_err(|e| format!("shm::export of the {layout} case: {e}"))?
        .handoff();
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

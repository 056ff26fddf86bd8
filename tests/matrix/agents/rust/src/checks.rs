//! Checks of a received tensor against the case: each returns the failure's reason, naming the
//! offending values.

use dlbridge::{Flags, TensorView};

use crate::cases::{self, CaseElement};

/// The shape is `expected`.
pub fn shape(view: &TensorView<'_>, expected: &[i64]) -> Result<(), String> {
    if view.shape() == expected {
        Ok(())
    } else {
        Err(format!(
            "shape is {:?}, expected {expected:?}",
            view.shape()
        ))
    }
}

/// The dtype is `T`'s.
pub fn dtype<T: CaseElement>(view: &TensorView<'_>) -> Result<(), String> {
    if view.dtype() == T::DTYPE {
        Ok(())
    } else {
        Err(format!(
            "dtype is {}, expected {}",
            view.dtype().name(),
            T::DTYPE.name()
        ))
    }
}

/// The strides are `expected` (only meaningful for tensors with elements).
pub fn strides(view: &TensorView<'_>, expected: &[i64]) -> Result<(), String> {
    if view.size() == 0 || view.strides() == expected {
        Ok(())
    } else {
        Err(format!(
            "strides are {:?}, expected the producer's {expected:?}",
            view.strides()
        ))
    }
}

/// `flag` (called `name`) is set iff `expected`.
pub fn flag(view: &TensorView<'_>, name: &str, flag: Flags, expected: bool) -> Result<(), String> {
    let set = view.flags().contains(flag);
    if set == expected {
        Ok(())
    } else {
        Err(format!(
            "{name} flag is {}, expected {} (flags {:#x})",
            if set { "set" } else { "clear" },
            if expected { "set" } else { "clear" },
            view.flags().bits()
        ))
    }
}

/// Every element matches the formula; returns the number of elements checked.
pub fn elements<T: CaseElement>(view: &TensorView<'_>) -> Result<usize, String> {
    let n = view.size();
    for i in 0..n {
        let index = cases::unravel(i, view.shape());
        let got: T = view
            .read_at(&index)
            .map_err(|e| format!("reading element {i} (index {index:?}): {e}"))?;
        let want = T::at(i);
        if got != want {
            return Err(format!(
                "element {i} (index {index:?}) is {got}, expected {want}"
            ));
        }
    }
    Ok(n)
}

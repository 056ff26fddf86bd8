//! The DLPack version this library implements.

use std::ffi::c_int;

use dlbridge::ffi::DLPackVersion;

use crate::args::Out;
use crate::status::boundary;

/// The DLPack version implemented (and written into every versioned export): 1.3.
///
/// Imports accept any 1.x tensor.
///
/// # Safety
/// `major` and `minor` are NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dlb_version(major: *mut u32, minor: *mut u32) -> c_int {
    boundary(|| {
        // SAFETY: caller's contract.
        let (major, minor) = unsafe { (Out::new(major, "major")?, Out::new(minor, "minor")?) };
        major.write(DLPackVersion::CURRENT.major);
        minor.write(DLPackVersion::CURRENT.minor);
        Ok(())
    })
}

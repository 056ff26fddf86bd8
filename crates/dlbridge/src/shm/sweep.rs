//! Removal of named segments that dlbridge versions before the sealed layout left in `/dev/shm`.
//!
//! Segments of the current layout are anonymous memory files: the kernel frees them with their
//! last descriptor and mapping, even after `kill -9`, so there is nothing of them to sweep. The
//! named POSIX objects of layout 1 (`/dev/shm/dlbridge-<pid>-<n>-<nanos>`) stayed behind when
//! every holder was killed. [`sweep`] removes such an object only when no live process holds it:
//! its creating process is gone and no process of this user maps it or has it open.

use std::collections::HashSet;
use std::fs;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Once;

use crate::error::{Error, Result};

/// Where named segments lived.
const SHM_DIR: &str = "/dev/shm";

/// Removes the named segments of earlier dlbridge versions that no live process holds, and
/// returns how many it removed. Objects of other users, other programs, or held by any live
/// process of this user are never touched. `dlbridge.shm_sweep()` in Python and
/// `./just shm-sweep` call it; creating a segment runs it once per process.
pub fn sweep() -> Result<usize> {
    let entries = match fs::read_dir(SHM_DIR) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => {
            return Err(Error::ShmIo {
                op: "sweep",
                name: SHM_DIR.into(),
                reason: e.to_string(),
            })
        }
    };
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    let candidates: Vec<(String, u32)> = entries
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let pid = legacy_creator(&name)?;
            let meta = entry.metadata().ok()?;
            (meta.is_file() && meta.uid() == uid && is_dlbridge_segment(&entry.path()))
                .then_some((name, pid))
        })
        .filter(|(_, pid)| !Path::new(&format!("/proc/{pid}")).exists())
        .collect();
    if candidates.is_empty() {
        return Ok(0);
    }
    let held = held_paths();
    let mut removed = 0;
    for (name, _) in candidates {
        let path = format!("{SHM_DIR}/{name}");
        if !held.contains(&path) && fs::remove_file(&path).is_ok() {
            removed += 1;
        }
    }
    Ok(removed)
}

/// Runs [`sweep`] the first time this process creates a segment (errors are not the creator's
/// concern: the next explicit sweep reports them).
pub(super) fn sweep_once() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = sweep();
    });
}

/// The creating process of a layout-1 segment name (`dlbridge-<pid>-<n>-<8 hex digits>`).
fn legacy_creator(name: &str) -> Option<u32> {
    let mut parts = name.strip_prefix("dlbridge-")?.split('-');
    let (pid, n, nanos) = (parts.next()?, parts.next()?, parts.next()?);
    let decimal = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let hex = nanos.len() == 8 && nanos.bytes().all(|b| b.is_ascii_hexdigit());
    (parts.next().is_none() && decimal(pid) && decimal(n) && hex)
        .then(|| pid.parse().ok())
        .flatten()
}

/// Whether the file starts with dlbridge's magic bytes (read, never mapped).
fn is_dlbridge_segment(path: &Path) -> bool {
    let mut magic = [0u8; 8];
    fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok_and(|()| magic == super::MAGIC)
}

/// Every `/dev/shm` path some readable process maps or has open.
fn held_paths() -> HashSet<String> {
    let mut held = HashSet::new();
    let Ok(procs) = fs::read_dir("/proc") else {
        return held;
    };
    let prefix = format!("{SHM_DIR}/");
    for proc_dir in procs.flatten() {
        let dir = proc_dir.path();
        if let Ok(maps) = fs::read_to_string(dir.join("maps")) {
            held.extend(
                maps.lines()
                    .filter_map(|line| line.find(&prefix).map(|at| line[at..].to_owned())),
            );
        }
        if let Ok(fds) = fs::read_dir(dir.join("fd")) {
            held.extend(
                fds.flatten()
                    .filter_map(|fd| fs::read_link(fd.path()).ok())
                    .filter_map(|target| target.to_str().map(str::to_owned))
                    .filter(|target| target.starts_with(&prefix)),
            );
        }
    }
    held
}

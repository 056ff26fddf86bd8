//! Refusing allocations the machine cannot back.
//!
//! dlbridge's buffers are zero-filled 64-byte aligned blocks, so every page is touched as soon
//! as one is allocated: a request the kernel's overcommit accepts but the machine cannot hold
//! (a compact copy of a huge stride-0 view, say) would bring the out-of-memory killer instead
//! of an error. The library's allocating calls check the size first.

use crate::status::CapiError;

/// Fails with `AllocationFailed` when `bytes` exceed the memory the system reports available
/// now (`MemAvailable` plus free swap, from `/proc/meminfo`); passes when that cannot be read.
pub(crate) fn require_backable(bytes: u64) -> Result<(), CapiError> {
    match available_bytes() {
        Some(available) if bytes > available => Err(CapiError::Core(
            dlbridge::Error::AllocationFailed(usize::try_from(bytes).unwrap_or(usize::MAX)),
        )),
        _ => Ok(()),
    }
}

/// `MemAvailable` plus `SwapFree`, in bytes; `None` where `/proc/meminfo` has no such lines.
fn available_bytes() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    parse_available(&meminfo)
}

fn parse_available(meminfo: &str) -> Option<u64> {
    let field = |name: &str| {
        meminfo
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.trim().strip_suffix("kB"))
            .and_then(|kib| kib.trim().parse::<u64>().ok())
    };
    let kib = field("MemAvailable:")?.saturating_add(field("SwapFree:").unwrap_or(0));
    Some(kib.saturating_mul(1024))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn available_memory_is_mem_available_plus_free_swap() {
        let meminfo = "MemTotal: 100 kB\nMemFree: 10 kB\nMemAvailable:   40 kB\nSwapFree: 2 kB\n";
        assert_eq!(parse_available(meminfo), Some(42 * 1024));
        assert_eq!(parse_available("MemAvailable: 8 kB\n"), Some(8 * 1024));
        assert_eq!(parse_available("MemFree: 8 kB\n"), None);
    }

    #[test]
    fn more_than_the_machine_has_is_refused_and_small_sizes_pass() {
        let available = available_bytes().expect("Linux reports MemAvailable");
        let err = require_backable(available + (1 << 30)).unwrap_err();
        assert!(matches!(
            err,
            CapiError::Core(dlbridge::Error::AllocationFailed(_))
        ));
        require_backable(4096).unwrap();
    }
}

//! Segment handles: the text one process sends another so that it can map the same memory.
//!
//! A handle is `dlbridge-<pid>-<fd>-<token>`: the process that holds the segment's descriptor,
//! the descriptor's number in that process, and a random 64-bit token (16 lowercase hex digits)
//! that the segment's header repeats. An opener reaches the descriptor through
//! `/proc/<pid>/fd/<fd>` and accepts the file found there only if it is a size-sealed segment
//! carrying the same token, so a reused process id or descriptor number is never mistaken for
//! the segment.

use crate::error::{Error, Result};

/// What [`Error::UnknownName`] calls a malformed handle; frontends key their error class on it.
pub const HANDLE_WHAT: &str = "shared memory handle";

const PREFIX: &str = "dlbridge-";

/// The parts of a well-formed handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Handle {
    /// The process holding the segment's descriptor.
    pub pid: u32,
    /// The descriptor's number in that process.
    pub fd: i32,
    /// The token the segment's header must carry.
    pub token: u64,
}

impl Handle {
    /// Parses `text`, or returns [`Error::UnknownName`] naming it (anything but
    /// `dlbridge-<pid>-<fd>-<16 hex digits>`: empty, ".", "..", paths, names of other objects).
    pub(crate) fn parse(text: &str) -> Result<Handle> {
        let malformed = || Error::UnknownName {
            what: HANDLE_WHAT,
            name: text.chars().take(200).collect(),
        };
        let decimal = |s: &str| {
            (!s.is_empty() && s.len() <= 10 && s.bytes().all(|b| b.is_ascii_digit()))
                .then(|| s.parse::<u64>().ok())
                .flatten()
        };
        let rest = text.strip_prefix(PREFIX).ok_or_else(malformed)?;
        let mut parts = rest.split('-');
        let (Some(pid), Some(fd), Some(token), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(malformed());
        };
        let pid = decimal(pid)
            .and_then(|p| u32::try_from(p).ok())
            .filter(|&p| p > 0)
            .ok_or_else(malformed)?;
        let fd = decimal(fd)
            .and_then(|f| i32::try_from(f).ok())
            .ok_or_else(malformed)?;
        let hex = token.len() == 16
            && token
                .bytes()
                .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        let token = hex
            .then(|| u64::from_str_radix(token, 16).ok())
            .flatten()
            .ok_or_else(malformed)?;
        Ok(Handle { pid, fd, token })
    }

    /// The handle's text.
    pub(crate) fn format(&self) -> String {
        format!("{PREFIX}{}-{}-{:016x}", self.pid, self.fd, self.token)
    }

    /// Where an opener finds the descriptor.
    pub(crate) fn descriptor_path(&self) -> String {
        format!("/proc/{}/fd/{}", self.pid, self.fd)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn well_formed_handles_round_trip() {
        let h = Handle {
            pid: 4242,
            fd: 7,
            token: 0x00ab_cdef_0123_4567,
        };
        assert_eq!(h.format(), "dlbridge-4242-7-00abcdef01234567");
        assert_eq!(Handle::parse(&h.format()), Ok(h));
    }

    #[test]
    fn malformed_handles_are_unknown_names() {
        for text in [
            "",
            ".",
            "..",
            "../etc/passwd",
            "dlbridge-",
            "dlbridge-1-2",
            "dlbridge-0-3-00abcdef01234567",
            "dlbridge-1-2-00ABCDEF01234567",
            "dlbridge-1-2-abc",
            "dlbridge-1-2-00abcdef01234567-9",
            "dlbridge--1-2-00abcdef01234567",
            "dlbridge-1-99999999999-00abcdef01234567",
            "dlbridge-+1-2-00abcdef01234567",
            "psm_1234",
        ] {
            assert_eq!(
                Handle::parse(text),
                Err(Error::UnknownName {
                    what: HANDLE_WHAT,
                    name: text.into()
                }),
                "{text:?}"
            );
        }
    }
}

//! The crate's one error type.

use std::thread::ThreadId;

/// Everything that can go wrong between a Rust host and the embedded Julia.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Julia runs on the thread that started it; this call came from another one.
    #[error(
        "Julia runs on thread {owner} of this process; it cannot be called from thread {caller}"
    )]
    WrongThread {
        /// The thread that started Julia (its name, or its id).
        owner: String,
        /// The calling thread (its name, or its id).
        caller: String,
    },
    /// This process is a child forked after Julia started: Julia does not survive a fork.
    #[error(
        "Julia was started in process {parent}, and this process is a fork of it: Julia cannot be \
         used after a fork (start child processes with multiprocessing's 'spawn' or \
         'forkserver' method, or before Julia starts)"
    )]
    Forked {
        /// The process that started Julia.
        parent: u32,
    },
    /// Julia's exit hooks have run ([`crate::Julia::run_exit_hooks`]): it cannot be used again.
    #[error("Julia has exited in this process (its exit hooks have run)")]
    Exited,
    /// Julia code called `exit(code)`: the host decides how to exit (Julia's hooks have not run).
    #[error("Julia called exit({0})")]
    Exit(i32),
    /// Julia could not be started (or an earlier start failed: it is started at most once).
    #[error("cannot start Julia: {0}")]
    Start(String),
    /// Julia threw an exception; the text is Julia's own (`showerror`).
    #[error("Julia threw {message}")]
    Julia {
        /// The exception's type, e.g. `DomainError`.
        kind: String,
        /// `sprint(showerror, e)`.
        message: String,
    },
    /// A call's arguments cannot be taken (too many, or permuted and plain tensors mixed).
    #[error("invalid arguments: {0}")]
    Argument(String),
    /// A string handed to Julia holds a NUL byte, or the GC stack ran out (jlrs errors).
    #[error("embedding error: {0}")]
    Embedding(String),
    /// A tensor coming back from Julia failed dlbridge's validation.
    #[error(transparent)]
    Tensor(#[from] dlbridge::Error),
}

/// This crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl From<Box<jlrs::error::JlrsError>> for Error {
    fn from(e: Box<jlrs::error::JlrsError>) -> Error {
        Error::Embedding(e.to_string())
    }
}

/// A thread's name, or its id when it has none.
pub(crate) fn thread_label(name: Option<&str>, id: ThreadId) -> String {
    match name {
        Some(name) => format!("'{name}'"),
        None => format!("{id:?}"),
    }
}

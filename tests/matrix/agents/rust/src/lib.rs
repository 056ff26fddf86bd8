//! The Rust side of the cross-language matrix (`tests/matrix/PROTOCOL.md`), on the dlbridge core
//! directly: the case set ([`cases`]), the checks of a received tensor ([`checks`]), the
//! producer's counted memory ([`producer`]) and the requests ([`requests`]), used by the agent
//! binary (`src/main.rs`); [`guest`], the guest ABI that other runtimes' agents load from
//! this crate's cdylib to exchange with Rust in their own process; [`extension_guest`], the case
//! state of the Rust guests built as a pyo3 extension and a napi-rs addon (their own crates);
//! and [`host`], the agent's side when it loads another runtime's guest library.

pub mod cases;
pub mod checks;
pub mod extension_guest;
pub mod guest;
pub mod host;
pub mod producer;
pub mod requests;

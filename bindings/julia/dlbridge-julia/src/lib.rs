//! Julia embedded in a Rust host, exchanging dlbridge tensors with it without copies.
//!
//! [`Julia::start`] starts the project's Julia (1.5, through jlrs) once per process, on the
//! calling thread, and loads DLBridge.jl into it, so that the column-major rules live in one
//! place: a tensor argument becomes a Julia array through `DLBridge.wrap` and an array result
//! becomes a tensor through `DLBridge.share`, both over the same memory, each side keeping the
//! other's memory alive until it is done, and every producer's deleter running exactly once.
//!
//! ```
//! use dlbridge::Tensor;
//! use dlbridge_julia::{Argument, Julia, Output};
//!
//! let julia = Julia::start()?;
//! julia.eval("scale!(x, k) = (x .*= k; x)")?;
//! let t = Tensor::from_vec(vec![1.0f64, 2.0, 3.0], &[3])?;
//! let address = t.data_ptr();
//! let Output::Tensor(y) = julia.call("scale!", [Argument::from(t), Argument::from(2.0)])? else {
//!     unreachable!("scale! returns its array");
//! };
//! assert_eq!(y.data_ptr(), address); // the same memory, scaled in place
//! assert_eq!(y.view().to_vec::<f64>()?, [2.0, 4.0, 6.0]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Julia exceptions come back as [`Error::Julia`] carrying Julia's message; a call from a thread
//! other than the one that started Julia is [`Error::WrongThread`].

mod call;
mod error;
mod fork;
mod listener;
mod package;
mod runtime;
mod signals;

pub use call::{Argument, Output, MAX_ARGUMENTS};
pub use error::{Error, Result};
pub use runtime::Julia;

//! The Rust agent of the cross-language matrix (`tests/matrix/PROTOCOL.md`).
//!
//! Reads one request per line on stdin and answers one line on stdout (flushed), using the
//! dlbridge core directly: `self` exchanges through `export::to_versioned` and
//! `ManagedTensor::from_versioned`, `produce` and `consume` through `dlbridge::shm`, `host`
//! with a guest library in this process (`dlbridge_matrix_agent::host`). Failed checks, errors
//! and panics become `fail REASON` lines; diagnostics go to stderr.

use std::io::{self, BufRead, Write};
use std::panic::{self, AssertUnwindSafe};

use half::{bf16, f16};
use num_complex::{Complex32, Complex64};

use dlbridge_matrix_agent::cases::{CaseElement, Dtype, Layout};
use dlbridge_matrix_agent::host::{self, Guest, Outcome};
use dlbridge_matrix_agent::requests;

/// A parsed request line.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Request {
    /// `hello`.
    Hello,
    /// `produce DTYPE LAYOUT`.
    Produce(Dtype, Layout),
    /// `consume DTYPE LAYOUT HANDLE`.
    Consume(Dtype, Layout, String),
    /// `self DTYPE LAYOUT`.
    SelfExchange(Dtype, Layout),
    /// `host GUEST out|in DTYPE LAYOUT` (`true` for `out`).
    Host(String, bool, Dtype, Layout),
    /// `quit`.
    Quit,
}

/// Parses a request line (words separated by single spaces).
fn parse(line: &str) -> Result<Request, String> {
    let words: Vec<&str> = line.split(' ').collect();
    let arity = |n: usize, usage: &str| {
        if words.len() == n {
            Ok(())
        } else {
            Err(format!(
                "request {line:?} has {} words, expected `{usage}`",
                words.len()
            ))
        }
    };
    match words[0] {
        "hello" => arity(1, "hello").map(|()| Request::Hello),
        "quit" => arity(1, "quit").map(|()| Request::Quit),
        "produce" => {
            arity(3, "produce DTYPE LAYOUT")?;
            Ok(Request::Produce(words[1].parse()?, words[2].parse()?))
        }
        "self" => {
            arity(3, "self DTYPE LAYOUT")?;
            Ok(Request::SelfExchange(words[1].parse()?, words[2].parse()?))
        }
        "consume" => {
            arity(4, "consume DTYPE LAYOUT HANDLE")?;
            Ok(Request::Consume(
                words[1].parse()?,
                words[2].parse()?,
                words[3].to_owned(),
            ))
        }
        "host" => {
            arity(5, "host GUEST out|in DTYPE LAYOUT")?;
            let out = match words[2] {
                "out" => true,
                "in" => false,
                other => return Err(format!("unknown direction {other:?} (expected out or in)")),
            };
            Ok(Request::Host(
                words[1].to_owned(),
                out,
                words[3].parse()?,
                words[4].parse()?,
            ))
        }
        other => Err(format!(
            "unknown request {other:?} (expected hello, produce, consume, self, host or quit)"
        )),
    }
}

/// Runs a case request for element type `T`; returns the payload after `ok`.
fn run<T: CaseElement>(request: &Request) -> Result<String, Outcome> {
    match request {
        Request::Produce(_, layout) => Ok(requests::produce::<T>(*layout)?),
        Request::Consume(_, layout, handle) => Ok(requests::consume::<T>(*layout, handle)?),
        Request::SelfExchange(_, layout) => Ok(requests::self_exchange::<T>(*layout)?),
        Request::Host(name, out, dtype, layout) => {
            let guest = Guest::load(name)?;
            let dtype = dtype.to_string();
            if *out {
                host::out::<T>(&guest, name, &dtype, *layout)
            } else {
                host::into::<T>(&guest, name, &dtype, *layout)
            }
        }
        Request::Hello | Request::Quit => {
            Err(Outcome::Fail(format!("{request:?} is not a case request")))
        }
    }
}

/// Runs a case request with the Rust element type of `dtype`.
fn dispatch(dtype: Dtype, request: &Request) -> Result<String, Outcome> {
    match dtype {
        Dtype::Bool => run::<bool>(request),
        Dtype::Int8 => run::<i8>(request),
        Dtype::Int16 => run::<i16>(request),
        Dtype::Int32 => run::<i32>(request),
        Dtype::Int64 => run::<i64>(request),
        Dtype::Uint8 => run::<u8>(request),
        Dtype::Uint16 => run::<u16>(request),
        Dtype::Uint32 => run::<u32>(request),
        Dtype::Uint64 => run::<u64>(request),
        Dtype::Float16 => run::<f16>(request),
        Dtype::Bfloat16 => run::<bf16>(request),
        Dtype::Float32 => run::<f32>(request),
        Dtype::Float64 => run::<f64>(request),
        Dtype::Complex64 => run::<Complex32>(request),
        Dtype::Complex128 => run::<Complex64>(request),
    }
}

/// Answers one parsed request; the payload after `ok`, or the reason after `fail`.
fn answer(request: &Request) -> Result<String, Outcome> {
    match request {
        Request::Hello => Ok("rust".to_owned()),
        Request::Quit => Err(Outcome::Fail("quit has no answer".to_owned())),
        Request::Produce(dtype, _)
        | Request::Consume(dtype, ..)
        | Request::SelfExchange(dtype, _)
        | Request::Host(_, _, dtype, _) => dispatch(*dtype, request),
    }
}

/// The response line for a request (panics included: they become `fail`).
fn respond(request: &Request) -> String {
    let result = panic::catch_unwind(AssertUnwindSafe(|| answer(request))).unwrap_or_else(|p| {
        let message = p
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "(no message)".to_owned());
        Err(Outcome::Fail(format!("panic: {message}")))
    });
    let line = match result {
        Ok(payload) => format!("ok {payload}"),
        Err(Outcome::Fail(reason)) => format!("fail {reason}"),
        Err(Outcome::Unsupported(reason)) => format!("unsupported {reason}"),
    };
    line.replace(['\n', '\r'], " ")
}

fn main() {
    let stdin = io::stdin();
    let mut stdout = io::stdout().lock();
    for line in stdin.lock().lines() {
        let line = match line {
            Ok(line) => line,
            Err(e) => {
                eprintln!("rust agent: reading stdin: {e}");
                break;
            }
        };
        let line = line.strip_suffix('\r').unwrap_or(&line);
        let response = match parse(line) {
            Ok(Request::Quit) => break,
            Ok(request) => respond(&request),
            Err(reason) => format!("fail {reason}").replace(['\n', '\r'], " "),
        };
        if let Err(e) = writeln!(stdout, "{response}").and_then(|()| stdout.flush()) {
            eprintln!("rust agent: writing stdout: {e}");
            std::process::exit(1);
        }
    }
}

//! A Rust host embedding Julia: a Rust-made matrix goes to a Julia function without a copy, and
//! the array Julia returns is read back from Rust, again without a copy.
//!
//! Run it with `scripts/test/julia_embedded.sh` (which builds and runs it), or by hand:
//! `eval "$(scripts/julia-build-env.sh)"` then
//! `cargo run --manifest-path bindings/julia/Cargo.toml --example julia-host`.

use dlbridge::Tensor;
use dlbridge_julia::{Argument, Julia, Output};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let julia = Julia::start()?;
    julia.eval(
        "using LinearAlgebra
         normalize_columns!(A) = (A ./= sqrt.(sum(abs2, A; dims = 1)); A)
         outer(v) = v * v'",
    )?;

    // A 2×3 row-major matrix made in Rust. Julia sees its 3×2 transpose (DLBridge.wrap reverses
    // the dimensions of row-major data), so Julia's columns are the rows of `m`.
    let m = Tensor::from_vec(vec![3.0f64, 4.0, 0.0, 0.0, 0.0, 2.0], &[2, 3])?;
    let address = m.data_ptr();
    let Output::Tensor(normalized) = julia.call("normalize_columns!", [Argument::from(m)])? else {
        return Err("normalize_columns! returns its argument".into());
    };
    assert_eq!(
        normalized.data_ptr(),
        address,
        "Julia worked on Rust's memory"
    );
    println!(
        "rows of unit length, computed in Julia in place: {:?} (same address: {})",
        normalized.view().to_vec::<f64>()?,
        normalized.data_ptr() == address
    );

    // An array Julia allocates comes back zero-copy: the tensor keeps it alive.
    let v = Tensor::from_vec(vec![1.0f64, 2.0, 3.0], &[3])?;
    let Output::Tensor(outer) = julia.call("outer", [Argument::from(v)])? else {
        return Err("outer returns a matrix".into());
    };
    println!(
        "outer product from Julia, shape {:?}: {:?}",
        outer.shape(),
        outer.view().to_vec::<f64>()?
    );
    assert_eq!(outer.view().to_vec::<f64>()?[5], 6.0);

    match julia.call("sqrt", [Argument::from(-1.0)]) {
        Err(e) => println!("Julia's exceptions are Rust errors: {e}"),
        Ok(v) => return Err(format!("sqrt(-1.0) returned {v:?}").into()),
    }
    Ok(())
}

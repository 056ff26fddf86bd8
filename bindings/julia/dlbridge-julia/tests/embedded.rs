//! The embedded Julia against real tensors: values, addresses, deleter counts, refusals, errors.
//!
//! Julia runs on the thread that started it, so this binary has its own `main` (no libtest
//! threads) and runs the cases in order on the main thread.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use dlbridge::{Flags, Tensor};
use dlbridge_julia::{Argument, Error, Julia, Output};

/// Elements whose drop (the tensor's owner released) is counted.
struct Counted {
    data: Vec<f64>,
    drops: Arc<AtomicUsize>,
}

impl AsMut<[f64]> for Counted {
    fn as_mut(&mut self) -> &mut [f64] {
        &mut self.data
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::SeqCst);
    }
}

fn counted(data: Vec<f64>, shape: &[i64]) -> (Tensor, Arc<AtomicUsize>) {
    let drops = Arc::new(AtomicUsize::new(0));
    let owner = Counted {
        data,
        drops: drops.clone(),
    };
    (Tensor::from_elements(owner, shape, None, 0).unwrap(), drops)
}

fn collect_garbage(julia: &Julia) {
    julia
        .eval("DLBridge.collect_released(); GC.gc(); GC.gc()")
        .unwrap();
}

fn tensor(output: Output) -> Tensor {
    match output {
        Output::Tensor(t) => t,
        other => panic!("expected a tensor, got {other:?}"),
    }
}

fn scale_in_place_shares_memory(julia: &Julia) {
    julia.eval("scale!(x, k) = (x .*= k; x)").unwrap();
    let (t, drops) = counted(vec![1.0, 2.0, 3.0], &[3]);
    let address = t.data_ptr();
    let y = tensor(julia.call("scale!", [t.into(), 2.0.into()]).unwrap());
    assert_eq!(y.data_ptr(), address, "the result is the argument's memory");
    assert_eq!(y.shape(), [3]);
    assert_eq!(y.view().to_vec::<f64>().unwrap(), [2.0, 4.0, 6.0]);
    collect_garbage(julia);
    assert_eq!(
        drops.load(Ordering::SeqCst),
        0,
        "released while Rust holds the result"
    );
    drop(y);
    collect_garbage(julia);
    assert_eq!(
        drops.load(Ordering::SeqCst),
        1,
        "released once after both sides let go"
    );
}

fn row_major_arrives_with_reversed_dims(julia: &Julia) {
    let (t, drops) = counted((0..6).map(f64::from).collect(), &[2, 3]);
    let out = julia
        .call("x -> (size(x), x[3, 1], x[1, 2])", [t.into()])
        .unwrap();
    match out {
        Output::Tuple(items) => match items.as_slice() {
            [Output::Tuple(size), Output::Float(a), Output::Float(b)] => {
                assert!(matches!(size.as_slice(), [Output::Int(3), Output::Int(2)]));
                assert_eq!((*a, *b), (2.0, 3.0), "B[k, j] == T[j, k]");
            }
            other => panic!("unexpected tuple {other:?}"),
        },
        other => panic!("expected a tuple, got {other:?}"),
    }
    collect_garbage(julia);
    assert_eq!(drops.load(Ordering::SeqCst), 1);
}

fn permuted_arrives_in_its_own_order(julia: &Julia) {
    let (t, drops) = counted((0..6).map(f64::from).collect(), &[2, 3]);
    let address = t.data_ptr() as i64;
    let out = julia
        .call(
            "x -> (x isa PermutedDimsArray, size(x), x[2, 1], x[1, 3], Int(UInt(pointer(parent(x)))))",
            [Argument::Permuted(t)],
        )
        .unwrap();
    let Output::Tuple(items) = out else {
        panic!("expected a tuple, got {out:?}");
    };
    match items.as_slice() {
        [Output::Bool(true), Output::Tuple(size), Output::Float(a), Output::Float(b), Output::Int(p)] =>
        {
            assert!(matches!(size.as_slice(), [Output::Int(2), Output::Int(3)]));
            assert_eq!((*a, *b), (3.0, 2.0), "x[i, j] == T[i, j]");
            assert_eq!(*p, address, "a view of the tensor's memory");
        }
        other => panic!("unexpected tuple {other:?}"),
    }
    collect_garbage(julia);
    assert_eq!(drops.load(Ordering::SeqCst), 1, "released once");
}

fn julia_array_comes_back_zero_copy_and_kept_alive(julia: &Julia) {
    julia
        .eval(
            "const FREED = Ref(0); const KEEP = Ref{Any}(nothing)
             function make_matrix()
                 A = [1.0 2.0 3.0; 4.0 5.0 6.0]
                 finalizer(_ -> FREED[] += 1, A)
                 KEEP[] = A
                 return A
             end
             kept_address() = Int(pointer(KEEP[]))
             forget() = (KEEP[] = nothing; nothing)",
        )
        .unwrap();
    let y = tensor(julia.call("make_matrix", []).unwrap());
    let Output::Int(address) = julia.call("kept_address", []).unwrap() else {
        panic!("kept_address returns an Int");
    };
    assert_eq!(
        y.data_ptr() as i64,
        address,
        "the tensor is the Julia array's memory"
    );
    assert_eq!(
        y.shape(),
        [3, 2],
        "a 2×3 Julia matrix is a 3×2 row-major tensor"
    );
    assert_eq!(
        y.view().to_vec::<f64>().unwrap(),
        [1.0, 4.0, 2.0, 5.0, 3.0, 6.0]
    );
    julia.call("forget", []).unwrap();
    collect_garbage(julia);
    let freed = || match julia.eval("FREED[]").unwrap() {
        Output::Int(n) => n,
        other => panic!("FREED[] is an Int, got {other:?}"),
    };
    assert_eq!(freed(), 0, "the array lives while Rust holds its tensor");
    assert_eq!(y.view().to_vec::<f64>().unwrap()[5], 6.0);
    drop(y);
    collect_garbage(julia);
    assert_eq!(freed(), 1, "freed once after the tensor is dropped");
}

fn read_only_is_refused_and_released(julia: &Julia) {
    let (t, drops) = counted(vec![1.0, 2.0], &[2]);
    let t = t.with_flags(Flags::READ_ONLY);
    let err = julia.call("scale!", [t.into(), 2.0.into()]).unwrap_err();
    match &err {
        Error::Julia { kind, message } => {
            assert_eq!(kind, "ArgumentError");
            assert!(message.contains("read-only"), "{message}");
        }
        other => panic!("expected a Julia error, got {other:?}"),
    }
    assert_eq!(
        drops.load(Ordering::SeqCst),
        1,
        "released at once, exactly once"
    );
}

fn exceptions_carry_julias_message(julia: &Julia) {
    let err = julia.call("sqrt", [(-1.0).into()]).unwrap_err();
    match &err {
        Error::Julia { kind, message } => {
            assert_eq!(kind, "DomainError");
            assert!(
                message.contains("sqrt will only return a complex result"),
                "{message}"
            );
        }
        other => panic!("expected a Julia error, got {other:?}"),
    }
    assert!(err.to_string().contains("DomainError"), "{err}");
    let err = julia.eval("1 +").unwrap_err();
    assert!(matches!(err, Error::Julia { .. }), "{err:?}");
    let err = julia.call("no_such_function", []).unwrap_err();
    match err {
        Error::Julia { message, .. } => assert!(message.contains("no_such_function"), "{message}"),
        other => panic!("expected a Julia error, got {other:?}"),
    }
    // The failed calls left Julia usable.
    assert!(matches!(julia.eval("1 + 1").unwrap(), Output::Int(2)));
}

fn an_exception_after_import_releases_the_tensor(julia: &Julia) {
    let (t, drops) = counted(vec![1.0, 2.0], &[2]);
    let err = julia
        .call("x -> error(\"boom $(x[2])\")", [t.into()])
        .unwrap_err();
    assert!(err.to_string().contains("boom 2.0"), "{err}");
    collect_garbage(julia);
    assert_eq!(drops.load(Ordering::SeqCst), 1);
}

fn scalars_and_strings_convert(julia: &Julia) {
    let out = julia
        .call(
            "(s, i, x, b) -> string(s, \":\", typeof(i), \":\", typeof(x), \":\", b)",
            [
                Argument::from("name"),
                Argument::from(7i64),
                Argument::from(2.5),
                Argument::from(true),
            ],
        )
        .unwrap();
    match out {
        Output::String(s) => assert_eq!(s, "name:Int64:Float64:true"),
        other => panic!("expected a string, got {other:?}"),
    }
    assert!(matches!(julia.eval("nothing").unwrap(), Output::Nothing));
    assert!(matches!(julia.eval("Float32(1.5)").unwrap(), Output::Float(x) if x == 1.5));
    assert!(matches!(julia.eval("false").unwrap(), Output::Bool(false)));
    match julia.eval("sin").unwrap() {
        Output::Other(summary) => assert_eq!(summary, "typeof(sin)"),
        other => panic!("expected another value, got {other:?}"),
    }
}

fn other_threads_get_a_typed_error(julia: &Julia) {
    let err = std::thread::Builder::new()
        .name("worker".to_owned())
        .spawn(|| Julia::start().map(|_| ()).unwrap_err())
        .unwrap()
        .join()
        .unwrap();
    match &err {
        Error::WrongThread { owner, caller } => {
            assert_eq!(owner, "'main'");
            assert_eq!(caller, "'worker'");
        }
        other => panic!("expected WrongThread, got {other:?}"),
    }
    // A tensor released on another thread reaches Julia's release queue.
    julia.eval("make_matrix()").unwrap();
    let y = tensor(julia.call("make_matrix", []).unwrap());
    julia.call("forget", []).unwrap();
    std::thread::spawn(move || drop(y)).join().unwrap();
    let before = match julia.eval("FREED[]").unwrap() {
        Output::Int(n) => n,
        other => panic!("{other:?}"),
    };
    collect_garbage(julia);
    match julia.eval("FREED[]").unwrap() {
        Output::Int(n) => assert_eq!(n, before + 2, "both matrices freed"),
        other => panic!("{other:?}"),
    }
}

fn tuple_results_convert(julia: &Julia) {
    let out = julia.eval("(1, \"two\", [3.0])").unwrap();
    match out {
        Output::Tuple(items) => match items.as_slice() {
            [Output::Int(1), Output::String(s), Output::Tensor(t)] => {
                assert_eq!(s, "two");
                assert_eq!(t.view().to_vec::<f64>().unwrap(), [3.0]);
            }
            other => panic!("unexpected tuple {other:?}"),
        },
        other => panic!("expected a tuple, got {other:?}"),
    }
}

fn column_major_round_trip_keeps_the_logical_shape(julia: &Julia) {
    // A column-major 2×3 tensor (strides (1, 2)) holding T[i, j] = 10i + j.
    let data: Vec<f64> = vec![0.0, 10.0, 1.0, 11.0, 2.0, 12.0];
    for function in ["identity", "x -> x .* 1"] {
        let t = Tensor::from_elements(data.clone(), &[2, 3], Some(&[1, 2]), 0).unwrap();
        let y = tensor(julia.call(function, [t.into()]).unwrap());
        assert_eq!(y.shape(), [2, 3], "{function}");
        let v = y.view().to_vec::<f64>().unwrap();
        assert_eq!(
            v,
            [0.0, 1.0, 2.0, 10.0, 11.0, 12.0],
            "{function}: row-major values"
        );
    }
    let t = Tensor::from_vec((0..6).map(f64::from).collect(), &[2, 3]).unwrap();
    let y = tensor(julia.call("x -> x .* 1", [Argument::Permuted(t)]).unwrap());
    assert_eq!(y.shape(), [2, 3], "permuted in, permuted out");
    let a = Tensor::from_vec(vec![1.0f64], &[1]).unwrap();
    let b = Tensor::from_vec(vec![1.0f64], &[1]).unwrap();
    let err = julia
        .call("(a, b) -> a", [Argument::Permuted(a), Argument::Tensor(b)])
        .unwrap_err();
    assert!(matches!(err, Error::Argument(_)), "{err:?}");
}

fn stack_overflow_is_an_exception(julia: &Julia) {
    julia
        .eval("deep(n) = n == 0 ? 0 : 1 + deep(n - 1)")
        .unwrap();
    match julia
        .call("deep", [Argument::Int(100_000_000)])
        .unwrap_err()
    {
        Error::Julia { kind, .. } => assert_eq!(kind, "StackOverflowError"),
        other => panic!("expected a StackOverflowError, got {other:?}"),
    }
    assert!(matches!(
        julia.call("deep", [Argument::Int(10)]).unwrap(),
        Output::Int(10)
    ));
}

fn wide_values_and_long_tuples_convert(julia: &Julia) {
    assert!(matches!(
        julia.eval("typemax(UInt64)").unwrap(),
        Output::UInt(u64::MAX)
    ));
    assert!(matches!(
        julia.eval("1.5 - 2im").unwrap(),
        Output::Complex { re, im } if re == 1.5 && im == -2.0
    ));
    match julia.eval("Tuple(1:3000)").unwrap() {
        Output::Tuple(items) => {
            assert_eq!(items.len(), 3000);
            assert!(matches!(items[2999], Output::Int(3000)));
        }
        other => panic!("expected a tuple, got {other:?}"),
    }
    match julia.eval("undefined_here").unwrap_err() {
        Error::Julia { kind, .. } => assert_eq!(kind, "UndefVarError", "not a LoadError"),
        other => panic!("expected a Julia error, got {other:?}"),
    }
    assert_eq!(julia.eval("exit(3)").unwrap_err(), Error::Exit(3));
    assert!(matches!(
        julia.eval("Threads.nthreads()").unwrap(),
        Output::Int(1)
    ));
}

fn names_are_looked_up_on_every_call(julia: &Julia) {
    julia.eval("picked = sin").unwrap();
    assert!(matches!(julia.call("picked", [0.0.into()]).unwrap(), Output::Float(x) if x == 0.0));
    julia.eval("picked = cos").unwrap();
    assert!(matches!(julia.call("picked", [0.0.into()]).unwrap(), Output::Float(x) if x == 1.0));
}

/// A named test case.
type Case = (&'static str, fn(&Julia));

fn main() {
    let julia = Julia::start().expect("Julia starts");
    Julia::start().expect("a second start on the same thread is a handle");
    let cases: [Case; 14] = [
        ("scale_in_place_shares_memory", scale_in_place_shares_memory),
        (
            "row_major_arrives_with_reversed_dims",
            row_major_arrives_with_reversed_dims,
        ),
        (
            "permuted_arrives_in_its_own_order",
            permuted_arrives_in_its_own_order,
        ),
        (
            "julia_array_comes_back_zero_copy_and_kept_alive",
            julia_array_comes_back_zero_copy_and_kept_alive,
        ),
        (
            "read_only_is_refused_and_released",
            read_only_is_refused_and_released,
        ),
        (
            "exceptions_carry_julias_message",
            exceptions_carry_julias_message,
        ),
        (
            "an_exception_after_import_releases_the_tensor",
            an_exception_after_import_releases_the_tensor,
        ),
        ("scalars_and_strings_convert", scalars_and_strings_convert),
        (
            "other_threads_get_a_typed_error",
            other_threads_get_a_typed_error,
        ),
        ("tuple_results_convert", tuple_results_convert),
        (
            "column_major_round_trip_keeps_the_logical_shape",
            column_major_round_trip_keeps_the_logical_shape,
        ),
        (
            "stack_overflow_is_an_exception",
            stack_overflow_is_an_exception,
        ),
        (
            "wide_values_and_long_tuples_convert",
            wide_values_and_long_tuples_convert,
        ),
        (
            "names_are_looked_up_on_every_call",
            names_are_looked_up_on_every_call,
        ),
    ];
    for (name, case) in cases {
        case(&julia);
        println!("test {name} ... ok");
    }
    println!("test result: ok. {} passed", cases.len());
}

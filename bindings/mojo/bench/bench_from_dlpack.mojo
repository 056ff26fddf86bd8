"""Per-call cost of the Mojo package's exchanges (docs/benchmarks.md, Mojo section).

Each case runs `CALLS` calls per round; the report keeps the best of `ROUNDS` rounds, in ns per
call. Every `from_dlpack` call here is a full exchange: `__dlpack__`, capsule consumed and
renamed, tensor validated and wrapped, then the view destroyed (the producer's deleter runs).
Run with the environment of scripts/test/mojo.sh (MOJO_PYTHON, DLBRIDGE_LIB):

    mojo run -I bindings/mojo bindings/mojo/bench/bench_from_dlpack.mojo
"""

from std.python import Python, PythonObject
from std.time import perf_counter_ns

from dlbridge import (
    StridedTensor,
    arange,
    export_versioned,
    from_dlpack,
    import_versioned,
    to_dlpack,
)

comptime CALLS = 20_000
comptime ROUNDS = 7


def _np_array(n: Int = 16) raises -> PythonObject:
    return Python.import_module("numpy").arange(n, dtype="float32")


def numpy_from_dlpack_numpy(n: Int) raises -> Int:
    var np = Python.import_module("numpy")
    var a = _np_array()
    var start = perf_counter_ns()
    for _ in range(n):
        _ = np.from_dlpack(a)
    return Int(perf_counter_ns() - start)


def mojo_from_dlpack_numpy(n: Int) raises -> Int:
    var a = _np_array()
    var start = perf_counter_ns()
    for _ in range(n):
        var v = from_dlpack[DType.float32](a)
        _ = v^
    return Int(perf_counter_ns() - start)


def mojo_from_dlpack_numpy_64mib(n: Int) raises -> Int:
    var a = _np_array(16 * 1024 * 1024)
    var start = perf_counter_ns()
    for _ in range(n):
        var v = from_dlpack[DType.float32](a)
        _ = v^
    return Int(perf_counter_ns() - start)


def torch_dunder_dlpack(n: Int) raises -> Int:
    var torch = Python.import_module("torch")
    var x = torch.arange(16, dtype=torch.float32)
    var version = Python.tuple(1, 3)
    var start = perf_counter_ns()
    for _ in range(n):
        _ = x.__dlpack__(max_version=version)
    return Int(perf_counter_ns() - start)


def mojo_from_dlpack_torch(n: Int) raises -> Int:
    var torch = Python.import_module("torch")
    var x = torch.arange(16, dtype=torch.float32)
    var start = perf_counter_ns()
    for _ in range(n):
        var v = from_dlpack[DType.float32](x)
        _ = v^
    return Int(perf_counter_ns() - start)


def mojo_from_dlpack_dlbridge(n: Int) raises -> Int:
    var t = Python.import_module("dlbridge").arange(16, dtype="float32")
    var start = perf_counter_ns()
    for _ in range(n):
        var v = from_dlpack[DType.float32](t)
        _ = v^
    return Int(perf_counter_ns() - start)


def mojo_from_dlpack_jax(n: Int) raises -> Int:
    var x = Python.import_module("jax.numpy").arange(16, dtype="float32")
    var start = perf_counter_ns()
    for _ in range(n):
        var v = from_dlpack[DType.float32](x)
        _ = v^
    return Int(perf_counter_ns() - start)


def jax_dunder_dlpack(n: Int) raises -> Int:
    var x = Python.import_module("jax.numpy").arange(16, dtype="float32")
    var start = perf_counter_ns()
    for _ in range(n):
        _ = x.__dlpack__()
    return Int(perf_counter_ns() - start)


def mojo_to_dlpack_numpy(n: Int) raises -> Int:
    var np = Python.import_module("numpy")
    var t = arange[DType.float32](16)
    var start = perf_counter_ns()
    for _ in range(n):
        _ = np.from_dlpack(to_dlpack(t))
    return Int(perf_counter_ns() - start)


def c_abi_export_import(n: Int) raises -> Int:
    var t = arange[DType.float32](16)
    var start = perf_counter_ns()
    for _ in range(n):
        var v = import_versioned[DType.float32](export_versioned(t))
        _ = v^
    return Int(perf_counter_ns() - start)


def _best(run: def(Int) raises thin -> Int) raises -> Float64:
    _ = run(CALLS // 10)  # warm-up: imports, lazily loaded tables, caches
    var best = Int.MAX
    for _ in range(ROUNDS):
        best = min(best, run(CALLS))
    return Float64(best) / Float64(CALLS)


def main() raises:
    var names: List[String] = [
        "numpy: `np.from_dlpack(a)` (numpy as the consumer, for reference)",
        "numpy: `from_dlpack[DType.float32](a)`",
        "numpy: `from_dlpack[DType.float32](a)`, 64 MiB array",
        "torch: `x.__dlpack__(max_version=(1, 3))` alone (what the exchange API saves)",
        "torch: `from_dlpack[DType.float32](x)` (C exchange API)",
        "dlbridge: `from_dlpack[DType.float32](t)` (C exchange API)",
        "jax: `x.__dlpack__()` alone (the producer's part)",
        "jax: `from_dlpack[DType.float32](x)` (legacy capsule)",
        "export: `np.from_dlpack(to_dlpack(t))`",
        "C ABI: `import_versioned(export_versioned(t))` (no Python)",
    ]
    var cases: List[def(Int) raises thin -> Int] = [
        numpy_from_dlpack_numpy,
        mojo_from_dlpack_numpy,
        mojo_from_dlpack_numpy_64mib,
        torch_dunder_dlpack,
        mojo_from_dlpack_torch,
        mojo_from_dlpack_dlbridge,
        jax_dunder_dlpack,
        mojo_from_dlpack_jax,
        mojo_to_dlpack_numpy,
        c_abi_export_import,
    ]
    print("| call, made from Mojo (16 float32 unless noted) | ns per call |")
    print("|---|---:|")
    for i in range(len(cases)):
        print(t"| {names[i]} | {Int(_best(cases[i]))} |")

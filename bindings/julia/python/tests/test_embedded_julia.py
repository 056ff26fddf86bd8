"""dlbridge.julia against numpy, torch and jax: values, addresses, deleter counts, read-only
tensors, Julia's exceptions, the owning thread and Ctrl-C."""

import gc
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import dlbridge
from dlbridge import _dlbridge

# XLA must be loaded before Julia starts: Julia makes its LLVM's symbols global, and an XLA
# loaded afterwards binds to them and crashes (see docs/julia.md).
jnp = pytest.importorskip("jax.numpy")
torch = pytest.importorskip("torch")

from dlbridge import julia as jl  # noqa: E402

testing = _dlbridge._testing


def np_ptr(a):
    return a.__array_interface__["data"][0]


def collect_garbage():
    """Frees what only garbage referenced, in Python and then in Julia."""
    gc.collect()
    jl.eval("DLBridge.collect_released(); GC.gc(); GC.gc()")


@pytest.fixture(scope="module", autouse=True)
def definitions():
    jl.eval(
        """
        scale!(x, k) = (x .*= k; x)
        total(x) = sum(x)
        const FREED = Ref(0)
        function make_matrix(m, n)
            A = reshape(collect(1.0:m*n), m, n)
            finalizer(_ -> FREED[] += 1, A)
            return A
        end
        """
    )


def test_numpy_array_is_scaled_in_place_and_returned_zero_copy():
    a = np.arange(6.0).reshape(2, 3)
    y = jl.call("scale!", a, 2.0)
    assert isinstance(y, dlbridge.Tensor)
    assert y.data_ptr == np_ptr(a)
    assert y.shape == (2, 3)
    np.testing.assert_array_equal(a, np.arange(6.0).reshape(2, 3) * 2)
    back = np.from_dlpack(y)
    assert np_ptr(back) == np_ptr(a)
    np.testing.assert_array_equal(back, a)


def test_row_major_arrives_with_reversed_dims():
    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    assert jl.call("x -> (size(x), x[3, 1], eltype(x))", a)[:2] == ((3, 2), 2)


def test_permuted_arrives_in_its_own_order_over_the_same_memory():
    a = np.arange(6.0).reshape(2, 3)
    size, x21, x13, address = jl.call(
        "x -> (size(x), x[2, 1], x[1, 3], Int(UInt(pointer(parent(x)))))", jl.permuted(a)
    )
    assert (size, x21, x13) == ((2, 3), a[1, 0], a[0, 2])
    assert address == np_ptr(a)
    t = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    jl.call("x -> (x[2, 1] = 42; nothing)", jl.permuted(t))
    assert t[1, 0].item() == 42.0


def test_permuted_takes_only_tensors():
    with pytest.raises(TypeError, match="permuted\\(\\) takes a DLPack tensor, not a float"):
        jl.call("identity", jl.permuted(1.5))


def test_torch_tensor_is_shared():
    t = torch.arange(4, dtype=torch.float32)
    y = jl.call("scale!", t, 3.0)
    assert t.tolist() == [0.0, 3.0, 6.0, 9.0]
    back = torch.from_dlpack(y)
    assert back.data_ptr() == t.data_ptr()
    back[0] = 7.0
    assert t[0].item() == 7.0


def test_jax_array_is_read_only_and_refused():
    x = jnp.arange(4.0)
    with pytest.raises(jl.JuliaError, match="read-only"):
        jl.call("total", x)
    np.testing.assert_array_equal(np.asarray(x), [0.0, 1.0, 2.0, 3.0])


def test_jax_can_read_an_array_julia_made():
    y = jl.call("make_matrix", 2, 2)
    x = jnp.from_dlpack(y)
    assert float(jnp.sum(x)) == 10.0


def test_read_only_numpy_array_is_refused_and_never_written():
    a = np.arange(3.0)
    a.flags.writeable = False
    with pytest.raises(jl.JuliaError, match="read-only"):
        jl.call("scale!", a, 2.0)
    np.testing.assert_array_equal(a, [0.0, 1.0, 2.0])


def test_deleter_runs_once_after_julia_lets_go():
    start = testing.deleter_calls()
    jl.call("total", testing.counting_capsule([4]))
    collect_garbage()
    assert testing.deleter_calls() - start == 1
    y = jl.call("scale!", testing.counting_capsule([4]), 1.0)
    collect_garbage()
    assert testing.deleter_calls() - start == 1, "released while Python holds the result"
    del y
    collect_garbage()
    assert testing.deleter_calls() - start == 2


def test_julia_array_lives_while_python_holds_it():
    collect_garbage()
    freed = jl.eval("FREED[]")
    y = jl.call("make_matrix", 2, 3)
    assert y.shape == (3, 2)
    a = np.from_dlpack(y)
    collect_garbage()
    assert jl.eval("FREED[]") == freed
    np.testing.assert_array_equal(a, [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    del y, a
    collect_garbage()
    assert jl.eval("FREED[]") == freed + 1


def test_scalars_strings_and_other_values_convert():
    assert jl.call("(a, b, c) -> string(typeof(a), typeof(b), typeof(c))", 1, 2.5, True) == (
        "Int64Float64Bool"
    )
    assert jl.call("uppercase", "julia") == "JULIA"
    assert jl.eval("nothing") is None
    assert jl.eval("Float32(0.5)") == 0.5
    assert repr(jl.eval("sin")) == "<Julia value: typeof(sin)>"
    with pytest.raises(TypeError, match="cannot pass a dict"):
        jl.call("identity", {})


def test_julia_exceptions_carry_julias_message():
    with pytest.raises(jl.JuliaError, match="sqrt will only return a complex result"):
        jl.call("sqrt", -1.0)
    with pytest.raises(jl.JuliaError, match="no_such_function"):
        jl.call("no_such_function", 1)
    assert jl.eval("1 + 1") == 2


def test_other_threads_get_a_clear_error():
    errors = []

    def use_julia():
        try:
            jl.eval("1")
        except RuntimeError as e:
            errors.append(str(e))

    worker = threading.Thread(target=use_julia)
    worker.start()
    worker.join()
    assert len(errors) == 1 and "cannot be called from thread" in errors[0], errors


def test_ctrl_c_raises_keyboard_interrupt():
    jl.eval("1")
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    assert signal.SIGINT not in blocked
    timer = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT))
    started = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        time.sleep(5)
    assert time.monotonic() - started < 2
    timer.join()


def test_julia_keeps_working_after_an_interrupt():
    assert jl.call("total", np.ones(4)) == 4.0


def test_host_pipes_stay_blocking_after_julia_starts():
    # Julia's start opens stdin/stdout/stderr as libuv streams, which makes pipes non-blocking; a
    # host reading its stdin line by line would then see an early end of input.
    script = (
        "import os; from dlbridge import julia as jl; jl.eval('1'); "
        "print([os.get_blocking(fd) for fd in (0, 1, 2)])"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120, text=True,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[True, True, True]"


def test_its_classes_are_immutable_so_no_instance_lacks_its_value():
    # A mutable class would take a `__new__` making zero-filled instances (dropping a `Permuted`
    # without its tensor crashed the process): run the attempt in a child process.
    code = """
from dlbridge import julia as jl
for ty in (jl.JuliaValue, jl.Permuted):
    assert ty.__flags__ & (1 << 8), ty
    try:
        ty.__new__ = staticmethod(lambda c, *a, **k: object.__new__(c))
    except TypeError as e:
        print(e)
    else:
        t = ty()
        del t
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "cannot set '__new__' attribute of immutable type 'dlbridge.julia.JuliaValue'",
        "cannot set '__new__' attribute of immutable type 'dlbridge.julia.Permuted'",
    ]

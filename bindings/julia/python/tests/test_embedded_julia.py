"""dlbridge.julia against numpy, torch and jax: values, addresses, deleter counts, read-only
tensors, Julia's exceptions, the owning thread and Ctrl-C."""

import gc
import os
import shutil
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


def test_a_large_argument_nothing_in_julia_holds_is_released_before_the_call_returns():
    # 4 MiB or more lent: a young collection right after the call, no collect_garbage() here.
    def big():
        return testing.counting_capsule([1 << 19], dtype="float64")  # 4 MiB

    jl.call("length", big())  # compiles for this element type
    collect_garbage()
    start = testing.deleter_calls()
    assert jl.call("length", big()) == 1 << 19
    assert testing.deleter_calls() - start == 1, "the producer's deleter ran within the call"
    assert jl.call("x -> size(x .+ 1)", big()) == (1 << 19,)
    assert testing.deleter_calls() - start == 2, "a fresh result does not hold the argument"
    y = jl.call("scale!", big(), 1.0)
    assert testing.deleter_calls() - start == 2, "released while Python holds the result"
    jl.eval("kept = Any[]; nothing")
    jl.call("x -> (push!(kept, x); nothing)", big())
    assert testing.deleter_calls() - start == 2, "released while a Julia global holds it"
    assert jl.eval("length(kept[1])") == 1 << 19
    del y
    jl.eval("empty!(kept); nothing")
    collect_garbage()
    assert testing.deleter_calls() - start == 4


def test_the_same_memory_lent_again_is_the_same_live_argument():
    a = np.arange(1 << 20, dtype=np.float32)  # 4 MiB
    other = a.reshape(1024, 1024)  # the same memory, another shape: another argument
    refs = sys.getrefcount(a), sys.getrefcount(other)
    jl.eval("seen = Any[]; nothing")
    keep = "x -> (push!(seen, x); length(x))"
    assert jl.call(keep, a) == jl.call(keep, a) == 1 << 20
    assert jl.eval("seen[1] === seen[2] && UInt(pointer(seen[1]))") == a.ctypes.data
    jl.call(keep, other)
    assert jl.eval("seen[3] !== seen[1] && size(seen[3])") == (1024, 1024)
    assert sys.getrefcount(a) > refs[0] and sys.getrefcount(other) > refs[1], "lent, held"
    jl.eval("empty!(seen); nothing")
    collect_garbage()
    assert (sys.getrefcount(a), sys.getrefcount(other)) == refs, "every loan was released"
    assert dlbridge.diagnostics()["exports"] == 0


def test_an_argument_the_callee_resized_is_not_lent_again():
    a = np.arange(4.0)
    jl.eval("grown = Any[]; nothing")
    jl.call("x -> (push!(grown, x); nothing)", a)
    # The callee cannot resize memory it does not own; the argument stays a view of `a`.
    with pytest.raises(jl.JuliaError):
        jl.call("x -> push!(x, 1.0)", a)
    assert jl.call("x -> (x[1] = 7.0; pointer(x) == pointer(grown[1]))", a) is True
    assert a[0] == 7.0
    jl.eval("empty!(grown); nothing")


def test_fresh_large_arguments_are_released_and_rss_stays_bounded():
    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    jl.call("sum", testing.counting_capsule([1 << 24], dtype="float32"))  # compiles
    collect_garbage()
    start, before = testing.deleter_calls(), rss()
    for _ in range(40):  # 2.5 GiB of fresh, touched 64 MiB arrays
        jl.call("sum", testing.counting_capsule([1 << 24], dtype="float32"))
    assert testing.deleter_calls() - start == 40, "every argument was released within its call"
    assert rss() - before < 512 << 20


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
    with pytest.raises(TypeError, match="cannot pass an object to Julia"):
        jl.call("identity", object())


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


def run_python(script, timeout=120, env=None):
    """Runs `script` in a fresh Python (Julia started there), returning the finished process."""
    return subprocess.run(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout, text=True,
        env=None if env is None else {**os.environ, **env},
    )


def test_a_forked_child_refuses_julia_and_never_writes_into_the_parent():
    jl.eval("h(x) = 2x + 7")
    assert jl.call("h", 5) == 17
    own = f"/proc/{os.getpid()}/mem"
    mem_fds = [fd for fd in map(int, os.listdir("/proc/self/fd"))
               if os.path.exists(f"/proc/self/fd/{fd}")
               and os.readlink(f"/proc/self/fd/{fd}") == own]
    assert mem_fds, "Julia writes its code through a descriptor of /proc/<pid>/mem"
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report, never return into pytest
        try:
            targets = [os.readlink(f"/proc/self/fd/{fd}") for fd in mem_fds]
            try:
                jl.eval("h(x) = 3x + 9; h(5)")
                outcome = "called"
            except RuntimeError as e:
                outcome = str(e)
            os.write(write, repr((targets, outcome)).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        targets, outcome = eval(pipe.read())  # noqa: S307 (our own child's repr)
    os.waitpid(pid, 0)
    assert targets == [f"/proc/{pid}/mem"] * len(mem_fds), "the child's descriptor names the child"
    assert "Julia cannot be used after a fork" in outcome and "spawn" in outcome, outcome
    assert jl.call("h", 5) == 17, "the parent's code is intact"
    assert jl.eval("h(5)") == 17


def test_code_a_forked_child_compiles_anyway_lands_in_the_child():
    # Going around the refusal (libjulia's own entry point), the child's compiler writes through
    # the descriptor the fork handler re-pointed: the code lands in the child, which runs it, and
    # the parent's code stays as it was. (Before, those writes went into the parent, and the
    # child aborted registering the unwind tables of code it could not see.)
    import ctypes

    jl.eval("h2(x) = 2x + 7")
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            lib = ctypes.CDLL("libjulia.so.1", mode=os.RTLD_NOLOAD | ctypes.RTLD_GLOBAL)
            lib.jl_eval_string.restype = ctypes.c_void_p
            lib.jl_unbox_int64.restype = ctypes.c_int64
            lib.jl_unbox_int64.argtypes = [ctypes.c_void_p]
            value = lib.jl_eval_string(b"h2(x) = 3x + 9; h2(5)")
            code = 0 if value and lib.jl_unbox_int64(value) == 24 else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    assert jl.call("h2", 5) == 17
    assert jl.eval("h2(5)") == 17


def test_a_fork_based_pool_whose_workers_do_not_call_julia_works():
    import multiprocessing

    jl.eval("1")
    with multiprocessing.get_context("fork").Pool(2) as pool:
        assert pool.map(abs, [-1, -2, 3], chunksize=1) == [1, 2, 3]
    assert jl.eval("2 + 2") == 4


def test_stack_overflow_is_a_julia_error_and_the_process_survives():
    script = (
        "from dlbridge import julia as jl\n"
        "jl.eval('deep(n) = n == 0 ? 0 : 1 + deep(n - 1)')\n"
        "nested = 'let e = 1; for _ in 1:20000; e = Expr(:call, :-, e); end; eval(e); end'\n"
        "for code in ['deep(10^8)', nested,\n"
        "             'fetch(@async deep(10^8))']:\n"
        "    try:\n"
        "        jl.eval(code)\n"
        "        print('no error')\n"
        "    except jl.JuliaError as e:\n"
        "        print(e.kind, 'StackOverflowError' in str(e))\n"
        "print(jl.call('deep', 100))\n"
    )
    done = run_python(script)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.split("\n")
    assert lines[0] == "StackOverflowError True", done.stdout
    # Julia 1.5's lowering gives up on a 20000-deep expression with its own error (flisp runs out
    # of handles) before the machine stack overflows: an error, and the process lives on.
    assert lines[1] in ("StackOverflowError True", "ErrorException False"), done.stdout
    assert lines[2] == "TaskFailedException True", done.stdout
    assert lines[3] == "100", done.stdout


def test_a_segfault_outside_julia_still_reaches_the_hosts_handler():
    script = (
        "import ctypes, faulthandler, sys\n"
        "faulthandler.enable()\n"
        "from dlbridge import julia as jl\n"
        "jl.eval('1')\n"
        "ctypes.string_at(0)\n"
    )
    done = run_python(script)
    assert done.returncode == -signal.SIGSEGV, (done.returncode, done.stderr[-2000:])
    assert "Fatal Python error: Segmentation fault" in done.stderr, done.stderr[-2000:]


def test_julia_num_threads_above_one_is_refused_at_start_with_a_clear_error():
    script = (
        "from dlbridge import julia as jl\n"
        "for _ in range(2):\n"
        "    try:\n"
        "        jl.eval('Threads.nthreads()')\n"
        "    except RuntimeError as e:\n"
        "        print(type(e).__name__, e)\n"
    )
    for value in ("2", "auto"):
        done = run_python(script, env={"JULIA_NUM_THREADS": value})
        assert done.returncode == 0, done.stderr[-2000:]
        lines = done.stdout.splitlines()
        assert len(lines) == 2 and lines[0] == lines[1], done.stdout
        assert lines[0].startswith(
            f'RuntimeError cannot start Julia: JULIA_NUM_THREADS="{value}" asks for more than one'
        ), lines[0]
        assert "unset JULIA_NUM_THREADS or set it to 1" in lines[0]


def test_julia_num_threads_of_one_runs_threaded_allocating_code():
    script = (
        "from dlbridge import julia as jl\n"
        "print(jl.eval('Threads.nthreads()'))\n"
        "print(jl.eval('v = zeros(100); Threads.@threads for i in 1:100; "
        "v[i] = sum([rand() for _ in 1:10^4]) > 0; end; GC.gc(); sum(v)'))\n"
    )
    done = run_python(script, env={"JULIA_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["1", "100.0"]


def test_memory_stays_flat_over_calls_on_fresh_large_arrays():
    script = (
        "import resource, numpy as np\n"
        "from dlbridge import julia as jl\n"
        "jl.call('sum', np.ones(10**6))\n"
        "for _ in range(50): jl.call('sum', np.ones(10**6))\n"
        "start = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "for _ in range(1000): assert jl.call('sum', np.ones(10**6)) == 10**6\n"
        "print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - start) // 1024)\n"
    )
    done = run_python(script, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    grown_mb = int(done.stdout)
    # 1000 calls lend 8 GB; without the lent-bytes collection this grows by gigabytes.
    assert grown_mb < 300, f"RSS grew by {grown_mb} MB"


@pytest.mark.parametrize("shape", [(3, 3), (2, 3), (2, 3, 4)])
def test_identity_like_functions_keep_the_logical_shape_for_every_layout(shape):
    m = np.arange(np.prod(shape), dtype=np.float64).reshape(shape)
    inputs = {
        "C": m,
        "F": np.asfortranarray(m),
        "transposed": m.T,
        "strided": np.arange(2 * m.size, dtype=np.float64)[::2].reshape(shape),
    }
    for label, x in inputs.items():
        expected = x.copy()
        for f in ["identity", "x -> x .* 1", "copy"]:
            for arg in [x, jl.permuted(x)]:
                y = np.from_dlpack(jl.call(f, arg))
                assert y.shape == expected.shape, (label, f, arg)
                np.testing.assert_array_equal(y, expected, err_msg=f"{label} {f}")
    # Plain arguments always arrive reversed, whatever their layout: x[j, i] == T[i, j].
    assert jl.call("x -> (size(x), x[1, 2])", np.asfortranarray(np.arange(6.0).reshape(2, 3))) == (
        (3, 2), 3.0
    )


def test_plain_and_permuted_tensors_cannot_be_mixed():
    with pytest.raises(ValueError, match="permuted and 1 plain"):
        jl.call("(a, b) -> a", jl.permuted(np.ones(2)), np.ones(2))


def test_names_are_looked_up_on_every_call():
    jl.eval("rebound(x) = 1")
    assert jl.call("rebound", 0) == 1
    jl.eval("rebound(x) = 2")
    assert jl.call("rebound", 0) == 2
    jl.eval("module Replaced; f() = 1; end")
    assert jl.call("Replaced.f") == 1
    jl.eval("module Replaced; f() = 2; end")
    assert jl.call("Replaced.f") == 2
    jl.eval("const swap = Ref{Any}(sin)")
    jl.eval("chosen = sin")
    assert jl.call("chosen", 0.0) == 0.0
    jl.eval("chosen = cos")
    assert jl.call("chosen", 0.0) == 1.0


def test_host_signals_stay_unblocked_in_threads_and_subprocesses():
    jl.eval("1")
    wanted = {signal.SIGINT, signal.SIGTERM, signal.SIGABRT, signal.SIGQUIT, signal.SIGUSR1}
    assert not wanted & signal.pthread_sigmask(signal.SIG_BLOCK, [])
    seen = []
    worker = threading.Thread(
        target=lambda: seen.append(signal.pthread_sigmask(signal.SIG_BLOCK, []))
    )
    worker.start()
    worker.join()
    assert not wanted & seen[0]
    status = subprocess.run(["grep", "SigBlk", "/proc/self/status"], capture_output=True, text=True)
    assert int(status.stdout.split()[1], 16) == 0, status.stdout
    got = []
    previous = signal.signal(signal.SIGUSR1, lambda *_: got.append(1))
    try:
        for _ in range(20):
            os.kill(os.getpid(), signal.SIGUSR1)
        time.sleep(0.1)
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert got, "Python's handler ran: no Julia thread took the signal"


# Blocks `signum` in Python's thread, sends it to the process, then unblocks it: the signal stays
# pending for Python unless some other thread (Julia's signal listener) takes it meanwhile.
SEND_WHILE_BLOCKED = (
    "import faulthandler, os, signal, sys, time\n"
    "faulthandler.enable()\n"
    "from dlbridge import julia as jl\n"
    "jl.eval('1')\n"
    "signum = getattr(signal, sys.argv[1])\n"
    "got = []\n"
    "if signum == signal.SIGUSR1:\n"
    "    signal.signal(signum, lambda *_: got.append(1))\n"
    "signal.pthread_sigmask(signal.SIG_BLOCK, {signum})\n"
    "os.kill(os.getpid(), signum)\n"
    "time.sleep(0.3)\n"
    "print('pending', signum in signal.sigpending(), flush=True)\n"
    "signal.pthread_sigmask(signal.SIG_UNBLOCK, {signum})\n"
    "print('handled', got, flush=True)\n"
)


@pytest.mark.parametrize("name", ["SIGUSR1", "SIGABRT", "SIGQUIT"])
def test_julias_signal_listener_never_takes_the_hosts_signals(name):
    done = subprocess.run(
        [sys.executable, "-c", SEND_WHILE_BLOCKED, name],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120, text=True,
    )
    lines = done.stdout.splitlines()
    assert lines[:1] == ["pending True"], (done.stdout, done.stderr[-2000:])
    if name == "SIGUSR1":
        assert done.returncode == 0, done.stderr[-2000:]
        assert lines[1:] == ["handled [1]"], "Python's handler ran"
    elif name == "SIGABRT":
        assert done.returncode == -signal.SIGABRT, (done.returncode, done.stderr[-2000:])
        assert "Fatal Python error: Aborted" in done.stderr, done.stderr[-2000:]
    else:
        assert done.returncode == -signal.SIGQUIT, (done.returncode, done.stderr[-2000:])


def test_julias_signal_listener_thread_is_parked():
    jl.eval("1")
    waiting = []
    for tid in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{tid}/wchan") as f:
            waiting.append(f.read())
    assert not [w for w in waiting if "sigtimedwait" in w], waiting


def test_julia_exit_hooks_and_finalizers_run_at_python_exit(tmp_path):
    path = tmp_path / "left-open.txt"
    marker = tmp_path / "atexit.txt"
    code = (
        f'io = open("{path}", "w"); write(io, "unflushed"); '
        f'atexit(() -> write("{marker}", "ran")); nothing'
    )
    script = f"from dlbridge import julia as jl\njl.eval({code!r})\n"
    done = run_python(script)
    assert done.returncode == 0, done.stderr[-2000:]
    assert path.read_text() == "unflushed"
    assert marker.read_text() == "ran"


def test_exit_in_julia_exits_python_through_its_atexit(tmp_path):
    marker = tmp_path / "python-atexit.txt"
    script = (
        "import atexit\n"
        "from dlbridge import julia as jl\n"
        f"atexit.register(lambda: open({str(marker)!r}, 'w').write('ran'))\n"
        "jl.eval('exit(3)')\n"
        "print('not reached')\n"
    )
    done = run_python(script)
    assert done.returncode == 3, done.stderr[-2000:]
    assert "not reached" not in done.stdout
    assert marker.read_text() == "ran"


def test_an_array_python_holds_cannot_be_resized_in_julia():
    xs = jl.eval("held = [1.0, 2.0, 3.0]; held")
    address = xs.data_ptr
    with pytest.raises(jl.JuliaError, match="cannot resize array with shared data") as raised:
        jl.eval("push!(held, 4.0)")
    assert raised.value.kind == "ErrorException"
    assert xs.data_ptr == address
    assert np.from_dlpack(xs).tolist() == [1.0, 2.0, 3.0]


def test_tuples_of_any_length_convert():
    values = jl.eval("Tuple(1:5000)")
    assert values == tuple(range(1, 5001))
    arrays = jl.eval("Tuple([Float64(i)] for i in 1:1000)")
    assert len(arrays) == 1000 and np.from_dlpack(arrays[-1]).tolist() == [1000.0]


def test_a_failing_tuple_conversion_releases_the_tensors_made_before():
    start = testing.deleter_calls()
    with pytest.raises(jl.JuliaError):
        # Two exports of `x` are made before the third element cannot be shared.
        jl.call("x -> (x, x, [\"not shareable\"])", testing.counting_capsule([2]))
    collect_garbage()
    assert testing.deleter_calls() - start == 1


def test_errors_keep_their_julia_class_and_pickle():
    import pickle

    with pytest.raises(jl.JuliaError) as raised:
        jl.eval("sqrt(-1.0)")
    assert raised.value.kind == "DomainError"
    with pytest.raises(jl.JuliaError) as raised:
        jl.eval("undefined_name_here")
    assert raised.value.kind == "UndefVarError"
    copy = pickle.loads(pickle.dumps(raised.value))
    assert type(copy) is jl.JuliaError and copy.kind == "UndefVarError"
    assert str(copy) == str(raised.value)


def test_uint64_complex_and_numpy_scalars_keep_their_values():
    assert jl.eval("typemax(UInt64)") == 2**64 - 1
    assert jl.eval("1.5 - 2.0im") == complex(1.5, -2.0)
    assert jl.eval("ComplexF32(1, 2)") == complex(1, 2)
    assert jl.call("x -> (typeof(x), x)", np.int64(7))[1] == 7
    assert jl.call("x -> x isa Int64", np.int32(7)) is True
    assert jl.call("x -> x isa Float64 && x == 0.5", np.float32(0.5)) is True
    assert jl.call("x -> x isa Bool && x", np.bool_(True)) is True


def test_the_gil_is_released_while_julia_runs():
    jl.eval("1")
    ticks = []
    stop = threading.Event()

    def tick():
        while not stop.is_set():
            ticks.append(1)
            time.sleep(0.01)

    ticker = threading.Thread(target=tick)
    ticker.start()
    try:
        jl.eval("Libc.systemsleep(0.5)")
    finally:
        stop.set()
        ticker.join()
    assert len(ticks) >= 20, len(ticks)


def test_dlbridge_jl_comes_from_the_built_module_not_the_checkout():
    # The module carries DLBridge.jl's sources: it loads them from a private copy, removed once
    # loaded, so moving or deleting the checkout it was built from breaks nothing.
    script = (
        "import os\n"
        "from dlbridge import julia as jl\n"
        "source = jl.eval('string(first(methods(DLBridge.wrap)).file)')\n"
        "print(source)\n"
        "print(os.path.exists(source))\n"
        "print(float(jl.call('sum', __import__('numpy').ones(3))))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "DLBRIDGE_JULIA_PACKAGE"}
    done = subprocess.run(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        timeout=120, text=True, env=env,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    source, exists, total = done.stdout.split()
    checkout = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
    assert not source.startswith(checkout), source
    assert source.endswith("/src/wrap.jl") and exists == "False", done.stdout
    assert total == "3.0"


def test_a_tensor_that_requires_grad_is_taken_read_only_and_refused():
    t = torch.arange(3, dtype=torch.float64, requires_grad=True)
    with pytest.raises(jl.JuliaError, match="read-only"):
        jl.call("x -> (x .= 42; x)", t)
    assert t.tolist() == [0.0, 1.0, 2.0]
    assert jl.call("total", t.detach()) == 3.0


def test_the_installed_module_needs_nothing_from_the_build_tree(tmp_path):
    # The extension carries libdlbridge's C functions itself and DLBridge.jl loads them from it:
    # installed elsewhere (the package folder copied out of the checkout), with DLBRIDGE_LIB unset
    # and the working folder elsewhere, the module starts, calls its own dlb_* functions, loads no
    # libdlbridge at all, and passes tensors both ways.
    checkout = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
    site = tmp_path / "site"
    shutil.copytree(os.path.dirname(dlbridge.__file__), site / "dlbridge")
    script = (
        "import ctypes, numpy as np\n"
        "import dlbridge.julia as jl\n"
        "from dlbridge.julia import _julia\n"
        "class Info(ctypes.Structure):\n"
        "    _fields_ = [('fname', ctypes.c_char_p), ('fbase', ctypes.c_void_p),\n"
        "                ('sname', ctypes.c_char_p), ('saddr', ctypes.c_void_p)]\n"
        "free = jl.eval('Int(DLBridge.dlb_tensor_free_pointer[])')\n"
        "info = Info()\n"
        "assert ctypes.CDLL(None).dladdr(ctypes.c_void_p(free), ctypes.byref(info))\n"
        "print(_julia.__file__)\n"
        "print(info.fname.decode())\n"
        "print(jl.eval('join(filter(p -> startswith(basename(p), \"libdlbridge\"), "
        "DLBridge.Libdl.dllist()), \";\")'))\n"
        "a = np.arange(4.0)\n"
        "y = jl.call('x -> (x .*= 2; x)', a)\n"
        "print(np.from_dlpack(y).ctypes.data == a.ctypes.data, a.tolist())\n"
        "print(float(jl.call('sum', np.ones(5))))\n"
    )
    env = {
        k: v for k, v in os.environ.items()
        if k not in ("DLBRIDGE_LIB", "DLBRIDGE_JULIA_PACKAGE", "PYTHONPATH")
    }
    env["PYTHONPATH"] = str(site)
    done = subprocess.run(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        timeout=120, text=True, env=env, cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    extension, functions, loaded, shared, total = done.stdout.split("\n")[:5]
    assert extension.startswith(str(site)) and not extension.startswith(checkout), extension
    assert functions == extension, "DLBridge.jl calls the extension's own dlb_* functions"
    assert loaded == "", f"a libdlbridge was loaded: {loaded}"
    assert shared == "True [0.0, 2.0, 4.0, 6.0]"
    assert total == "5.0"

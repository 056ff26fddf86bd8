"""Tensors crossing threads, concurrent exchanges, and the absence of leaks over many exchanges."""

import gc
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

import dlbridge
from helpers import counting_capsule, deleter_calls, np_ptr, run_python


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def test_tensors_dropped_on_other_threads_run_their_deleter_once(deleter_count):
    tensors = [dlbridge.from_dlpack(counting_capsule([8])) for _ in range(64)]
    exports = [np.from_dlpack(t) for t in tensors[:32]]

    def drop(batch):
        batch.clear()

    workers = [threading.Thread(target=drop, args=(part,)) for part in (tensors, exports)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    gc.collect()
    assert deleter_count.calls == 64


def test_exports_released_on_another_thread_release_the_tensor():
    t = dlbridge.arange(16)
    start = sys.getrefcount(t)
    outs = [torch.from_dlpack(t) for _ in range(10)] + [np.from_dlpack(t) for _ in range(10)]
    assert sys.getrefcount(t) == start + 20
    threading.Thread(target=outs.clear).start()
    for _ in range(100):
        if sys.getrefcount(t) == start:
            break
        threading.Event().wait(0.01)
    assert sys.getrefcount(t) == start


def exchange_many(seed, rounds=300):
    rng = np.random.default_rng(seed)
    for _ in range(rounds):
        a = rng.integers(0, 1000, size=(4, 5)).astype(np.int64)
        t = dlbridge.from_dlpack(a)
        x = torch.from_dlpack(t)
        u = dlbridge.from_dlpack(x)
        b = np.from_dlpack(u)
        assert np_ptr(b) == np_ptr(a) == t.data_ptr == u.data_ptr
        assert b.tolist() == a.tolist()
        c = dlbridge.from_dlpack(counting_capsule([3]))
        assert c.tolist() == [0.0, 1.0, 2.0]
    return seed


def test_eight_threads_exchange_concurrently(deleter_count):
    with ThreadPoolExecutor(max_workers=8) as pool:
        assert sorted(pool.map(exchange_many, range(8))) == list(range(8))
    gc.collect()
    assert deleter_count.calls == 8 * 300


def test_no_leaks_over_100k_exchanges():
    a = np.arange(16, dtype=np.float32)
    torch_tensor = torch.arange(16.0)
    refcount = sys.getrefcount(a)
    from_dlpack = dlbridge.from_dlpack

    def exchanges(n):
        for _ in range(n):
            t = from_dlpack(a)
            np.from_dlpack(t)
            from_dlpack(torch_tensor)
            from_dlpack(t.__dlpack__(max_version=(1, 3)))
            from_dlpack(counting_capsule([2]))

    exchanges(2_000)  # warm up allocator pools and caches
    gc.collect()
    rss_before, calls_before = rss_bytes(), deleter_calls()
    live_before = dlbridge.diagnostics()
    exchanges(100_000)
    gc.collect()
    grown = rss_bytes() - rss_before
    assert deleter_calls() - calls_before == 100_000
    assert sys.getrefcount(a) == refcount
    assert dlbridge.diagnostics() == live_before
    # Five exchanges per round: leaking even one 64-byte block each would grow RSS by ~30 MiB.
    assert grown < 4 << 20, f"RSS grew by {grown} bytes"


SHUTDOWN_SCRIPT = r"""
import sys
import threading
import numpy as np
import dlbridge

# Tensors and exports that only interpreter shutdown releases, some in reference cycles.
keep = []
for i in range(50):
    t = dlbridge.from_dlpack(np.arange(8.0))
    keep.append((t, np.from_dlpack(t)))
    cycle = [dlbridge.arange(4), t.__dlpack__(max_version=(1, 0))]
    cycle.append(cycle)
if "torch" in sys.argv:
    import torch
    keep += [torch.from_dlpack(t) for t, _ in keep]
    keep += [dlbridge.from_dlpack(torch.arange(4.0)) for _ in range(10)]

# Daemon threads still exchanging while the interpreter finalizes. (Not torch: a daemon thread
# inside torch at shutdown aborts the process without dlbridge too.)
def churn():
    while True:
        t = dlbridge.from_dlpack(np.arange(16.0))
        u = np.from_dlpack(t)
        dlbridge.from_dlpack(u, copy=True)
        t.__dlpack__(max_version=(1, 0))

for _ in range(2):
    threading.Thread(target=churn, daemon=True).start()
print("ok", flush=True)
"""


def test_interpreter_shutdown_with_live_tensors_and_busy_threads_is_clean():
    for peers in [[], [], [], ["torch"]]:
        assert run_python(SHUTDOWN_SCRIPT, *peers, timeout=120) == "ok"

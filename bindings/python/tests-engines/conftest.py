"""Fixtures for the engine tests: a local Ray and a Dask LocalCluster of worker processes, each
started once per module and checked to leave nothing behind (no descendant process, no segment,
no object-store file)."""

import gc
import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest


def command_line(pid):
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def descendants():
    """Processes whose parent chain leads to this one, but for multiprocessing's resource
    tracker: the standard library starts one per interpreter, on first use, to outlive the
    workers and exit with this process."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(stat.parent.name)] = int(fields[1])
    found, frontier = set(), {os.getpid()}
    while frontier:
        frontier = {pid for pid, ppid in parents.items() if ppid in frontier} - found
        found |= frontier
    return {pid for pid in found if "multiprocessing.resource_tracker" not in command_line(pid)}


def wait_for_no_descendants(seconds=30.0):
    """The descendants still alive after ``seconds`` (an engine's shutdown is asynchronous)."""
    deadline = time.monotonic() + seconds
    while (left := descendants()) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def shm_entries():
    return set(os.listdir("/dev/shm"))


@pytest.fixture(scope="module")
def ray_session():
    """``ray`` after ``ray.init(num_cpus=2)`` with a temporary directory of its own; at teardown,
    Ray is shut down, its directory removed, and no process or /dev/shm entry of it is left."""
    ray = pytest.importorskip("ray")
    shm = shm_entries()
    temp = tempfile.mkdtemp(prefix="ray", dir="/tmp")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _temp_dir=temp)
    try:
        yield ray
    finally:
        ray.shutdown()
        gc.collect()
        left = wait_for_no_descendants()
        shutil.rmtree(temp, ignore_errors=True)
        assert not left, f"Ray left processes behind: {sorted(left)}"
        new = {e for e in shm_entries() - shm if "ray" in e or "plasma" in e}
        assert not new, f"Ray left /dev/shm entries behind: {sorted(new)}"


@pytest.fixture(scope="module")
def dask_client():
    """A ``distributed.Client`` on a LocalCluster of 2 worker processes; at teardown, both are
    closed and no worker process is left."""
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    )
    client = distributed.Client(cluster)
    try:
        yield client
    finally:
        client.close()
        cluster.close()
        gc.collect()
        left = wait_for_no_descendants()
        assert not left, f"Dask left processes behind: {sorted(left)}"

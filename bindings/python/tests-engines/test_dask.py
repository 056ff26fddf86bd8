"""dlbridge tensors through Dask distributed on a LocalCluster of 2 worker processes: scatter,
submit and gather carry them (protocol 5, out of band), and dask.array works over their memory."""

import numpy as np

import dlbridge


def total(t):
    import numpy as np

    return type(t).__name__, float(np.from_dlpack(t).sum())


def doubled(t):
    import numpy as np

    import dlbridge

    return dlbridge.from_dlpack(np.from_dlpack(t) * 2)


def test_scatter_submit_gather(dask_client):
    t = dlbridge.from_dlpack(np.arange(1 << 20, dtype=np.float32))
    future = dask_client.scatter(t, broadcast=True)
    assert dask_client.submit(total, future).result() == ("Tensor", float(np.arange(1 << 20, dtype=np.float32).sum()))
    back = dask_client.gather(dask_client.submit(doubled, future))
    assert type(back) is dlbridge.Tensor
    assert (back.shape, back.dtype) == ((1 << 20,), "float32")
    assert back.tolist()[:3] == [0.0, 2.0, 4.0]


def test_tensors_in_structures_and_layouts(dask_client):
    a = np.asfortranarray(np.arange(12, dtype=np.int64).reshape(3, 4))
    t = dlbridge.from_dlpack(a)
    got = dask_client.gather(dask_client.submit(lambda x: x, {"w": t, "n": 3}))
    assert got["n"] == 3
    assert (got["w"].shape, got["w"].strides) == ((3, 4), (1, 3))
    assert got["w"].tolist() == a.tolist()


def test_dask_array_over_a_tensors_memory(dask_client):
    import dask.array as da

    t = dlbridge.from_dlpack(np.arange(1 << 16, dtype=np.float64))
    view = np.asarray(t)  # zero-copy: the tensor's memory, kept alive by the view
    assert view.ctypes.data == t.data_ptr
    x = da.from_array(view, chunks=1 << 14)
    assert x.sum().compute() == float(np.arange(1 << 16).sum())
    assert (x * 2).compute()[-1] == 2.0 * ((1 << 16) - 1)

# A starting point for Mojo: a numpy array becomes a zero-copy Mojo view, and a tensor Mojo
# allocates goes to numpy and torch without a copy. Run from the repository root (docs/mojo.md):
#   eval "$(scripts/mojo-env.sh)"
#   mojo run -I bindings/mojo examples/mojo/quickstart.mojo
from std.python import Python
from dlbridge import StridedTensor, arange, from_dlpack, to_dlpack


def main() raises:
    var np = Python.import_module("numpy")
    var torch = Python.import_module("torch")

    var a = np.arange(6.0).reshape(2, 3)
    var v = from_dlpack[DType.float64](a)  # a view of numpy's memory
    v[1, 2] = 50.0  # numpy sees the write
    print("numpy -> Mojo:", v.shape(), v.strides(), a[1, 2])

    var t = arange[DType.float32](4)  # memory dlbridge owns, 64-byte aligned
    var x = torch.from_dlpack(to_dlpack(t))
    t[0] = 7.0  # torch sees the write
    print("Mojo -> torch:", x.tolist(), x.data_ptr() == Int(t.unsafe_ptr()))

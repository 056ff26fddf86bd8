"""Mojo hop of the demo: map the segment (through the dlbridge Python package), view it from
Mojo without copying, report, add 1 to element `mark` (row-major)."""

from std.python import Python
from std.sys import argv

from dlbridge import StridedTensor, from_dlpack


def main() raises:
    var args = argv()
    var handle = String(args[1])
    var mark = Int(String(args[2]))
    var shared = Python.import_module("dlbridge").from_shared(handle, writable=True)
    var v = from_dlpack[DType.float32](shared)
    var shape = v.shape()
    var checksum: Float64 = 0
    for i in range(shape[0]):
        for j in range(shape[1]):
            checksum += Float64(v[i, j]) * Float64(i * shape[1] + j + 1)
    v[mark // shape[1], mark % shape[1]] += 1
    var copied = "true" if v.is_copied() else "false"
    print(
        '{"runtime": "mojo", "address": ' + String(Int(v.unsafe_ptr()))
        + ', "copied": ' + copied + ', "checksum": ' + String(checksum) + "}"
    )

"""
    DLBridge

Zero-copy DLPack 1.3 tensor exchange for Julia, over the C ABI of libdlbridge (`ccall`).

- [`DLBridge.wrap`](@ref): a Julia array over a tensor's memory (row-major data with reversed
  dimensions, or in the tensor's order with `order = :permuted`; any strides).
- [`DLBridge.share`](@ref): a tensor over a Julia array's memory, keeping the array alive until
  every consumer has let go (on any thread).
- [`DLBridge.Tensor`](@ref), [`DLBridge.import_tensor`](@ref), [`DLBridge.export_tensor`](@ref):
  exchange with the Rust core, C and every other frontend as DLPack managed tensors.
- [`DLBridge.empty_shared`](@ref), [`DLBridge.to_shared`](@ref), [`DLBridge.from_shared`](@ref):
  tensors in shared-memory segments, named by a handle string, for other processes.

The library is `ENV["DLBRIDGE_LIB"]` or the repository's `target/release/libdlbridge.so`
([`DLBridge.library_path`](@ref)). Nothing is exported: call the functions qualified.
"""
module DLBridge

using Libdl

include("capi.jl")
include("dtypes.jl")
include("tensor.jl")
include("release.jl")
include("strided.jl")
include("wrap.jl")
include("share.jl")
include("exchange.jl")
include("shared_memory.jl")

function __init__()
    load_library()
    open_release_queue()
    return nothing
end

end # module

# `DLBridge.Tensor`: one libdlbridge handle, its description, and its memory layout.

# How a tensor's memory is laid out, decided once per tensor (by the C library's contiguity test,
# which ignores size-1 dimensions and calls a tensor without elements contiguous in both orders).
abstract type Layout end
"Compact in C order (last index fastest); also a tensor compact in both orders, like (1, 1, N)."
struct RowMajor <: Layout end
"Compact in F order (first index fastest) and not in C order."
struct ColumnMajor <: Layout end
"Neither: gaps, zero, negative or permuted strides."
struct Strided <: Layout end

"""
    DLBridge.Tensor

A DLPack tensor held through libdlbridge: a description (shape, strides, dtype, device, flags)
of memory that some producer owns, and one reference that keeps that memory alive. It is not an
array: use [`DLBridge.wrap`](@ref) for a Julia array over its memory.

Made by [`DLBridge.share`](@ref) (over a Julia array), [`DLBridge.import_tensor`](@ref) (from a
producer's managed tensor), [`DLBridge.arange`](@ref) and [`DLBridge.zeros`](@ref) (memory made
by the Rust core) and `copy`; `DLBridge.Tensor(handle::Ptr{Cvoid})` takes ownership of a
`dlb_tensor*` that libdlbridge made in this process (for another binding, say).

When the `Tensor` is garbage collected (or `finalize`d) its reference is dropped; the producer's
deleter runs once the last reference is gone (arrays from `wrap` and exported managed tensors
hold references of their own). A finalized `Tensor` cannot be used any more.

Inspection: `size(t)` and `strides(t)` give the DLPack shape and element strides as stored,
`ndims(t)`, `length(t)`, `eltype(t)`, [`DLBridge.dtype`](@ref), [`DLBridge.device`](@ref),
[`DLBridge.isreadonly`](@ref).
"""
mutable struct Tensor
    handle::Ptr{Cvoid}
    desc::CTensorDesc
    layout::Layout

    function Tensor(handle::Ptr{Cvoid})
        desc = Ref{CTensorDesc}()
        status = dlb_tensor_info(handle, desc)
        if status != 0
            dlb_tensor_free(handle)
            check(status)
        end
        t = new(handle, desc[], memory_layout(handle))
        return finalizer(release_handle!, t)
    end
end

function memory_layout(handle::Ptr{Cvoid})
    is_compact(order) = (out = Ref{Cint}(); check(dlb_tensor_is_contiguous(handle, order, out));
                         out[] != 0)
    is_compact(DLB_ORDER_C) && return RowMajor()
    is_compact(DLB_ORDER_F) && return ColumnMajor()
    return Strided()
end

# The finalizer: drops this tensor's reference (the producer's deleter may run now, on this
# thread; for `share`d arrays that only queues the release, see release.jl).
function release_handle!(t::Tensor)
    handle, t.handle = t.handle, C_NULL
    dlb_tensor_free(handle)
    return nothing
end

# The live handle of `t` (an ArgumentError after `finalize(t)`).
function live_handle(t::Tensor)
    t.handle == C_NULL && throw(ArgumentError("the DLBridge.Tensor was finalized"))
    return t.handle
end

# A new, owned tensor from a C function filling an out-handle, e.g.
# `new_tensor(out -> dlb_tensor_copy(h, order, out))`.
function new_tensor(make)
    out = Ref{Ptr{Cvoid}}(C_NULL)
    check(make(out))
    return Tensor(out[])
end

Base.ndims(t::Tensor) = Int(t.desc.ndim)
Base.length(t::Tensor) = Int(t.desc.size)
Base.size(t::Tensor) = dims_tuple(t, t.desc.shape)
Base.strides(t::Tensor) = dims_tuple(t, t.desc.strides)

# The tensor's shape or strides (they live in the tensor, valid while its handle is).
dims_tuple(t::Tensor, values::Ptr{Int64}) =
    GC.@preserve t (live_handle(t); ntuple(i -> Int(unsafe_load(values, i)), ndims(t)))

"""
    eltype(t::DLBridge.Tensor) -> DataType

The Julia element type of the tensor's dtype; an `ArgumentError` naming the dtype if DLBridge
does not support it (see [`DLBridge.dtype`](@ref) for the name of any dtype).
"""
Base.eltype(t::Tensor) = julia_eltype(t.desc.dtype)

"""
    DLBridge.dtype(t::DLBridge.Tensor) -> String

The numpy-style name of the tensor's dtype ("float32", "bfloat16", "complex64", ...), also for
dtypes that have no Julia element type.
"""
dtype(t::Tensor) = dtype_name(t.desc.dtype)

"""
    DLBridge.device(t::DLBridge.Tensor) -> Tuple{Int,Int}

The tensor's DLPack device as `(device_type, device_id)`: `(1, 0)` for host memory.
"""
device(t::Tensor) = (Int(t.desc.device.device_type), Int(t.desc.device.device_id))

"""
    DLBridge.isreadonly(t::DLBridge.Tensor) -> Bool

Whether the producer flagged the memory read-only (DLPack's READ_ONLY flag). `wrap` refuses
such tensors unless called with `unsafe_ignore_readonly = true`.
"""
isreadonly(t::Tensor) = t.desc.flags & DLB_FLAG_READ_ONLY != 0

"""
    DLBridge.iscopied(t::DLBridge.Tensor) -> Bool

Whether the data was copied on its way here (DLPack's IS_COPIED flag), as by `copy(t)`.
"""
iscopied(t::Tensor) = t.desc.flags & DLB_FLAG_IS_COPIED != 0

function Base.show(io::IO, t::Tensor)
    t.handle == C_NULL && return print(io, "DLBridge.Tensor(finalized)")
    print(io, "DLBridge.Tensor(", dtype(t), ", size ", size(t), ", strides ", strides(t))
    device(t) == (1, 0) || print(io, ", device ", device(t))
    isreadonly(t) && print(io, ", read-only")
    iscopied(t) && print(io, ", copied")
    print(io, ")")
end

"""
    copy(t::DLBridge.Tensor; order = :C) -> DLBridge.Tensor

A compact copy of a host tensor's elements, made by the Rust core, in row-major (`order = :C`)
or column-major (`order = :F`) order, whatever `t`'s strides. The copy is writable (also when
`t` is read-only) and flagged as copied ([`DLBridge.iscopied`](@ref)); it is the only way
DLBridge copies data.
"""
function Base.copy(t::Tensor; order::Symbol = :C)
    collect_released()
    c_order = order === :C ? DLB_ORDER_C : order === :F ? DLB_ORDER_F :
        throw(ArgumentError("order must be :C or :F, got :$order"))
    handle = live_handle(t)
    return GC.@preserve t new_tensor(out -> dlb_tensor_copy(handle, c_order, out))
end

"""
    DLBridge.arange(T, n) -> DLBridge.Tensor

The 1-d tensor `0, 1, ..., n-1` of element type `T` (`Bool`: `i != 0`; complex: real part), in
memory allocated by the Rust core (64-byte aligned), for exchanges and tests.
"""
function arange(::Type{T}, n::Integer) where {T}
    collect_released()
    dtype = dl_dtype(T)
    return new_tensor(out -> dlb_tensor_arange(Int64(n), dtype, out))
end

"""
    DLBridge.zeros(T, dims...) -> DLBridge.Tensor

A zero-filled, row-major tensor of element type `T` and DLPack shape `dims` (so `wrap` gives a
Julia array of size `reverse(dims)`), in memory allocated by the Rust core. `DLBridge.zeros(T)`
is a 0-d tensor.
"""
function zeros(::Type{T}, dims::Integer...) where {T}
    collect_released()
    dtype = dl_dtype(T)
    shape = Int64[dims...]
    return new_tensor(out -> dlb_tensor_empty(Int32(length(shape)), shape, dtype, out))
end

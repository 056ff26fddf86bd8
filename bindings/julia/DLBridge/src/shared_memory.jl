# Shared-memory segments, for runtimes that cannot share a process: a tensor lives in a size-sealed
# memory file that any process of the same user can map by its handle (a short string). The C
# library owns the segments: each side's tensors hold it, and the kernel frees it with its last
# holder, so nothing is ever left behind.

"""
    DLBridge.empty_shared(T, dims...) -> Tuple{String,DLBridge.Tensor}

A zero-filled, row-major tensor of element type `T` and DLPack shape `dims` (so `wrap` gives a
Julia array of size `reverse(dims)`, as for [`DLBridge.zeros`](@ref)) in a new shared-memory
segment, and the segment's handle: another process passes the handle to
[`DLBridge.from_shared`](@ref) and maps the same memory, so writes on either side are seen by the
other, with no copy at all.

The tensor holds this side's reference to the segment. The segment is removed when every side
has let go (here: the tensor and every array `wrap`ped over it are gone), so keep the tensor or
an array over it alive until the other process has opened the handle. An `ArgumentError` names
an unsupported `T` or a negative dimension; an `ErrorException` says why the operating system
could not create the segment.
"""
function empty_shared(::Type{T}, dims::Integer...) where {T}
    collect_released()
    dtype = dl_dtype(T)
    shape = Int64[dims...]
    buffer = handle_buffer()
    t = new_tensor(out -> dlb_shm_empty(Int32(length(shape)), shape, dtype, buffer,
                                        length(buffer), out))
    return handle_string(buffer), t
end

"""
    DLBridge.to_shared(t::DLBridge.Tensor) -> String
    DLBridge.to_shared(A) -> String

Copies the host tensor `t` into a new shared-memory segment in row-major (C) order, whatever its
strides, and returns the segment's handle for [`DLBridge.from_shared`](@ref) in another process.
This is the one copy a cross-process exchange costs ([`DLBridge.empty_shared`](@ref) costs
none); the segment's tensor is flagged as copied ([`DLBridge.iscopied`](@ref)).

This side keeps no reference: this process's keeper holds the segment for the next opener, even
if this process has exited by then, and the opener's tensor holds it afterwards; the handle
opens once. A handle that is never opened is freed after `DLBRIDGE_SHM_HANDOFF_SECONDS` (default
600). An `ErrorException` if no keeper can hold it (`DLB_ERR_SHM_IO`).

Any array [`DLBridge.share`](@ref) accepts is shared first (so a Julia array `A` arrives as the
row-major tensor of shape `reverse(size(A))`: `from_shared` and `wrap` give back `A`'s values
and size). Errors: an `ArgumentError` for an array `share` refuses, for a tensor that is not on
the CPU (`DLB_ERR_NOT_ON_CPU`) or whose layout cannot be copied; an `ErrorException` says why
the operating system could not create the segment.
"""
function to_shared(t::Tensor)
    collect_released()
    handle = live_handle(t)
    buffer = handle_buffer()
    GC.@preserve t check(dlb_shm_export(handle, buffer, length(buffer), Ptr{Ptr{Cvoid}}(C_NULL)))
    return handle_string(buffer)
end

function to_shared(A::AbstractArray)
    t = share(A)
    handle = to_shared(t)
    finalize(t)  # the segment holds a copy: `A` need not stay rooted for it
    return handle
end

function to_shared(x)
    throw(ArgumentError("cannot copy a $(typeof(x)) into shared memory: expected a " *
                        "DLBridge.Tensor or an array DLBridge.share accepts"))
end

"""
    DLBridge.from_shared(handle::AbstractString; writable = false) -> DLBridge.Tensor

Maps the shared-memory segment `handle` (made by [`DLBridge.empty_shared`](@ref) or
[`DLBridge.to_shared`](@ref) in this or any other process, or by another dlbridge frontend) and
returns a tensor over it, without copying. The segment's header is validated like any foreign
tensor.

By default the data is mapped read-only and the tensor is flagged read-only
([`DLBridge.isreadonly`](@ref)), so `wrap` refuses it: use `wrap(copy(t))`, or
`wrap(t; unsafe_ignore_readonly = true)` to read in place (the pages are copy-on-write: a write
through that array changes only this process's copy, never the segment). With `writable = true` the mapping is writable
and writes are seen by every side.

The tensor (with the arrays `wrap`ped over it) holds this side's reference; the segment is
removed when the last side lets go. Errors name the handle: an `ArgumentError` for a handle
that is not a segment name (`DLB_ERR_UNKNOWN_NAME`), a segment that no longer exists or never
did (`DLB_ERR_SHM_NOT_FOUND`), or one that is not a valid dlbridge segment
(`DLB_ERR_SHM_INVALID`, or the header field that fails validation); an `ErrorException` for a
failed system call (`DLB_ERR_SHM_IO`).
"""
function from_shared(handle::AbstractString; writable::Bool = false)
    collect_released()
    name = String(handle)
    out = Ref{Ptr{Cvoid}}(C_NULL)
    check(dlb_shm_open(name, Cint(writable), out), name)
    return Tensor(out[])
end

# A buffer for a segment handle written by the C library, and the handle it holds.
handle_buffer() = Vector{UInt8}(undef, DLB_SHM_HANDLE_CAPACITY)
handle_string(buffer::Vector{UInt8}) = GC.@preserve buffer unsafe_string(pointer(buffer))

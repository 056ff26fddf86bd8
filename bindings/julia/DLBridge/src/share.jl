# `DLBridge.share`: tensors over Julia arrays' memory, keeping the arrays alive for consumers.

"""
    DLBridge.Shareable{T,N}

The arrays [`DLBridge.share`](@ref) accepts: Base's `StridedArray`s (`Array`, `SubArray`s with
range indices, reshaped and reinterpreted dense arrays), [`DLBridge.StridedView`](@ref)s, and
`PermutedDimsArray`s of either. Their eltype must be a [`DLBridge.SupportedEltype`](@ref).
"""
const Shareable{T,N} = Union{
    StridedArray{T,N},
    StridedView{T,N},
    PermutedDimsArray{T,N,P,Q,<:Union{StridedArray,StridedView}} where {P,Q},
}

"""
    DLBridge.share(A; order = :reversed, readonly = false) -> DLBridge.Tensor

A tensor over the memory of the strided Julia array `A` ([`DLBridge.Shareable`](@ref)), without
copying: writes on either side are seen by the other. DLBridge keeps `A` alive until the tensor,
its clones and every managed tensor exported from it are gone, whichever thread drops the last
of them (the release only records a token, which DLBridge collects on its next call or in
[`DLBridge.collect_released`](@ref)).

With `order = :reversed` (the default) the tensor has `A`'s dimensions and strides reversed, so
a row-major reader (numpy, torch, C) indexing `T[i, j, k]` sees `A[k, j, i]`: a column-major
`Array` becomes a C-contiguous tensor and `size(DLBridge.share(A)) == reverse(size(A))`. With
`order = :same` the tensor describes `A`'s layout as is (`T[i, j, k] == A[i, j, k]`, F-contiguous
for an `Array`). `readonly = true` flags the tensor read-only for consumers.

Any layout `strides(A)` can describe is exported as it is (gaps, negative steps, zero-length
dimensions, 0-d arrays). An `ArgumentError` names an unsupported element type or a non-strided
array type.
"""
function share(A::Shareable{T,N}; order::Symbol = :reversed, readonly::Bool = false) where {T,N}
    collect_released()
    dtype = dl_dtype(T)
    order === :reversed || order === :same ||
        throw(ArgumentError("order must be :reversed or :same, got :$order"))
    shape = order === :reversed ? reverse(size(A)) : size(A)
    steps = order === :reversed ? reverse(strides(A)) : strides(A)
    flags = readonly ? DLB_FLAG_READ_ONLY : UInt64(0)
    token = root!(A)
    out = Ref{Ptr{Cvoid}}(C_NULL)
    status = GC.@preserve A dlb_tensor_from_memory_queued(
        Ptr{Cvoid}(pointer(A)), Int32(N), dims_argument(shape), dims_argument(steps), dtype, CPU,
        flags, RELEASE_QUEUE[], token, out)
    if status != 0
        unroot!(token)
        check(status)
    end
    return Tensor(out[])
end

function share(A::AbstractArray; order::Symbol = :reversed, readonly::Bool = false)
    throw(ArgumentError("DLBridge.share needs a strided array (Array, a SubArray with range " *
                        "indices, a StridedView, ...); $(typeof(A)) is not one: " *
                        "DLBridge.share(collect(A)) shares a copy"))
end

# A shape or strides argument for the C ABI: the tuple's values, or NULL when there are none.
dims_argument(dims::Tuple{}) = Ptr{Int64}(C_NULL)
dims_argument(dims::NTuple{N,Int}) where {N} = Ref(dims)

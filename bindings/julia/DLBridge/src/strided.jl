# `DLBridge.StridedView`: a Julia array over memory with any element strides.

"""
    DLBridge.StridedView{T,N} <: AbstractArray{T,N}

A zero-copy view of `N`-dimensional memory with arbitrary element strides: gaps, zero strides
(broadcast dimensions), negative strides and overlapping elements. `wrap` returns one for
tensors that are neither row- nor column-major compact, and `wrap(DLBridge.StridedView{T,N}, t)`
returns one for any tensor.

`S[i, j, ...]` is the element at `offset + (i-1)*strides(S)[1] + (j-1)*strides(S)[2] + ...` of a
vector over the bytes the layout spans, so indexing is bounds-checked and never leaves that span.
It implements the strided-array interface (`strides`, `pointer`, `Base.unsafe_convert`), so
BLAS-backed and other strided code accepts it, and `DLBridge.share` can hand it on.
`parent(S)` is the vector over the span: the array whose finalizer drops the view's reference to
the tensor (a view without elements has a new, empty one).
"""
struct StridedView{T,N} <: AbstractArray{T,N}
    span::Vector{T}
    offset::Int
    size::NTuple{N,Int}
    strides::NTuple{N,Int}
end

Base.size(S::StridedView) = S.size
Base.strides(S::StridedView) = S.strides
Base.IndexStyle(::Type{<:StridedView}) = IndexCartesian()
Base.elsize(::Type{<:StridedView{T}}) where {T} = sizeof(T)
Base.pointer(S::StridedView) = pointer(S.span, S.offset)
Base.parent(S::StridedView) = S.span
Base.unsafe_convert(::Type{Ptr{T}}, S::StridedView{T}) where {T} = pointer(S)

# Position in `span` of the element at index `I`.
@inline function span_index(S::StridedView{T,N}, I::NTuple{N,Int}) where {T,N}
    position = S.offset
    for d in 1:N
        position += (I[d] - 1) * S.strides[d]
    end
    return position
end

@inline function Base.getindex(S::StridedView{T,N}, I::Vararg{Int,N}) where {T,N}
    @boundscheck checkbounds(S, I...)
    return @inbounds S.span[span_index(S, I)]
end

@inline function Base.setindex!(S::StridedView{T,N}, value, I::Vararg{Int,N}) where {T,N}
    @boundscheck checkbounds(S, I...)
    @inbounds S.span[span_index(S, I)] = value
    return S
end

# A view of `size`/`strides` (in elements) around element 0 at `data`, over a vector that spans
# exactly the elements it reaches; `keep_alive!` attaches the memory's owner to that vector.
# Without elements there is no memory to reach (`data` may be NULL): the vector is a new, empty one.
function strided_view(::Type{T}, data::Ptr{T}, size::NTuple{N,Int}, strides::NTuple{N,Int},
                      keep_alive!) where {T,N}
    any(iszero, size) && return StridedView{T,N}(T[], 1, size, strides)
    low = high = 0
    for d in 1:N
        reach = (size[d] - 1) * strides[d]
        reach < 0 ? (low += reach) : (high += reach)
    end
    span = unsafe_wrap(Array, data + low * sizeof(T), high - low + 1)
    keep_alive!(span)
    return StridedView{T,N}(span, 1 - low, size, strides)
end

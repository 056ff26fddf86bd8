# `DLBridge.wrap`: Julia arrays over a tensor's memory, without copying.

"""
    DLBridge.wrap(t::DLBridge.Tensor; order = :reversed, unsafe_ignore_readonly = false)

A Julia array over the memory of the host tensor `t`, without copying: writes through it are
seen by the producer and the other way round. The array holds its own reference to the tensor,
so the producer's deleter runs only after `t` and every array from `wrap` (with any view,
reshape or permutation of them) are unreachable; then it runs exactly once.

With `order = :reversed` (the default, DLPack.jl's convention) the array is column-major:
- row-major (C-order) data gives an `Array` with the dimensions reversed: `B[k, j, i] == T[i, j, k]`;
  a tensor that is compact in both orders, such as shape (1, 1, N), counts as row-major;
- column-major data keeps its dimensions: `B[i, j, k] == T[i, j, k]`;
- any other strides (gaps, zero, negative or permuted strides, a byte offset) give a
  [`DLBridge.StridedView`](@ref) with the dimensions reversed, which reads and writes exactly the
  elements the strides address.

With `order = :permuted` the result is a `PermutedDimsArray` over that array with the tensor's
own shape: `P[i, j, k] == T[i, j, k]` (and `size(P) == size(t)`).

A read-only tensor ([`DLBridge.isreadonly`](@ref)) is refused with an `ArgumentError`, because a
Julia array cannot forbid writes: `unsafe_ignore_readonly = true` wraps it anyway, and the caller
answers for nothing writing through the array (writing may corrupt the producer's data or crash).
`wrap(copy(t))` is the safe alternative. A `Bool` array is made only over bytes 0 and 1 (a
Julia `Bool` holding another byte is undefined behaviour): a bool tensor holding another byte
is refused with an `ArgumentError` naming the first such element's index (0-based, in the
tensor's order) and byte (`DLB_ERR_INVALID_BOOL`, dlbridge's one bool rule); the check reads
every element once, when wrapping. Tensors that are not on the CPU, whose dtype has no
Julia element type ([`DLBridge.SupportedEltype`](@ref)), or whose data is misaligned for the
element type raise an `ArgumentError` naming the offending value.

The result's type depends on the tensor's dtype, ndims and layout; for type-stable code see
`wrap(Array{T,N}, t)` and `wrap(DLBridge.StridedView{T,N}, t)`.
"""
function wrap(t::Tensor; order::Symbol = :reversed, unsafe_ignore_readonly::Bool = false)
    collect_released()
    check_wrappable(t, unsafe_ignore_readonly)
    T, N = eltype(t), ndims_val(ndims(t))
    order === :reversed && return natural_array(T, N, t.layout, t)
    order === :permuted && return logical_array(T, N, t.layout, t)
    throw(order_error(order))
end

# `Val(n)` for a run-time `n` costs microseconds in Julia 1.5 (it builds the type); the usual
# dimension counts come from this table instead.
const NDIMS_VALS = ntuple(n -> Val(n - 1), 33)
ndims_val(n::Int) = n < length(NDIMS_VALS) ? NDIMS_VALS[n + 1] : Val(n)

"""
    DLBridge.wrap(Array{T,N}, t::DLBridge.Tensor; unsafe_ignore_readonly = false) -> Array{T,N}

Type-stable `wrap(t)` for compact tensors: the `Array` that `wrap(t)` returns (dimensions
reversed for row-major data, kept for column-major data). An `ArgumentError` if `t`'s element
type is not `T` or its layout is not compact (use `DLBridge.StridedView{T,N}` then), a
`DimensionMismatch` if it does not have `N` dimensions.
"""
function wrap(::Type{Array{T,N}}, t::Tensor; unsafe_ignore_readonly::Bool = false) where {T,N}
    collect_released()
    check_wrappable(t, unsafe_ignore_readonly)
    check_eltype_and_ndims(T, N, t)
    t.layout isa Strided &&
        throw(ArgumentError("a tensor of size $(size(t)) and strides $(strides(t)) is not " *
                            "compact, so no Array can view it: wrap it as a " *
                            "DLBridge.StridedView{$T,$N}"))
    return compact_array(T, Val(N), t, t.layout isa RowMajor)
end

"""
    DLBridge.wrap(DLBridge.StridedView{T,N}, t::DLBridge.Tensor; order = :reversed,
                  unsafe_ignore_readonly = false) -> DLBridge.StridedView{T,N}

Type-stable `wrap` for any layout: a [`DLBridge.StridedView`](@ref) over `t`'s memory. With
`order = :reversed` its dimensions are those of `wrap(t)` (reversed unless the data is
column-major); with `order = :permuted` they are the tensor's own (`S[i, j, k] == T[i, j, k]`).
Errors as for `wrap(Array{T,N}, t)`.
"""
function wrap(::Type{StridedView{T,N}}, t::Tensor; order::Symbol = :reversed,
              unsafe_ignore_readonly::Bool = false) where {T,N}
    collect_released()
    check_wrappable(t, unsafe_ignore_readonly)
    check_eltype_and_ndims(T, N, t)
    order === :reversed && return strided_array(T, Val(N), t, !(t.layout isa ColumnMajor))
    order === :permuted && return strided_array(T, Val(N), t, false)
    throw(order_error(order))
end

order_error(order) = ArgumentError("order must be :reversed or :permuted, got :$order")

function check_wrappable(t::Tensor, unsafe_ignore_readonly::Bool)
    live_handle(t)
    device(t)[1] == DLB_DEVICE_TYPE_CPU ||
        throw(ArgumentError("the tensor is on device $(device(t)); only host memory (device " *
                            "type $DLB_DEVICE_TYPE_CPU) can be wrapped"))
    isreadonly(t) && !unsafe_ignore_readonly &&
        throw(ArgumentError("the tensor is read-only (DLPack READ_ONLY flag) and a Julia array " *
                            "cannot forbid writes: wrap(copy(t)) for a writable copy, or pass " *
                            "unsafe_ignore_readonly = true if nothing will write through it " *
                            "(a legacy pointer imports read-only unless " *
                            "import_tensor(p; readonly = false))"))
    t.desc.dtype.code == CODE_BOOL && GC.@preserve t check(dlb_tensor_check_values(live_handle(t)))
    return nothing
end

function check_eltype_and_ndims(::Type{T}, N::Int, t::Tensor) where {T}
    eltype(t) === T ||
        throw(ArgumentError("the tensor's dtype is $(dtype(t)) ($(eltype(t))), not $T"))
    ndims(t) == N ||
        throw(DimensionMismatch("the tensor has $(ndims(t)) dimensions, not $N"))
    return nothing
end

# The array `wrap(t; order = :reversed)` returns, by layout (one concrete type per method).
natural_array(::Type{T}, ::Val{N}, ::RowMajor, t) where {T,N} = compact_array(T, Val(N), t, true)
natural_array(::Type{T}, ::Val{N}, ::ColumnMajor, t) where {T,N} = compact_array(T, Val(N), t, false)
natural_array(::Type{T}, ::Val{N}, ::Strided, t) where {T,N} = strided_array(T, Val(N), t, true)

# The array `wrap(t; order = :permuted)` returns: the natural array seen in the tensor's order.
logical_array(::Type{T}, ::Val{N}, layout::Union{RowMajor,Strided}, t) where {T,N} =
    permuted(natural_array(T, Val(N), layout, t), Val(:reversed))
logical_array(::Type{T}, ::Val{N}, layout::ColumnMajor, t) where {T,N} =
    permuted(natural_array(T, Val(N), layout, t), Val(:identity))

# `PermutedDimsArray(A, perm)` for the reversing or the identity permutation, with the
# permutation computed when compiling (the constructor's run-time type building is slow).
@generated function permuted(A::AbstractArray{T,N}, ::Val{kind}) where {T,N,kind}
    perm = kind === :reversed ? ntuple(d -> N + 1 - d, N) : ntuple(identity, N)
    return :(PermutedDimsArray{T,N,$perm,$perm,typeof(A)}(A))
end

# An Array over a compact tensor, its dimensions reversed or kept.
function compact_array(::Type{T}, ::Val{N}, t::Tensor, reversed::Bool) where {T,N}
    shape = tensor_dims(Val(N), t, t.desc.shape)
    A = unsafe_wrap(Array, element_pointer(T, t), reversed ? reverse(shape) : shape)
    hold_reference!(A, t)
    return A
end

# A StridedView over any tensor, its dimensions (and strides) reversed or kept.
function strided_array(::Type{T}, ::Val{N}, t::Tensor, reversed::Bool) where {T,N}
    shape = tensor_dims(Val(N), t, t.desc.shape)
    steps = tensor_dims(Val(N), t, t.desc.strides)
    if reversed
        shape, steps = reverse(shape), reverse(steps)
    end
    return strided_view(T, element_pointer(T, t), shape, steps, A -> hold_reference!(A, t))
end

# The tensor's shape or strides as an NTuple (read from the tensor, valid while it lives).
tensor_dims(::Val{0}, t::Tensor, values::Ptr{Int64}) = ()
tensor_dims(::Val{N}, t::Tensor, values::Ptr{Int64}) where {N} =
    GC.@preserve t unsafe_load(Ptr{NTuple{N,Int64}}(values))

# Element 0's address, checked to be aligned for `T` (Julia loads assume it).
function element_pointer(::Type{T}, t::Tensor) where {T}
    data = t.desc.data
    UInt(data) % Base.datatype_alignment(T) == 0 ||
        throw(ArgumentError("element 0 of the tensor is at $data, which is not aligned for $T " *
                            "($(Base.datatype_alignment(T)) bytes); wrap(copy(t)) copies it"))
    return Ptr{T}(data)
end

# Frees one tensor handle: the finalizer of an array from `wrap`. It captures a bare handle,
# never a `Tensor`, so no finalizer depends on another object that has a finalizer of its own.
struct HandleRelease
    handle::Ptr{Cvoid}
end
(release::HandleRelease)(_) = dlb_tensor_free(release.handle)

# Gives the array `A` over `t`'s memory a reference to the tensor of its own.
function hold_reference!(A::Array, t::Tensor)
    clone = Ref{Ptr{Cvoid}}(C_NULL)
    GC.@preserve t check(dlb_tensor_clone(live_handle(t), clone))
    finalizer(HandleRelease(clone[]), A)
    return nothing
end

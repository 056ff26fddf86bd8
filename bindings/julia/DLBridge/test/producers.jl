# A hand-built DLPack producer for the tests: any shape, strides, byte offset, dtype, version and
# flags, in one malloc'd block, with a counted deleter. Values are written and read through the
# producer's own indexing (element 0 + sum of index * stride), independent of DLBridge.

# Mirrors of dlpack.h 1.3's structs.
struct DLTensorC
    data::Ptr{Cvoid}
    device_type::Int32
    device_id::Int32
    ndim::Int32
    code::UInt8
    bits::UInt8
    lanes::UInt16
    shape::Ptr{Int64}
    strides::Ptr{Int64}
    byte_offset::UInt64
end

struct DLManagedTensorVersionedC
    major::UInt32
    minor::UInt32
    manager_ctx::Ptr{Cvoid}
    deleter::Ptr{Cvoid}
    flags::UInt64
    dl_tensor::DLTensorC
end

struct DLManagedTensorC
    dl_tensor::DLTensorC
    manager_ctx::Ptr{Cvoid}
    deleter::Ptr{Cvoid}
end

@assert sizeof(DLTensorC) == 48 && sizeof(DLManagedTensorVersionedC) == 80
@assert fieldoffset(DLManagedTensorVersionedC, 4) == 16  # deleter

# Producers made minus deleters run, and deleters run in all.
const LIVE_PRODUCERS = Ref(0)
const DELETIONS = Ref(0)

# The deleter of every fake producer (versioned or legacy): the whole tensor is one block.
function delete_fake(managed::Ptr{Cvoid})
    Libc.free(managed)
    LIVE_PRODUCERS[] -= 1
    DELETIONS[] += 1
    return nothing
end
const FAKE_DELETER = Ref{Ptr{Cvoid}}(C_NULL)
FAKE_DELETER[] = @cfunction(delete_fake, Cvoid, (Ptr{Cvoid},))

"A fake producer's tensor: the managed pointer, and what the producer knows about it."
struct Produced{T,N,P}
    managed::Ptr{P}
    element0::Ptr{T}
    shape::NTuple{N,Int}
    strides::NTuple{N,Int}
end

# The producer's own indexing: element at the 0-based index `I`.
element_address(p::Produced{T,N}, I::NTuple{N,Int}) where {T,N} =
    p.element0 + total(ntuple(d -> I[d] * p.strides[d], Val(N))) * sizeof(T)

total(xs) = reduce(+, xs; init = 0)  # Julia 1.5's sum has no `init`
producer_get(p::Produced{T,N}, I::NTuple{N,Int}) where {T,N} = unsafe_load(element_address(p, I))
producer_set!(p::Produced{T,N}, I::NTuple{N,Int}, v) where {T,N} =
    unsafe_store!(element_address(p, I), convert(T, v))

# The producer's value for row-major position `k` (distinct for small k, exact in every type).
sample(::Type{Bool}, k) = isodd(k)
sample(::Type{T}, k) where {T<:Integer} = T(k % 100)
sample(::Type{T}, k) where {T<:AbstractFloat} = T(k % 200 + 0.5)
sample(::Type{DLBridge.BFloat16}, k) = DLBridge.BFloat16(Float32(k % 200 + 0.5))
sample(::Type{Complex{T}}, k) where {T} = Complex{T}(k % 200 + 0.5, -(k % 100))

# A Julia array of `dims` holding the samples in column-major order.
samples(::Type{T}, dims...) where {T} = reshape([sample(T, k) for k in 0:prod(dims)-1], dims)

# All 0-based indices of `shape`, in row-major order.
indices0(shape::NTuple{N,Int}) where {N} =
    (reverse(Tuple(I)) .- 1 for I in CartesianIndices(reverse(shape)))

"""
    make_producer(T, shape, strides; kw...) -> Produced

A managed tensor of element type `T` (or of `dtype = (code, bits, lanes)` bytes of `sizeof(T)`)
with DLPack `shape` and element `strides` (`nothing` sends NULL strides: row-major), filled
with `sample(T, k)` through its own indexing. Keywords: `legacy`, `version = (major, minor)`,
`flags`, `device = (type, id)`, `pad` (spare elements before the lowest one reached),
`byte_offset` (true: element 0 is reached through `byte_offset`; false: through `data`),
`misalign` (bytes added to the offset), `ndim`, `null_data`, `null_shape` (broken tensors).
"""
function make_producer(::Type{T}, shape::NTuple{N,Int}, strides; legacy = false,
                       version = (1, 3), flags = UInt64(0), device = (1, 0), pad = 2,
                       byte_offset = true, misalign = 0, dtype = nothing, ndim = N,
                       null_data = false, null_shape = false) where {T,N}
    steps = strides === nothing ?
        ntuple(d -> reduce(*, shape[d+1:end]; init = 1), Val(N)) : strides
    empty = any(iszero, shape)
    low = empty ? 0 : total(ntuple(d -> min(0, (shape[d] - 1) * steps[d]), Val(N)))
    high = empty ? 0 : total(ntuple(d -> max(0, (shape[d] - 1) * steps[d]), Val(N)))
    header = 128 + 16 * max(N, 1)
    block = Libc.malloc(header + 64 + (pad + high - low + 1) * sizeof(T) + misalign)
    region = Ptr{Cvoid}(UInt(block + header + 63) & ~UInt(63))
    offset = (pad - low) * sizeof(T) + misalign
    data, byte_off = byte_offset ? (region, offset) : (region + offset, 0)
    shape_ptr = Ptr{Int64}(block + 128)
    strides_ptr = shape_ptr + 8 * N
    for d in 1:N
        unsafe_store!(shape_ptr, shape[d], d)
        unsafe_store!(strides_ptr, steps[d], d)
    end
    code, bits, lanes = dtype === nothing ?
        (DLBridge.dl_dtype(T).code, DLBridge.dl_dtype(T).bits, DLBridge.dl_dtype(T).lanes) : dtype
    tensor = DLTensorC(null_data ? C_NULL : data, device[1], device[2], ndim, code, bits, lanes,
                       null_shape ? C_NULL : shape_ptr,
                       strides === nothing ? C_NULL : strides_ptr, byte_off)
    if legacy
        unsafe_store!(Ptr{DLManagedTensorC}(block), DLManagedTensorC(tensor, block, FAKE_DELETER[]))
        P = DLBridge.DLManagedTensor
    else
        unsafe_store!(Ptr{DLManagedTensorVersionedC}(block),
                      DLManagedTensorVersionedC(version..., block, FAKE_DELETER[], flags, tensor))
        P = DLBridge.DLManagedTensorVersioned
    end
    LIVE_PRODUCERS[] += 1
    p = Produced{T,N,P}(Ptr{P}(block), Ptr{T}(region + offset), shape, steps)
    if !empty && misalign == 0
        for (k, I) in enumerate(indices0(shape))
            producer_set!(p, I, sample(T, k - 1))
        end
    end
    return p
end

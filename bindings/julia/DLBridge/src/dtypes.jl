# Element types: the DLPack dtype of each supported Julia eltype, and back.

"""
    DLBridge.BFloat16

A 16-bit brain floating-point number (DLPack dtype `bfloat16`): the top half of a `Float32`'s
bits. It is a bit type for exchanging data: it converts from `Float32`, `Float64`, `Float16` and
integers with one rounding to nearest even (other `Real`s go through `Float64`), and to
`Float32` exactly; it compares (`==`, `<`, `isless`, so `sort` works), hashes and promotes as
that `Float32` (to `Float64` beside a `Float64`); it has no arithmetic of its own.
`reinterpret` converts arrays of it to and from other 16-bit types (BFloat16s.jl's, say)
without copying.

```julia
julia> x = DLBridge.BFloat16(1.5f0); (Float32(x), x + 1, x < 2, hash(x) == hash(1.5))
(1.5f0, 2.5f0, true, true)
```
"""
primitive type BFloat16 <: AbstractFloat 16 end

bfloat16_bits(bits::UInt16) = reinterpret(BFloat16, bits)
quiet_nan(negative::Bool) = bfloat16_bits(0x7fc0 | UInt16(negative) << 15)

function BFloat16(x::Float32)
    isnan(x) && return quiet_nan(signbit(x))
    bits = reinterpret(UInt32, x)
    rounding = 0x00007fff + ((bits >> 16) & 0x00000001)
    return bfloat16_bits(UInt16((bits + rounding) >> 16))
end

# One rounding, to nearest even, straight from the Float64 value (through Float32 would round
# twice: 1 + 2^-8 + 2^-40 would become the tie 1 + 2^-8, then 1.0).
function BFloat16(x::Float64)
    isnan(x) && return quiet_nan(signbit(x))
    sign = UInt16(signbit(x)) << 15
    a = abs(x)
    (iszero(a) || isinf(a)) && return bfloat16_bits(sign | (a == 0 ? 0x0000 : 0x7f80))
    # The spacing of BFloat16 values around `a`: 8 significant bits, subnormal below 2^-126.
    spacing = ldexp(1.0, max(exponent(a), -126) - 7)
    # Exact in Float64: the division and product only move the exponent, and round() is to
    # nearest with ties to even on an integer below 2^9.
    rounded = round(a / spacing) * spacing
    rounded >= 0x1p128 && return bfloat16_bits(sign | 0x7f80)
    # `rounded` has at most 8 significant bits, so Float32 holds it exactly.
    return bfloat16_bits(sign | UInt16(reinterpret(UInt32, Float32(rounded)) >> 16))
end

BFloat16(x::BFloat16) = x
BFloat16(x::Float16) = BFloat16(Float32(x))
# Integers up to 2^53 are exact in Float64; larger ones are rounded to 8 significant bits once.
BFloat16(x::Integer) = abs(x) <= 2^53 ? BFloat16(Float64(x)) :
    BFloat16(Float64(setprecision(() -> BigFloat(x), BigFloat, 8)))
BFloat16(x::Real) = BFloat16(Float64(x))
Base.Float32(x::BFloat16) = reinterpret(Float32, UInt32(reinterpret(UInt16, x)) << 16)
Base.Float64(x::BFloat16) = Float64(Float32(x))
Base.promote_rule(::Type{BFloat16}, ::Type{<:Union{Integer,Float16,Float32}}) = Float32
Base.promote_rule(::Type{BFloat16}, ::Type{Float64}) = Float64
Base.:(==)(x::BFloat16, y::BFloat16) = Float32(x) == Float32(y)
Base.:<(x::BFloat16, y::BFloat16) = Float32(x) < Float32(y)
Base.:<=(x::BFloat16, y::BFloat16) = Float32(x) <= Float32(y)
Base.isequal(x::BFloat16, y::BFloat16) = isequal(Float32(x), Float32(y))
Base.isless(x::BFloat16, y::BFloat16) = isless(Float32(x), Float32(y))
# Equal numbers hash alike whatever their type (hash(BFloat16(1.5)) == hash(1.5)).
Base.hash(x::BFloat16, h::UInt) = hash(Float32(x), h)
Base.isnan(x::BFloat16) = isnan(Float32(x))
Base.isinf(x::BFloat16) = isinf(Float32(x))
Base.isfinite(x::BFloat16) = isfinite(Float32(x))
Base.signbit(x::BFloat16) = signbit(Float32(x))
Base.show(io::IO, x::BFloat16) = print(io, "BFloat16(", Float32(x), ")")

# DLDataTypeCode values of include/dlbridge.h's dlb_dtype.code.
const CODE_INT = 0x00
const CODE_UINT = 0x01
const CODE_FLOAT = 0x02
const CODE_BFLOAT = 0x04
const CODE_COMPLEX = 0x05
const CODE_BOOL = 0x06

"""
    DLBridge.SupportedEltype

The element types `wrap` and `share` support, each with one DLPack dtype: `Bool` (bool),
`Int8`–`Int64` (int), `UInt8`–`UInt64` (uint), `Float16`, `Float32`, `Float64` (float),
[`DLBridge.BFloat16`](@ref) (bfloat16), `ComplexF32` (complex64) and `ComplexF64` (complex128).
"""
const SupportedEltype = Union{Bool,Int8,Int16,Int32,Int64,UInt8,UInt16,UInt32,UInt64,
                              Float16,Float32,Float64,BFloat16,ComplexF32,ComplexF64}

const SUPPORTED_ELTYPES = (Bool, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64,
                           Float16, Float32, Float64, BFloat16, ComplexF32, ComplexF64)

dtype_code(::Type{Bool}) = CODE_BOOL
dtype_code(::Type{<:Signed}) = CODE_INT
dtype_code(::Type{<:Unsigned}) = CODE_UINT
dtype_code(::Type{<:Base.IEEEFloat}) = CODE_FLOAT
dtype_code(::Type{BFloat16}) = CODE_BFLOAT
dtype_code(::Type{<:Complex}) = CODE_COMPLEX

"""
    DLBridge.dl_dtype(T) -> DLBridge.CDtype

The DLPack dtype of the element type `T` (one of [`DLBridge.SupportedEltype`](@ref)); an
`ArgumentError` naming `T` for any other type.
"""
function dl_dtype(::Type{T}) where {T<:SupportedEltype}
    isconcretetype(T) || unsupported_eltype(T)
    return CDtype(dtype_code(T), UInt8(8 * sizeof(T)), 0x0001)
end
dl_dtype(::Type{T}) where {T} = unsupported_eltype(T)

@noinline unsupported_eltype(T) =
    throw(ArgumentError("unsupported element type $T: DLBridge exchanges " *
                        join(SUPPORTED_ELTYPES, ", ")))

# A dtype as one integer (its C layout read as little-endian uint32): a Dict key whose hash does
# not depend on the session, so the table below survives precompilation.
dtype_key(d::CDtype) = UInt32(d.code) | UInt32(d.bits) << 8 | UInt32(d.lanes) << 16

# The Julia type of each supported dtype.
const ELTYPES = Dict{UInt32,DataType}(dtype_key(dl_dtype(T)) => T for T in SUPPORTED_ELTYPES)

"""
    DLBridge.dtype_name(d::DLBridge.CDtype) -> String

The numpy-style name of a DLPack dtype ("float32", "bfloat16", "float8_e4m3fn", ...), as the C
library writes it; `"dtype(code=C, bits=B, lanes=L)"` for one it does not know.
"""
function dtype_name(d::CDtype)
    buf = Vector{UInt8}(undef, 32)  # DLB_DTYPE_NAME_CAPACITY
    dlb_dtype_name(d, buf, length(buf)) == 0 ||
        return "dtype(code=$(d.code), bits=$(d.bits), lanes=$(d.lanes))"
    return GC.@preserve buf unsafe_string(pointer(buf))
end

"""
    DLBridge.julia_eltype(d::DLBridge.CDtype) -> DataType

The Julia element type of a DLPack dtype; an `ArgumentError` naming the dtype if DLBridge does
not support it (sub-byte, float8, multi-lane and opaque dtypes, for instance).
"""
function julia_eltype(d::CDtype)
    T = get(ELTYPES, dtype_key(d), nothing)
    T === nothing || return T
    throw(ArgumentError("unsupported dtype $(dtype_name(d)) (code $(d.code), bits $(d.bits), " *
                        "lanes $(d.lanes)): DLBridge wraps " *
                        join((dtype_name(dl_dtype(T)) for T in SUPPORTED_ELTYPES), ", ")))
end

# Exchange with any other DLPack producer or consumer (the Rust core, C, other frontends) as
# managed-tensor pointers, and DLPack.jl's `wrap(o, to_dlpack)` / `share(A, from_dlpack)` pair.

"""
    DLBridge.DLManagedTensorVersioned

Tag type for pointers to DLPack's `DLManagedTensorVersioned` (DLPack >= 1.0): a producer hands
DLBridge a `Ptr{DLBridge.DLManagedTensorVersioned}` (convert a `Ptr{Cvoid}` with
`convert(Ptr{DLBridge.DLManagedTensorVersioned}, p)`). Its fields are not mirrored in Julia; the
C library reads them.
"""
struct DLManagedTensorVersioned end

"""
    DLBridge.DLManagedTensor

Tag type for pointers to DLPack's legacy (pre-1.0) `DLManagedTensor`, as
[`DLBridge.DLManagedTensorVersioned`](@ref) is for versioned ones.
"""
struct DLManagedTensor end

"""
    DLBridge.import_tensor(p::Ptr{DLBridge.DLManagedTensorVersioned}) -> DLBridge.Tensor
    DLBridge.import_tensor(p::Ptr{DLBridge.DLManagedTensor}; readonly = false) -> DLBridge.Tensor

Takes ownership of a producer's managed tensor and validates it (once, in the Rust core) without
copying. The producer's deleter runs exactly once: when the `Tensor`, every array `wrap`ped over
it and every re-export are gone, or before this returns if the tensor is invalid; then an
`ArgumentError` (`DimensionMismatch` for inconsistent strides) names the offending field. A
legacy tensor cannot say it is read-only, so it is imported read-only (numpy's rule for legacy
producers, and every dlbridge frontend's): `readonly = false` is the caller's word that the
producer's memory is writable (torch's `to_dlpack`, say), without which `wrap` refuses it.
A `DLBridge.Tensor` is returned as it is.
"""
function import_tensor(p::Ptr{DLManagedTensorVersioned})
    collect_released()
    return new_tensor(out -> dlb_tensor_import_versioned(Ptr{Cvoid}(p), out))
end

function import_tensor(p::Ptr{DLManagedTensor}; readonly::Bool = true)
    collect_released()
    flags = readonly ? DLB_FLAG_READ_ONLY : UInt64(0)
    return new_tensor(out -> dlb_tensor_import_legacy(Ptr{Cvoid}(p), flags, out))
end

import_tensor(t::Tensor) = t

function import_tensor(x)
    throw(ArgumentError("cannot import a $(typeof(x)): expected a " *
                        "Ptr{DLBridge.DLManagedTensorVersioned}, a Ptr{DLBridge.DLManagedTensor} " *
                        "or a DLBridge.Tensor"))
end

"""
    DLBridge.export_tensor(t::DLBridge.Tensor; legacy = false, readonly = false,
                           unsafe_ignore_readonly = false)

A new DLPack managed tensor sharing `t`'s memory (no copy) for a consumer, who owns it and must
call its deleter exactly once (from any thread); until then it keeps the memory alive on its own.
`t` stays valid.

By default a DLPack 1.3 `Ptr{DLBridge.DLManagedTensorVersioned}`, carrying `t`'s flags (plus
READ_ONLY with `readonly = true`). With `legacy = true` a `Ptr{DLBridge.DLManagedTensor}`: that
struct cannot say "read-only", so a read-only `t` raises an `ArgumentError` unless
`unsafe_ignore_readonly = true`, with which the caller answers for the consumer not writing.
"""
function export_tensor(t::Tensor; legacy::Bool = false, readonly::Bool = false,
                       unsafe_ignore_readonly::Bool = false)
    collect_released()
    handle = live_handle(t)
    out = Ref{Ptr{Cvoid}}(C_NULL)
    if legacy
        readonly && throw(ArgumentError("a legacy DLManagedTensor cannot be flagged read-only"))
        GC.@preserve t check(dlb_tensor_export_legacy(handle, Cint(unsafe_ignore_readonly), out))
        return Ptr{DLManagedTensor}(out[])
    end
    flags = readonly ? DLB_FLAG_READ_ONLY : UInt64(0)
    GC.@preserve t check(dlb_tensor_export_versioned(handle, flags, out))
    return Ptr{DLManagedTensorVersioned}(out[])
end

"""
    DLBridge.wrap(o, to_dlpack; order = :reversed, unsafe_ignore_readonly = false)
    DLBridge.wrap(A::Type, o, to_dlpack; ...)

DLPack.jl's form: `to_dlpack(o)` must return a producer's managed tensor (see
[`DLBridge.import_tensor`](@ref) for the accepted pointer types), whose ownership passes to
DLBridge; the result is `DLBridge.wrap` of it (with the array type `A`, e.g. `Array{Float32,2}`,
for the type-stable variants). A legacy pointer imports read-only, which `wrap` refuses: for a
producer whose memory is writable, `wrap(import_tensor(to_dlpack(o); readonly = false))`.
"""
wrap(o, to_dlpack; kwargs...) = wrap(import_tensor(to_dlpack(o)); kwargs...)
wrap(::Type{A}, o, to_dlpack; kwargs...) where {A<:AbstractArray} =
    wrap(A, import_tensor(to_dlpack(o)); kwargs...)

"""
    DLBridge.share(A, from_dlpack; order = :reversed, readonly = false, legacy = false)

DLPack.jl's form: exports `DLBridge.share(A; order, readonly)` as a managed tensor (versioned,
or legacy with `legacy = true`; see [`DLBridge.export_tensor`](@ref)) and returns
`from_dlpack(p)`. The consumer owns `p` from then on and must call its deleter once; `A` stays
alive until it does. If `from_dlpack` throws without having taken ownership, the export (and
`A`) is never released.
"""
function share(A, from_dlpack; order::Symbol = :reversed, readonly::Bool = false,
               legacy::Bool = false)
    t = share(A; order = order, readonly = readonly)
    p = export_tensor(t; legacy = legacy)
    finalize(t)  # the export holds the memory alone; its deleter releases `A`
    return from_dlpack(p)
end

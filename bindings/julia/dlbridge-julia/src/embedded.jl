# The Julia half of dlbridge-julia, evaluated in `Main` after DLBridge.jl. The host passes
# tensors as DLPack managed-tensor pointers (`Ptr{Cvoid}`), marked by a bit mask, and gets
# arrays back the same way: every layout rule is DLBridge's (`wrap` and `share`).
module DLBridgeEmbedded

import ..DLBridge

# A result the host has no conversion for: only its summary travels back.
struct Unconvertible
    summary::String
end

# A tuple of results, converted element by element.
struct Results
    values::Vector{Any}
end

# A complex number for the host (its parts as Float64).
struct ComplexResult
    re::Float64
    im::Float64
end

# Thrown by `exit(n)` in embedded code: the host, not Julia, ends the process (running its own
# exit handlers, and Julia's through them).
struct HostExit <: Exception
    code::Int32
end
Base.showerror(io::IO, e::HostExit) = print(io, "exit(", e.code, ") called from Julia")
Base.exit(n::Integer) = throw(HostExit(Int32(n)))

# Function names, parsed once. A name (`"scale!"`, `"Base.sum"`) is looked up again on every
# call, so a rebound name or a replaced module is followed; any other expression (`"x -> 2x"`)
# is evaluated once, as evaluating it again would make (and compile) a new function each time.
const PARSED = Dict{String,Any}()
const EVALUATED = Dict{String,Any}()

# A name, or a dotted path of names (`Base.Math.sin`), as its symbols; `nothing` otherwise.
name_path(s::Symbol) = Any[s]
function name_path(e::Expr)
    (e.head === :. && length(e.args) == 2 && e.args[2] isa QuoteNode) || return nothing
    inner = name_path(e.args[1])
    inner === nothing && return nothing
    last = e.args[2].value
    last isa Symbol || return nothing
    return push!(inner, last)
end
name_path(_) = nothing

# The function `name` stands for, now, and whether it was evaluated just now (then it is newer
# than the running call's world, and is called through `invokelatest`).
function resolve(name::String)
    path = get(PARSED, name, missing)
    if path === missing
        found = name_path(Meta.parse(name))
        # A plain name is kept as its symbol, the common case, looked up without the loop.
        path = PARSED[name] = found !== nothing && length(found) == 1 ? found[1] : found
    end
    path isa Symbol && return getglobal_or_throw(Main, path), false
    path === nothing || return lookup(Main, path::Vector{Any}, 1), false
    f = get(EVALUATED, name, missing)
    f === missing || return f, false
    f = EVALUATED[name] = Core.eval(Main, Meta.parse(name))
    return f, true
end

# `path[i:end]` looked up from `value`.
function lookup(value, path::Vector{Any}, i::Int)
    i > length(path) && return value
    s = path[i]::Symbol
    next = value isa Module ? getglobal_or_throw(value, s) : getproperty(value, s)
    return lookup(next, path, i + 1)
end
getglobal_or_throw(m::Module, s::Symbol) =
    isdefined(m, s) ? getfield(m, s) : throw(UndefVarError(s))

# Foreign bytes lent to Julia by calls since the last collection: Julia's GC does not count
# memory it does not own, so a loop of calls on fresh large arrays would otherwise keep them all
# until an unrelated collection. A call that brings them to `LENT_LIMIT` bytes or more is followed,
# before it returns to the host, by a young-generation collection, which releases every argument
# nothing in Julia holds any more: an argument of `LENT_LIMIT` bytes or more is released at once
# (its producer's deleter has run when the call returns) unless the result or Julia's state
# keeps it; the GC, not a guess, decides what is still held. A young collection costs about
# 0.3 ms, small against lending 4 MiB, and large against a call on a small array (a few µs).
# Memory lent again while an earlier argument over it is still alive lends nothing new (see
# `LIVE_ARGUMENTS`): calls on the same arrays never collect.
const LENT = Ref(0)
const LENT_LIMIT = 4 * 2^20

lend!(x::AbstractArray) = (LENT[] += length(x) * sizeof(eltype(x)); x)

function collect_lent()
    LENT[] >= LENT_LIMIT || return nothing
    LENT[] = 0
    GC.gc(false)
    filter!(entry -> !entry.second.finalized && entry.second.array.value !== nothing,
            LIVE_ARGUMENTS)
    return nothing
end

# Runs the finalizers that a collection queued but could not run yet (it ran while finalizers
# were inhibited): afterwards, an object whose finalizer has not run was not found unreachable.
function run_pending_finalizers()
    ptls = Core.getptls()
    ccall(:jl_gc_enable_finalizers, Cvoid, (Ptr{Cvoid}, Int32), ptls, 0)
    ccall(:jl_gc_enable_finalizers, Cvoid, (Ptr{Cvoid}, Int32), ptls, 1)
    return nothing
end

# A plain array given to an earlier call, held weakly, and whether its finalizer has run. A weak
# reference still returns an array that a collection found unreachable and queued for
# finalization; once pending finalizers have run, one whose finalizer has not is alive.
mutable struct LiveArgument
    array::WeakRef
    finalized::Bool
end

# Plain arrays given to earlier calls, by the memory they view: a later argument over the same
# memory, with the same shape, strides, element type and flags, is the same array while it is
# alive. That array's own reference keeps the memory alive (so the new tensor's reference is
# dropped at once), and reusing it adds no foreign memory for the GC to find: O(1) calls on the
# same large array. An array whose memory moved is never reused.
const LIVE_ARGUMENTS = Dict{Tuple{Ptr{Cvoid},Tuple,Tuple,DLBridge.CDtype,UInt64},LiveArgument}()

argument_key(t::DLBridge.Tensor) = (t.desc.data, size(t), strides(t), t.desc.dtype, t.desc.flags)

function live_argument(key)
    entry = get(LIVE_ARGUMENTS, key, nothing)
    entry === nothing && return nothing
    run_pending_finalizers()
    entry.finalized && return nothing
    x = entry.array.value
    x isa Array && pointer(x) == key[1] && size(x) == reverse(key[2]) && return x
    return nothing
end

# Remembers `x`, a plain argument over the memory `key` describes, until its finalizer runs.
function remember_argument!(key, x::Array)
    entry = LiveArgument(WeakRef(x), false)
    finalizer(_ -> (entry.finalized = true; nothing), x)
    LIVE_ARGUMENTS[key] = entry
    return nothing
end

# An array handed to the host cannot be resized or reallocated by Julia while the host may
# read it (`push!` would free the memory under the host's tensor): the array whose memory it
# is gets Julia's shared-data flag, which makes resizing throw "cannot resize array with shared
# data". The flag stays set for the array's life.
function forbid_resize!(x::AbstractArray)
    p = parent(x)
    p === x || return forbid_resize!(p)
    x isa Vector || return nothing
    flags = Ptr{UInt16}(pointer_from_objref(x)) + 2 * sizeof(Ptr{Cvoid})
    GC.@preserve x unsafe_store!(flags, unsafe_load(flags) | 0x4000)
    return nothing
end
forbid_resize!(x) = nothing

# Drops a tensor's reference now, as its finalizer would (which then finds nothing to drop).
# `finalize(t)` would do the same, but it searches every registered finalizer: O(live objects).
drop_reference(t::DLBridge.Tensor) = DLBridge.release_handle!(t)

# A tensor as the function sees it. Plain arguments always have their dimensions reversed
# (`x[k, j, i] == T[i, j, k]`, `size(x) == reverse(size(T))`): an `Array` for row-major data, a
# `PermutedDimsArray` over DLBridge's column-major `Array` for column-major data, a
# `StridedView` for other strides. `permuted` arguments have the tensor's own order.
function argument(t::DLBridge.Tensor, permuted::Bool)
    permuted && return lend!(DLBridge.wrap(t; order = :permuted))
    plain = t.layout isa DLBridge.RowMajor
    key = plain ? argument_key(t) : nothing
    if plain
        x = live_argument(key)
        x === nothing || return x
    end
    x = DLBridge.wrap(t)
    if t.layout isa DLBridge.ColumnMajor && ndims(x) > 1
        x = PermutedDimsArray(x, ntuple(i -> ndims(x) + 1 - i, ndims(x)))
    end
    plain && x isa Array && remember_argument!(key, x)
    return lend!(x)
end

# Owns the managed tensors of a call's arguments: bit `i - 1` of `mask` marks `args[i]` as a
# `Ptr{Cvoid}` to a DLManagedTensorVersioned whose ownership passes to DLBridge here. Every
# marked pointer is imported (so its deleter runs exactly once) before the first error is thrown.
function import_arguments(mask::UInt64, permuted::UInt64, args::Vector{Any})
    tensors = Vector{Any}(nothing, length(args))
    failure = nothing
    for i in eachindex(args)
        (mask >> (i - 1)) & 1 == 1 || continue
        p = Ptr{DLBridge.DLManagedTensorVersioned}(args[i]::Ptr{Cvoid})
        try
            tensors[i] = DLBridge.import_tensor(p)
        catch e
            failure === nothing && (failure = e)
        end
    end
    converted = copy(args)
    if failure === nothing
        for i in eachindex(args)
            tensors[i] === nothing && continue
            try
                converted[i] = argument(tensors[i], (permuted >> (i - 1)) & 1 == 1)
            catch e
                failure = e
                break
            end
        end
    end
    # The arrays hold their own references: each tensor's is dropped now, so a producer's deleter
    # runs once its array is unreachable (or at once, after a failure).
    foreach(t -> t === nothing || drop_reference(t), tensors)
    failure === nothing || throw(failure)
    return converted
end

# A result for the host: arrays as exported managed tensors (`Ptr{Cvoid}`, owned by the host),
# numbers, strings and `nothing` as they are, tuples as `Results`, anything else `Unconvertible`.
# `order` is the arrays' orientation: `:reversed` (a Julia m×n array is an n×m tensor, the
# inverse of how plain arguments arrive) or `:same` (for calls on `permuted` arguments).
function to_host(x::AbstractArray, order::Symbol = :reversed)
    forbid_resize!(x)
    t = DLBridge.share(x; order = order)
    p = DLBridge.export_tensor(t)
    drop_reference(t)  # the export alone keeps `x` alive now
    return Ptr{Cvoid}(p)
end
to_host(x::Union{Float64,Int64,UInt64,Bool,String,Nothing}, _ = :reversed) = x
to_host(x::Union{Float16,Float32}, _ = :reversed) = Float64(x)
to_host(x::Union{Int8,Int16,Int32,UInt8,UInt16,UInt32}, _ = :reversed) = Int64(x)
to_host(x::Complex{<:Union{Float16,Float32,Float64}}, _ = :reversed) =
    ComplexResult(real(x), imag(x))
to_host(x::AbstractString, _ = :reversed) = String(x)
function to_host(x::Tuple, order::Symbol = :reversed)
    values = Any[]
    try
        foreach(v -> push!(values, to_host(v, order)), x)
    catch
        release_exports(values)
        rethrow()
    end
    return Results(values)
end
to_host(x, _ = :reversed) = Unconvertible(summary(x))

# Releases the managed tensors among `values` (a tuple result that failed half-way).
function release_exports(values)
    for v in values
        v isa Ptr{Cvoid} && drop_reference(DLBridge.import_tensor(Ptr{DLBridge.DLManagedTensorVersioned}(v)))
        v isa Results && release_exports(v.values)
    end
end

# Calls `name` with the arguments; results are oriented as the arguments were (`permuted`
# arguments: `:same`, else `:reversed`). The host never mixes both kinds in one call. The
# argument arrays live only in the frame of `call_arguments`, which has returned when
# `collect_lent` runs: nothing in this frame keeps them alive.
function call(name::String, mask::UInt64, permuted::UInt64, args...)
    result = call_arguments(name, mask, permuted, Any[args...])
    collect_lent()  # after a failure, the next call's collection counts this call's bytes
    return result
end

@noinline function call_arguments(name::String, mask::UInt64, permuted::UInt64, args::Vector{Any})
    converted = import_arguments(mask, permuted, args)
    return apply(name, permuted == 0 ? :reversed : :same, converted...)
end

# One tensor argument, the common case: imported and wrapped without the argument vectors.
function call(name::String, mask::UInt64, permuted::UInt64, p::Ptr{Cvoid})
    mask == 1 ||
        return invoke(call, Tuple{String,UInt64,UInt64,Vararg{Any}}, name, mask, permuted, p)
    result = call_tensor(name, permuted, p)
    collect_lent()
    return result
end

@noinline function call_tensor(name::String, permuted::UInt64, p::Ptr{Cvoid})
    t = DLBridge.import_tensor(Ptr{DLBridge.DLManagedTensorVersioned}(p))
    x = try
        argument(t, permuted != 0)
    finally
        drop_reference(t)  # the array holds its own reference (or, after a failure, nothing does)
    end
    return apply(name, permuted == 0 ? :reversed : :same, x)
end

# Calls the function `name` with the converted arguments; its result for the host. Each call
# from the host starts in the newest world, so only a function evaluated by this very call's
# lookup needs `invokelatest`.
function apply(name::String, order::Symbol, args...)
    f, fresh = resolve(name)
    return to_host(fresh ? Base.invokelatest(f, args...) : f(args...), order)
end

# Evaluates `code` like a file of top-level expressions; an exception is thrown as itself, not
# wrapped in the `LoadError` that `include_string` adds.
function eval_code(code::String)
    value = try
        include_string(Main, code, "dlbridge-julia")
    catch e
        e isa LoadError ? throw(e.error) : rethrow()
    end
    return to_host(value)
end

# The text of an exception as Julia's REPL shows it (without the stack trace).
message(e) = sprint(showerror, e)

end # module

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

# Functions by name, parsed and evaluated in `Main` once (`"scale!"`, `"Base.sum"`, `"x -> 2x"`).
const FUNCTIONS = Dict{String,Any}()

# Drops a tensor's reference now, as its finalizer would (which then finds nothing to drop).
# `finalize(t)` would do the same, but it searches every registered finalizer: O(live objects).
drop_reference(t::DLBridge.Tensor) = DLBridge.release_handle!(t)

# The `order` of `DLBridge.wrap` for argument `i`: bit `i - 1` of `permuted` asks for the
# tensor's own dimension order (a PermutedDimsArray), else dims are reversed (an Array).
order(permuted::UInt64, i) = (permuted >> (i - 1)) & 1 == 1 ? :permuted : :reversed

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
                converted[i] = DLBridge.wrap(tensors[i]; order = order(permuted, i))
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
function to_host(x::AbstractArray)
    t = DLBridge.share(x)
    p = DLBridge.export_tensor(t)
    drop_reference(t)  # the export alone keeps `x` alive now
    return Ptr{Cvoid}(p)
end
to_host(x::Union{Float64,Int64,Bool,String,Nothing}) = x
to_host(x::Union{Float16,Float32}) = Float64(x)
to_host(x::Union{Int8,Int16,Int32,UInt8,UInt16,UInt32}) = Int64(x)
to_host(x::AbstractString) = String(x)
function to_host(x::Tuple)
    values = Any[]
    try
        foreach(v -> push!(values, to_host(v)), x)
    catch
        release_exports(values)
        rethrow()
    end
    return Results(values)
end
to_host(x) = Unconvertible(summary(x))

# Releases the managed tensors among `values` (a tuple result that failed half-way).
function release_exports(values)
    for v in values
        v isa Ptr{Cvoid} && drop_reference(DLBridge.import_tensor(Ptr{DLBridge.DLManagedTensorVersioned}(v)))
        v isa Results && release_exports(v.values)
    end
end

function call(name::String, mask::UInt64, permuted::UInt64, args...)
    return apply(name, import_arguments(mask, permuted, Any[args...])...)
end

# One tensor argument, the common case: imported and wrapped without the argument vectors.
function call(name::String, mask::UInt64, permuted::UInt64, p::Ptr{Cvoid})
    mask == 1 || return apply(name, import_arguments(mask, permuted, Any[p])...)
    t = DLBridge.import_tensor(Ptr{DLBridge.DLManagedTensorVersioned}(p))
    x = try
        permuted == 0 ? DLBridge.wrap(t) : DLBridge.wrap(t; order = :permuted)
    finally
        drop_reference(t)  # the array holds its own reference (or, after a failure, nothing does)
    end
    return apply(name, x)
end

# Calls the function `name` with the converted arguments; its result for the host.
function apply(name::String, args...)
    f = get(FUNCTIONS, name, nothing)
    f === nothing || return to_host(f(args...))
    # A function defined just now is newer than this call's world.
    f = FUNCTIONS[name] = Core.eval(Main, Meta.parse(name))
    return to_host(Base.invokelatest(f, args...))
end

eval_code(code::String) = to_host(include_string(Main, code, "dlbridge-julia"))

# The text of an exception as Julia's REPL shows it (without the stack trace).
message(e) = sprint(showerror, e)

end # module

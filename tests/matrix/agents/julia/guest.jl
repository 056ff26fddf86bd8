# The Julia guest of the matrix's in-process mode (tests/matrix/PROTOCOL.md, "In-process pairs"):
# a host that embeds Julia (Python through `dlbridge.julia`, Rust through dlbridge-julia) includes
# this file into the Julia it started, after that Julia loaded DLBridge.jl into `Main`, and calls
# the functions of `MatrixGuest` by name. They are the guest ABI of tests/matrix/agents/c/guest.h
# in Julia: managed tensors and element-0 addresses travel as `Int`s, each call returns its reply
# line (`ok ...`, `fail ...`, `unsupported ...`) and never throws. The case code (producers,
# checks, release counting) is the Julia agent's own (agent.jl, included without its request loop).
module MatrixGuest

import ..DLBridge
include("agent.jl")

# The producer's side of a case, from `produce` to `check_released`.
mutable struct ProducedCase
    producer::Any                         # the array shared (kept until `check_released`)
    reversed::Bool
    readonly::Bool
    managed::Ptr{DLBridge.DLManagedTensorVersioned}  # the export, owned by the host once taken
    element0::Ptr{Cvoid}
    baseline::Int
    freed_before::Int
end

const PRODUCED = Ref{Union{ProducedCase,Nothing}}(nothing)
# The consumer's import, from `consume` to `drop`.
const IMPORTED = Ref{Union{DLBridge.Tensor,Nothing}}(nothing)

# Runs `f(T)` for the case's element type; its result (a payload) or failure is the reply line.
function reply(f, dtype::String, layout::String)
    T = case_type(dtype, layout)
    T isa String && return T
    return reply(() -> f(T))
end
function reply(f)
    try
        return "ok " * f()
    catch e
        LEFTOVERS[] = true
        e isa CheckFailure && return "fail " * e.message
        e isa Unsupported && return "unsupported " * e.message
        println(stderr, "julia guest: ", sprint(showerror, e, catch_backtrace()))
        return "fail exception " * sprint(showerror, e)
    end
end

"""Builds the case tensor in a Julia array and exports it (`DLBridge.share` + `export_tensor`)."""
produce(dtype::String, layout::String) = reply(dtype, layout) do T
    PRODUCED[] === nothing || fail("produce while the last produced case is still open")
    drain_leftovers()
    baseline = DLBridge.shared_count()
    freed_before = PRODUCER_FREED[]
    with_producer(T, layout) do P, reversed, readonly, shape, steps
        t = DLBridge.share(P; order = reversed ? :reversed : :same, readonly = readonly)
        try
            check_shared(t, readonly, shape, steps)
            p = DLBridge.export_tensor(t)  # the export alone keeps P's memory once t is dropped
            element0 = length(P) > 0 ? Ptr{Cvoid}(pointer(P)) : C_NULL
            PRODUCED[] = ProducedCase(P, reversed, readonly, p, element0, baseline, freed_before)
        finally
            finalize(t)
        end
    end
    return "produced"
end

"""The export of the last `produce` (a `DLManagedTensorVersioned*`); the host owns it now."""
function produced()
    case = PRODUCED[]
    case === nothing && return 0
    p = case.managed
    case.managed = C_NULL
    return Int(p)
end

"""The producer's element 0 of the last `produce` (0 when the case has no elements)."""
produced_element0() = PRODUCED[] === nothing ? 0 : Int(PRODUCED[].element0)

"""While the host's import lives: element 0 reads the sentinel, nothing was released."""
check_written() = reply() do
    case = PRODUCED[]
    case === nothing && fail("check_written without a produced case")
    written(case.producer, case.reversed, case.readonly)
    early = DLBridge.collect_released()
    early == 0 || fail("producer memory released $early times while the host's import lives")
    return "written"
end

function written(P::AbstractArray{T,N}, reversed::Bool, readonly::Bool) where {T,N}
    (length(P) == 0 || readonly) && return nothing
    want = sentinel(T, expected_value(T, 0))
    seen = P[producer_index(reversed, ntuple(_ -> 1, Val(N)))...]
    same_value(seen, want) ||
        fail("the host wrote the sentinel $(show_value(want)) to element 0 through its import, " *
             "the producer reads $(show_value(seen))")
    return nothing
end

"""After the host dropped its import: the producer's memory is released exactly once."""
check_released() = reply() do
    case = PRODUCED[]
    case === nothing && fail("check_released without a produced case")
    PRODUCED[] = nothing  # the producer drops its array: only the export could keep it now
    if case.managed != C_NULL  # never taken by the host: release it here
        finalize(DLBridge.import_tensor(case.managed))
    end
    check_released(case.baseline, case.freed_before)
    return "released"
end

"""Imports the host's export `managed` (`DLBridge.import_tensor`), checks it against the case
(element 0 at `element0`), writes the sentinel and keeps the import until `drop`."""
function consume(dtype::String, layout::String, managed::Int, element0::Int)
    # Imported first, whatever the case: the host's export is Julia's to release from here.
    imported = reply() do
        IMPORTED[] === nothing || fail("consume while the last import is still held")
        drain_leftovers()
        IMPORTED[] = DLBridge.import_tensor(Ptr{DLBridge.DLManagedTensorVersioned}(managed))
        return "imported"
    end
    startswith(imported, "ok") || return imported
    return reply(dtype, layout) do T
        check_consumed(T, IMPORTED[], layout, element0)
    end
end

# Checks the import (kept for `drop`, also after a failed check) and writes the sentinel.
function check_consumed(::Type{T}, ti::DLBridge.Tensor, layout::String, element0::Int) where {T}
    shape = layout == "zero_d" ? () : layout == "empty" ? (0, 3) : (3, 4)
    n = check_guest_import(T, ti, Ptr{Cvoid}(element0), layout == "readonly", shape, "the host")
    return "$n zero-copy"
end

"""Drops the import of the last `consume`: the host's deleter runs (the arrays over the import
are collected here)."""
drop() = reply() do
    ti = IMPORTED[]
    ti === nothing && fail("drop without an import")
    IMPORTED[] = nothing
    finalize(ti)
    drop_views()
    return "dropped"
end

end # module

# The Julia agent of the cross-language matrix (tests/matrix/PROTOCOL.md): reads one request per
# line from stdin, answers one line on stdout (`ok ...`, `fail ...`, `unsupported ...`). Anything
# else (diagnostics, backtraces) goes to stderr. Never exits on a failed case; `quit` or EOF ends it.
#
# `host GUEST out|in DTYPE LAYOUT` (in-process pairs) loads the guest library named by
# DLBRIDGE_MATRIX_GUEST_<GUEST> (tests/matrix/agents/c/guest.h) with Libdl and `ccall`s it: `out`
# hands `export_tensor` of a shared Julia array to the guest, `in` imports the guest's export
# with `import_tensor`.
#
# Launched from the repository root with DLBRIDGE_LIB set:
#   julia --startup-file=no --project=bindings/julia/DLBridge tests/matrix/agents/julia/agent.jl
#
# Julia is column-major, so each case's row-major DLPack layout comes from the matching Julia array
# (see `with_producer`). Code that touches elements is specialised per element type and array type
# behind function barriers (no small Unions of array types: Julia 1.5's LLVM can abort on them for
# ComplexF32).

# An embedding host's guest (guest.jl) includes this file into a module that already imported the
# DLBridge its host loaded: that one is used, not a second copy.
isdefined(@__MODULE__, :DLBridge) || using DLBridge
using Libdl

const DTYPES = Dict{String,DataType}(
    "bool" => Bool,
    "int8" => Int8, "int16" => Int16, "int32" => Int32, "int64" => Int64,
    "uint8" => UInt8, "uint16" => UInt16, "uint32" => UInt32, "uint64" => UInt64,
    "float16" => Float16, "bfloat16" => DLBridge.BFloat16, "float32" => Float32,
    "float64" => Float64, "complex64" => ComplexF32, "complex128" => ComplexF64,
)
const LAYOUTS = ("c", "f", "strided", "negative", "zero_d", "empty", "readonly")

"""A failed check: becomes `fail MESSAGE`."""
struct CheckFailure <: Exception
    message::String
end
fail(message::AbstractString) = throw(CheckFailure(String(message)))

# ---------------------------------------------------------------------------------------------
# Values

# The formula's v for row-major logical index i (0-based).
formula_v(i::Int) = (7 * i + 3) % 61

expected_value(::Type{Bool}, i::Int) = formula_v(i) % 2 == 1
expected_value(::Type{T}, i::Int) where {T<:Signed} = T(formula_v(i) - 30)
expected_value(::Type{T}, i::Int) where {T<:Unsigned} = T(formula_v(i))
expected_value(::Type{T}, i::Int) where {T<:Base.IEEEFloat} = T((formula_v(i) - 30) * 0.5)
expected_value(::Type{DLBridge.BFloat16}, i::Int) =
    DLBridge.BFloat16(Float32((formula_v(i) - 30) * 0.5))
expected_value(::Type{Complex{R}}, i::Int) where {R} =
    Complex{R}(R((formula_v(i) - 30) * 0.5), R((30 - formula_v(i)) * 0.25))

# The sentinel written to element 0 in `self` (element 0 is v = 3).
sentinel(::Type{Bool}, element0::Bool) = !element0
sentinel(::Type{T}, _) where {T<:Integer} = T(42)
sentinel(::Type{T}, _) where {T<:AbstractFloat} = T(42.0)  # also BFloat16
sentinel(::Type{Complex{R}}, _) where {R} = Complex{R}(R(42), R(0))

# Exact comparison (no NaNs occur; 0.0 == -0.0 is fine for the formula).
same_value(a::T, b::T) where {T} = a == b

show_value(x) = string(x)
show_value(x::DLBridge.BFloat16) = string(Float32(x), " (bfloat16)")

# Row-major logical indices (1-based tuples in the tensor's own dimensions), with the 0-based
# linear index: `f(i, L)` for each element.
function foreach_logical(f, shape::NTuple{N,Int}) where {N}
    i = 0
    for I in CartesianIndices(reverse(shape))  # column-major over reversed dims = row-major
        f(i, reverse(Tuple(I)))
        i += 1
    end
    return i
end

# The producer array's index of the logical index L: a tensor shared with `order = :reversed`
# has the array's dimensions reversed, one shared with `order = :same` keeps them.
producer_index(reversed::Bool, L::NTuple{N,Int}) where {N} = reversed ? reverse(L) : L

# Checks every element of the logical-order array S (S[L...] is the tensor's element L) against
# the formula; returns the number checked.
@noinline function check_elements(::Type{T}, S::AbstractArray{T,N}, shape::NTuple{N,Int},
                                  what::String) where {T,N}
    size(S) == shape || fail("$what has size $(size(S)), expected $shape")
    return foreach_logical(shape) do i, L
        got = S[L...]
        want = expected_value(T, i)
        same_value(got, want) ||
            fail("$what element $i (index $(L .- 1)) is $(show_value(got)), " *
                 "expected $(show_value(want))")
    end
end

# ---------------------------------------------------------------------------------------------
# Producers: one Julia array per layout, filled with the formula

# Counts frees of producer arrays (finalizers): memory released exactly once.
const PRODUCER_FREED = Ref(0)
count_free(_) = (PRODUCER_FREED[] += 1; nothing)

# A fresh parent Array whose free is counted.
function counted_array(::Type{T}, dims::Int...) where {T}
    B = Array{T}(undef, dims...)
    finalizer(count_free, B)
    return B
end

# Fills the producer view P so that the tensor shared from it holds the case's values.
function fill_producer!(P::AbstractArray{T,N}, reversed::Bool, shape::NTuple{N,Int}) where {T,N}
    foreach_logical(shape) do i, L
        P[producer_index(reversed, L)...] = expected_value(T, i)
    end
    return P
end

"""
    with_producer(f, T, layout)

Builds the case's producer memory for `layout` in a new Julia array and calls
`f(P, reversed, readonly, shape, strides)`: `P` is the array to share (`order = :reversed` if
`reversed`, else `:same`), `shape` and `strides` the DLPack shape and element strides the shared
tensor must have. Each branch calls `f` with concrete types (one specialisation per layout).
The arrays are unreachable once this returns. Returns what `f` returns.
"""
function with_producer(f, ::Type{T}, layout::String) where {T}
    if layout == "c" || layout == "readonly"
        A = counted_array(T, 4, 3)               # Julia 4×3 = C-contiguous (3, 4)
        fill_producer!(A, true, (3, 4))
        return f(A, true, layout == "readonly", (3, 4), (4, 1))
    elseif layout == "f"
        A = counted_array(T, 3, 4)               # Julia 3×4 shared as is = F-contiguous (3, 4)
        fill_producer!(A, false, (3, 4))
        return f(A, false, false, (3, 4), (1, 3))
    elseif layout == "strided"
        B = counted_array(T, 8, 6)               # Julia 8×6 = C-contiguous (6, 8) buffer
        fill!(B, zero(T))
        V = view(B, 1:2:8, 1:2:6)                # every other row and column: strides (16, 2)
        fill_producer!(V, true, (3, 4))
        return f(V, true, false, (3, 4), (16, 2))
    elseif layout == "negative"
        B = counted_array(T, 4, 3)               # Julia 4×3 = C-contiguous (3, 4) buffer
        V = view(B, 4:-1:1, :)                   # last axis reversed: strides (4, -1), offset 3
        fill_producer!(V, true, (3, 4))
        return f(V, true, false, (3, 4), (4, -1))
    elseif layout == "zero_d"
        A = counted_array(T)                     # 0-d Array: one element
        fill_producer!(A, true, ())
        return f(A, true, false, (), ())
    elseif layout == "empty"
        A = counted_array(T, 3, 0)               # Julia 3×0 = C-contiguous (0, 3)
        return f(A, true, false, (0, 3), (3, 1))
    end
    throw(CheckFailure("unknown layout $layout"))  # callers check the layout first
end

# Checks the shape, strides and flags of the tensor shared from the case's producer array.
function check_shared(t::DLBridge.Tensor, readonly::Bool, shape, steps)
    size(t) == shape || fail("shared tensor has shape $(size(t)), expected $shape")
    strides(t) == steps || fail("shared tensor has strides $(strides(t)), expected $steps")
    DLBridge.isreadonly(t) == readonly ||
        fail("shared tensor read-only flag is $(DLBridge.isreadonly(t)), expected $readonly")
    return nothing
end

# Set when a case fails or throws: it may leave imports and arrays behind for the GC.
const LEFTOVERS = Ref(false)

# Before a case: leftovers of an earlier failed case are collected and their releases drained,
# so that this case's counts are its own. After a passing case there are none (its own checks
# saw everything released), so the two full collections run only after a failure.
function drain_leftovers()
    LEFTOVERS[] || return nothing
    for _ in 1:2  # the first GC may free an import whose release unroots an array: free it too
        GC.gc(true)
        DLBridge.collect_released()
    end
    VIEWS_MADE[] = VIEWS_FREED[] = 0
    LEFTOVERS[] = false
    return nothing
end

# Collects garbage until `drain()` (how many events the collection caused, e.g. releases)
# reports some; returns that count. A young-generation collection first: a case's arrays are
# young, and a full collection costs ~70 ms in Julia 1.5 (it dominated the matrix's time). A full
# one follows when the young one found nothing.
function collect_garbage(drain)
    GC.gc(false)
    n = drain()
    n > 0 && return n
    GC.gc(true)
    return drain()
end

# The arrays over this case's imports (the views' parents, whose finalizers drop the views'
# references to the tensors): how many were made and how many the GC finalized, so that
# `drop_views()` knows when they are gone. (WeakRefs did not do: after the young collection that
# ran their finalizers, most of them still pointed at the arrays.)
const VIEWS_MADE = Ref(0)
const VIEWS_FREED = Ref(0)
count_view_free(_) = (VIEWS_FREED[] += 1; nothing)
function watch!(S::DLBridge.StridedView)
    VIEWS_MADE[] += 1
    finalizer(count_view_free, parent(S))
    return S
end

# Collects the arrays over this case's imports: their references to the tensors drop, and the
# producer's deleter (or the segment's unmapping) follows.
function drop_views()
    collect_garbage(() -> VIEWS_FREED[] == VIEWS_MADE[] ? 1 : 0)
    VIEWS_MADE[] = VIEWS_FREED[] = 0
    return nothing
end

# Before a case that ends in `check_released`: drains an earlier case's leftovers, then returns
# the counts that check compares against (the root count, the producer arrays freed so far).
function release_baseline()
    drain_leftovers()
    return DLBridge.shared_count(), PRODUCER_FREED[]
end

# After the producer dropped everything: the shared array's release arrived exactly once (the
# release queue's token), the root count is back at `baseline`, and the GC freed the producer
# memory exactly once. Two collections: the first frees the arrays over the import (the release
# is queued, and collecting it unroots the producer array), the second frees the producer array
# and would deliver a second release if there were one.
function check_released(baseline::Int, freed_before::Int)
    released = collect_garbage(DLBridge.collect_released)
    released == 1 || fail("producer memory released $released times after the drop, expected 1")
    count = DLBridge.shared_count()
    count == baseline ||
        fail("shared_count is $count after the release, expected the baseline $baseline")
    freed = collect_garbage(() -> PRODUCER_FREED[] - freed_before)
    again = DLBridge.collect_released()
    again == 0 || fail("producer memory released again ($again more) after the first release")
    freed == 1 || fail("producer array finalized $freed times after the release, expected 1")
    return nothing
end

# ---------------------------------------------------------------------------------------------
# self: in-process export, import, zero-copy checks

# The import side of `self`: wraps the imported tensor in the tensor's own (logical) order,
# checks the address of element 0, every element, and writes the sentinel through it.
@noinline function check_import(::Type{T}, ti::DLBridge.Tensor, P::AbstractArray{T,N},
                                reversed::Bool, readonly::Bool, shape::NTuple{N,Int},
                                baseline::Int) where {T,N}
    size(ti) == shape || fail("imported shape $(size(ti)), expected $shape")
    eltype(ti) === T || fail("imported dtype $(DLBridge.dtype(ti)), expected $(T)")
    DLBridge.isreadonly(ti) == readonly ||
        fail("imported read-only flag is $(DLBridge.isreadonly(ti)), expected $readonly")
    # Reading a read-only import in place is safe here: nothing writes through it.
    S = DLBridge.wrap(DLBridge.StridedView{T,N}, ti; order = :permuted,
                      unsafe_ignore_readonly = readonly)
    n = check_elements(T, S, shape, "imported")
    if n > 0
        # Element 0's address: the import's element 0 is the producer's logical element 0.
        imported0 = pointer(S)
        produced0 = pointer(P)
        imported0 == produced0 ||
            fail("imported element 0 is at $imported0, producer's at $produced0 (not zero-copy)")
    else
        # No elements: the import's data pointer is the producer's, or NULL (the core describes
        # a tensor without elements with NULL data, which PROTOCOL.md allows). It is read from
        # the tensor's description, not from `pointer` of an Array over it: Julia 1.5 assumes an
        # Array's data pointer is never NULL and folds `pointer(W) == C_NULL` to false.
        data = ti.desc.data  # dlb_tensor_info's `data` (element 0)
        data == Ptr{Cvoid}(pointer(P)) || data == C_NULL ||
            fail("imported data is at $data, producer's at $(pointer(P)) (not zero-copy)")
    end
    if n > 0 && !readonly
        origin = ntuple(_ -> 1, Val(N))
        value = sentinel(T, S[origin...])
        S[origin...] = value
        seen = P[producer_index(reversed, origin)...]
        same_value(seen, value) ||
            fail("wrote $(show_value(value)) to element 0 through the import, producer reads " *
                 "$(show_value(seen))")
        same_value(S[origin...], value) ||
            fail("element 0 reads $(show_value(S[origin...])) through the import after writing " *
                 "$(show_value(value))")
    end
    # Not released while the import (and the array over it) is alive.
    early = DLBridge.collect_released()
    early == 0 || fail("producer memory released $early times while the import is alive")
    count = DLBridge.shared_count()
    count == baseline + 1 ||
        fail("shared_count is $count while the import is alive, expected $(baseline + 1)")
    return n
end

function self_producer(P::AbstractArray{T,N}, reversed::Bool, readonly::Bool,
                       shape::NTuple{N,Int}, steps::NTuple{N,Int}, baseline::Int) where {T,N}
    t = DLBridge.share(P; order = reversed ? :reversed : :same, readonly = readonly)
    try
        check_shared(t, readonly, shape, steps)
        DLBridge.shared_count() == baseline + 1 ||
            fail("shared_count is $(DLBridge.shared_count()) after share, expected $(baseline + 1)")
        p = DLBridge.export_tensor(t)      # DLManagedTensorVersioned*
        finalize(t)                        # the export alone keeps P's memory now
        ti = DLBridge.import_tensor(p)
        try
            return check_import(T, ti, P, reversed, readonly, shape, baseline)
        finally
            finalize(ti)                   # drop the import (the wrapped view goes with the GC)
        end
    finally
        finalize(t)                        # (a no-op when already finalized)
    end
end

function run_self(::Type{T}, layout::String) where {T}
    baseline, freed_before = release_baseline()
    n = with_producer(T, layout) do P, reversed, readonly, shape, steps
        self_producer(P, reversed, readonly, shape, steps, baseline)
    end
    check_released(baseline, freed_before)
    return "ok $n zero-copy"
end

# ---------------------------------------------------------------------------------------------
# produce: copy into a shared-memory segment, hand it over, drop everything

function produce_producer(P::AbstractArray{T,N}, reversed::Bool, readonly::Bool,
                          shape::NTuple{N,Int}, steps::NTuple{N,Int}) where {T,N}
    t = DLBridge.share(P; order = reversed ? :reversed : :same, readonly = readonly)
    try
        check_shared(t, readonly, shape, steps)
        return DLBridge.to_shared(t)      # the copy; this side keeps no reference to it
    finally
        finalize(t)
    end
end

function run_produce(::Type{T}, layout::String) where {T}
    baseline, freed_before = release_baseline()
    handle = with_producer(produce_producer, T, layout)
    try
        check_released(baseline, freed_before)
        (isempty(handle) || occursin(' ', handle) || occursin('\n', handle)) &&
            fail("to_shared returned an unusable handle $(repr(handle))")
    catch
        discard_segment(handle)  # nobody will open it: release it now
        rethrow()
    end
    return "ok $handle"
end

# Opens and drops a handed-over segment that will never be consumed (its only opener removes it).
function discard_segment(handle::String)
    try
        finalize(DLBridge.from_shared(handle))
    catch e
        println(stderr, "julia agent: could not discard segment $(repr(handle)): ",
                sprint(showerror, e))
    end
    return nothing
end

# ---------------------------------------------------------------------------------------------
# consume: map a segment, check it, drop it

const CASE_SHAPES = Dict("c" => (3, 4), "f" => (3, 4), "strided" => (3, 4),
                         "negative" => (3, 4), "readonly" => (3, 4))

@noinline function check_segment(::Type{T}, t::DLBridge.Tensor, shape::NTuple{N,Int},
                                 readonly::Bool, name::String) where {T,N}
    size(t) == shape || fail("segment shape $(size(t)), expected $shape")
    DLBridge.dtype(t) == name || fail("segment dtype $(DLBridge.dtype(t)), expected $name")
    eltype(t) === T || fail("segment element type $(eltype(t)), expected $T")
    DLBridge.iscopied(t) || fail("segment tensor is not flagged copied")
    DLBridge.isreadonly(t) == readonly ||
        fail("segment read-only flag is $(DLBridge.isreadonly(t)), expected $readonly")
    # A read-only mapping is read through a copy (wrap refuses read-only tensors); writable
    # mappings are read in place.
    source = readonly ? copy(t) : t
    try
        S = watch!(DLBridge.wrap(DLBridge.StridedView{T,N}, source; order = :permuted))
        return check_elements(T, S, shape, "segment")
    finally
        source === t || finalize(source)
    end
end

function consume_open(::Type{T}, layout::String, handle::String, name::String) where {T}
    readonly = layout == "readonly"
    t = DLBridge.from_shared(handle; writable = !readonly)
    try
        if layout == "zero_d"
            return check_segment(T, t, (), readonly, name)
        elseif layout == "empty"
            return check_segment(T, t, (0, 3), readonly, name)
        else
            return check_segment(T, t, CASE_SHAPES[layout], readonly, name)
        end
    finally
        finalize(t)
    end
end

function run_consume(::Type{T}, layout::String, handle::String, name::String) where {T}
    n = consume_open(T, layout, handle, name)
    drop_views()       # the arrays over the mapping go: the segment is unmapped
    DLBridge.collect_released()
    return "ok $n"
end

# ---------------------------------------------------------------------------------------------
# host: a guest library in this process (tests/matrix/agents/c/guest.h)

"""A loaded guest library: its name and the addresses of the guest ABI's functions."""
struct Guest
    name::String
    produce::Ptr{Cvoid}
    produced::Ptr{Cvoid}
    produced_element0::Ptr{Cvoid}
    check_written::Ptr{Cvoid}
    check_released::Ptr{Cvoid}
    consume::Ptr{Cvoid}
    drop::Ptr{Cvoid}
    message::Ptr{Cvoid}
end

"""The case cannot be expressed: becomes `unsupported MESSAGE`."""
struct Unsupported <: Exception
    message::String
end

const GUESTS = Dict{String,Guest}()

function guest_library(name::String)
    haskey(GUESTS, name) && return GUESTS[name]
    variable = "DLBRIDGE_MATRIX_GUEST_" * uppercase(name)
    path = get(ENV, variable, "")
    isempty(path) && throw(Unsupported("no guest library for $name (\$$variable is not set)"))
    lib = Libdl.dlopen(path)
    sym(s) = Libdl.dlsym(lib, Symbol("matrix_guest_", s))
    GUESTS[name] = Guest(name, sym(:produce), sym(:produced), sym(:produced_element0),
                         sym(:check_written), sym(:check_released), sym(:consume), sym(:drop),
                         sym(:message))
    return GUESTS[name]
end

# The guest's reply for `status` (0 ok, 1 fail, 2 unsupported): its payload, or a thrown
# failure naming the guest.
function guest_result(g::Guest, status::Cint)
    message = unsafe_string(ccall(g.message, Cstring, ()))
    word, reason = occursin(' ', message) ? split(message, ' '; limit = 2) : (message, "")
    status == 0 && return String(reason)
    status == 2 && throw(Unsupported("$(g.name): $reason"))
    fail("$(g.name): $reason")
end

# `out`: the shared Julia array's export goes to the guest, which imports, checks and writes.
function host_out_producer(g::Guest, name::String, layout::String, P::AbstractArray{T,N},
                           reversed::Bool, readonly::Bool, shape::NTuple{N,Int},
                           steps::NTuple{N,Int}) where {T,N}
    t = DLBridge.share(P; order = reversed ? :reversed : :same, readonly = readonly)
    try
        check_shared(t, readonly, shape, steps)
        p = DLBridge.export_tensor(t)      # DLManagedTensorVersioned*, taken by the guest
        finalize(t)                        # the export alone keeps P's memory now
        element0 = length(P) > 0 ? Ptr{Cvoid}(pointer(P)) : C_NULL
        answer = guest_result(g, ccall(g.consume, Cint, (Cstring, Cstring, Ptr{Cvoid}, Ptr{Cvoid}),
                                       name, layout, p, element0))
        dropped = Cint(1)
        try
            if length(P) > 0 && !readonly
                origin = ntuple(_ -> 1, Val(N))
                want = sentinel(T, expected_value(T, 0))
                seen = P[producer_index(reversed, origin)...]
                same_value(seen, want) ||
                    fail("$(g.name) wrote the sentinel $(show_value(want)) to element 0 through " *
                         "its import, the producer reads $(show_value(seen))")
            end
            early = DLBridge.collect_released()
            early == 0 || fail("producer memory released $early times while $(g.name)'s import lives")
        finally
            dropped = ccall(g.drop, Cint, ())
        end
        guest_result(g, dropped)
        return answer
    finally
        finalize(t)
    end
end

function run_host_out(g::Guest, ::Type{T}, name::String, layout::String) where {T}
    baseline, freed_before = release_baseline()
    answer = with_producer(T, layout) do P, reversed, readonly, shape, steps
        host_out_producer(g, name, layout, P, reversed, readonly, shape, steps)
    end
    check_released(baseline, freed_before)
    return "ok $answer"
end

# `in`, the import side: wraps the guest's export in its logical order, checks it and writes
# the sentinel. Returns the number of elements.
@noinline function check_guest_import(::Type{T}, ti::DLBridge.Tensor, element0::Ptr{Cvoid},
                                      readonly::Bool, shape::NTuple{N,Int},
                                      from::String) where {T,N}
    size(ti) == shape || fail("import from $from has shape $(size(ti)), expected $shape")
    eltype(ti) === T || fail("import from $from has dtype $(DLBridge.dtype(ti)), expected $T")
    DLBridge.isreadonly(ti) == readonly ||
        fail("import from $from has read-only flag $(DLBridge.isreadonly(ti)), expected $readonly")
    DLBridge.iscopied(ti) && fail("import from $from is flagged copied")
    S = watch!(DLBridge.wrap(DLBridge.StridedView{T,N}, ti; order = :permuted,
                             unsafe_ignore_readonly = readonly))
    n = check_elements(T, S, shape, "import from $from")
    if n > 0
        Ptr{Cvoid}(pointer(S)) == element0 ||
            fail("import element 0 is at $(pointer(S)), $from's at $element0 (not zero-copy)")
        if !readonly
            origin = ntuple(_ -> 1, Val(N))
            S[origin...] = sentinel(T, S[origin...])
        end
    end
    return n
end

function run_host_in(g::Guest, ::Type{T}, name::String, layout::String) where {T}
    drain_leftovers()
    guest_result(g, ccall(g.produce, Cint, (Cstring, Cstring), name, layout))
    n = 0
    released = Cint(1)
    try
        p = ccall(g.produced, Ptr{DLBridge.DLManagedTensorVersioned}, ())
        element0 = ccall(g.produced_element0, Ptr{Cvoid}, ())
        ti = DLBridge.import_tensor(p)
        try
            shape = layout == "zero_d" ? () : layout == "empty" ? (0, 3) : (3, 4)
            n = check_guest_import(T, ti, element0, layout == "readonly", shape, g.name)
            guest_result(g, ccall(g.check_written, Cint, ()))
        finally
            finalize(ti)
        end
        drop_views()  # the array over the import goes: the guest's deleter runs
    finally
        released = ccall(g.check_released, Cint, ())
    end
    guest_result(g, released)
    return "ok $n zero-copy"
end

function run_host(guest::String, direction::String, ::Type{T}, name::String,
                  layout::String) where {T}
    direction in ("out", "in") || fail("unknown direction $(repr(direction)) (expected out or in)")
    g = guest_library(guest)
    return direction == "out" ? run_host_out(g, T, name, layout) : run_host_in(g, T, name, layout)
end

# ---------------------------------------------------------------------------------------------
# The request loop

one_line(s::AbstractString) = replace(strip(s), r"\s*[\r\n]+\s*" => " | ")

function case_type(dtype::AbstractString, layout::AbstractString)
    haskey(DTYPES, dtype) || return "unsupported the Julia agent has no dtype $dtype"
    layout in LAYOUTS || return "unsupported the Julia agent has no layout $layout"
    return DTYPES[dtype]
end

function respond(words::Vector{String})
    isempty(words) && return "fail empty request"
    command = words[1]
    if command == "hello" && length(words) == 1
        return "ok julia"
    elseif command in ("produce", "self") && length(words) == 3
        T = case_type(words[2], words[3])
        T isa String && return T
        return command == "self" ? run_self(T, words[3]) : run_produce(T, words[3])
    elseif command == "host" && length(words) == 5
        T = case_type(words[4], words[5])
        T isa String && return T
        return run_host(words[2], words[3], T, words[4], words[5])
    elseif command == "consume" && length(words) == 4
        T = case_type(words[2], words[3])
        T isa String && return T
        return run_consume(T, words[3], words[4], words[2])
    end
    return "fail unknown request $(repr(join(words, ' ')))"
end

function answer(line::AbstractString)
    try
        response = respond(String.(split(strip(line), ' '; keepempty = false)))
        startswith(response, "ok") || (LEFTOVERS[] = true)
        return response
    catch e
        LEFTOVERS[] = true
        e isa CheckFailure && return "fail " * e.message
        e isa Unsupported && return "unsupported " * e.message
        bt = catch_backtrace()
        println(stderr, "julia agent: request $(repr(line)) threw:")
        showerror(stderr, e, bt)
        println(stderr)
        return "fail exception " * sprint(showerror, e)
    end
end

function main()
    for line in eachline(stdin)
        strip(line) == "quit" && break
        response = one_line(answer(line))
        println(stdout, response)
        flush(stdout)
    end
    return 0
end

# Run as a script (not included by guest.jl): serve requests.
abspath(PROGRAM_FILE) == @__FILE__() && exit(main())

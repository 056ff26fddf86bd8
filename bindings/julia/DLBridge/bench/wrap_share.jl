# Per-call cost of DLBridge.wrap and DLBridge.share, for small and large arrays (O(1): the size
# must not matter). Prints the Julia section of docs/benchmarks.md; with a path argument it also
# replaces that section (between `<!-- begin julia -->` and `<!-- end julia -->`) in that file.
# Run from the repository root, with libdlbridge built in release mode:
#   DLBRIDGE_LIB=target/release/libdlbridge.so julia --project=bindings/julia/DLBridge \
#     bindings/julia/DLBridge/bench/wrap_share.jl docs/benchmarks.md
using DLBridge
using Printf

const CALLS = 100_000
const BATCHES = 7

# Nanoseconds per call of `f()`: the best of BATCHES batches of CALLS calls each (the machine
# is shared; the best batch is the least disturbed one). Every batch includes the collection of
# what its calls allocated (and the finalizers that drop the tensor references), so the figure
# is the full cost of a call, not only its fast path.
function per_call_ns(f)
    f()
    return minimum(1:BATCHES) do _
        GC.gc()
        elapsed = @elapsed begin
            for _ in 1:CALLS
                f()
            end
            GC.gc(false)
        end
        elapsed / CALLS * 1e9
    end
end

function cases(n)
    A = rand(Float32, n, 4, 4)
    t = DLBridge.share(A)
    s = DLBridge.share(view(A, 1:2:n, :, 4:-1:1))
    return [
        ("`wrap(t)`, row-major → `Array`", () -> DLBridge.wrap(t)),
        ("`wrap(t; order=:permuted)` → `PermutedDimsArray`", () -> DLBridge.wrap(t; order = :permuted)),
        ("`wrap(Array{Float32,3}, t)` (type-stable)", () -> DLBridge.wrap(Array{Float32,3}, t)),
        ("`wrap(t)`, strided → `StridedView`", () -> DLBridge.wrap(s)),
        ("`share(A)`, `Array`", () -> DLBridge.share(A)),
        ("`share(view(A, 1:2:n, :, 4:-1:1))`", () -> DLBridge.share(view(A, 1:2:n, :, 4:-1:1))),
        ("`share(A)` + `export_tensor` + consumer's deleter",
         () -> (p = DLBridge.export_tensor(DLBridge.share(A));
                ccall(unsafe_load(Ptr{Ptr{Cvoid}}(p + 16)), Cvoid, (Ptr{Cvoid},), p))),
    ]
end

function report()
    small, large = 4, 1 << 20
    rows = [(name, per_call_ns(f_small), per_call_ns(f_large))
            for ((name, f_small), (_, f_large)) in zip(cases(small), cases(large))]
    slowest = maximum(max(r[2], r[3]) for r in rows)
    ratios = [r[3] / r[2] for r in rows]
    io = IOBuffer()
    println(io, "## Julia (DLBridge.jl)\n")
    println(io, "Per-call cost of `DLBridge.wrap` and `DLBridge.share` over a Float32 array of ",
            "64 elements and of 16 Mi elements (64 MiB): the best of $BATCHES batches of $CALLS ",
            "calls, each batch including the garbage collection of what it allocated (the ",
            "finalizers that drop tensor references, the release queue). Julia ", VERSION, ", ",
            strip(Sys.cpu_info()[1].model), ", ", Sys.CPU_THREADS, " cores; reproduce with ",
            "`bindings/julia/DLBridge/bench/wrap_share.jl` (see its header).\n")
    println(io, "| call | 64 floats (ns/call) | 64 MiB (ns/call) |")
    println(io, "|---|---:|---:|")
    for (name, t_small, t_large) in rows
        @printf(io, "| %s | %.0f | %.0f |\n", name, t_small, t_large)
    end
    @printf(io, "\nTarget: at most 2 µs per call, whatever the size. Slowest call: %.2f µs (%s); ",
            slowest / 1000, slowest <= 2000 ? "met" : "NOT met")
    @printf(io, "64 MiB / 64 floats: %.2f–%.2f (O(1): nothing is copied or touched per element).\n",
            minimum(ratios), maximum(ratios))
    return String(take!(io))
end

# Replaces (or appends) the `julia` section of the Markdown file at `path`.
function write_section(path, body)
    first_line, last_line = "<!-- begin julia -->", "<!-- end julia -->"
    block = string(first_line, "\n", rstrip(body), "\n", last_line)
    text = isfile(path) ? read(path, String) : "# Benchmarks\n"
    pattern = Regex(string(first_line, "(?s).*?", last_line))
    text = occursin(pattern, text) ? replace(text, pattern => block) :
        string(rstrip(text), "\n\n", block, "\n")
    write(path, text)
end

body = report()
print(body)
isempty(ARGS) || write_section(ARGS[1], body)

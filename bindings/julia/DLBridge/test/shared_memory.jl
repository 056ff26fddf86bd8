# Shared-memory segments: values of every eltype, writes seen through other mappings (in this
# process and in a second Julia process), C-order copies of strided arrays, read-only mappings,
# errors naming the handle, and no segment held once every side let go. Segments are made inside @noinline
# functions, so that nothing in a test's frame keeps them mapped.

# The handles of every segment these tests make (or have a second process make).
const SHM_HANDLES = String[]
@noinline remember(handle::String) = (push!(SHM_HANDLES, handle); handle)

# Whether a live process still holds the segment `handle` ("dlbridge-PID-FD-TOKEN") names, so
# that the handle opens: the descriptor it names is that segment's memory file.
function segment_exists(handle)
    parts = split(handle, '-')
    length(parts) == 4 || return false
    target = try
        readlink("/proc/$(parts[2])/fd/$(parts[3])")
    catch
        return false
    end
    return startswith(target, "/memfd:dlbridge-$(parts[4])")
end
const CAN_SEE_SEGMENTS = Sys.islinux()

# A second Julia process with this one's executable, flags, load path and environment
# (DLBRIDGE_LIB, JULIA_DEPOT_PATH), running `code` with `args` as ARGS.
function julia_process(code::String, args::String...)
    env = copy(ENV)
    env["JULIA_LOAD_PATH"] = join(Base.load_path(), Sys.iswindows() ? ';' : ':')
    delete!(env, "JULIA_PROJECT")
    return setenv(`$(Base.julia_cmd()) --startup-file=no --history-file=no -e $code $args`, env)
end

@noinline function values_round_trip(::Type{T}) where {T}
    A = samples(T, 3, 4)
    t = DLBridge.from_shared(remember(DLBridge.to_shared(A)))
    size(t) == (4, 3) && eltype(t) === T && DLBridge.isreadonly(t) && DLBridge.iscopied(t) ||
        return false
    return DLBridge.wrap(Array{T,2}, t; unsafe_ignore_readonly = true) == A &&
           DLBridge.wrap(Array{T,2}, copy(t)) == A
end

@noinline function zeros_written_and_seen(::Type{T}) where {T}
    handle, t = DLBridge.empty_shared(T, 2, 3)
    remember(handle)
    Z = DLBridge.wrap(Array{T,2}, t)
    size(Z) == (3, 2) && all(iszero, Z) && !DLBridge.iscopied(t) || return false
    W = DLBridge.wrap(Array{T,2}, DLBridge.from_shared(handle; writable = true))
    W[2, 1] = one(T)  # row-major (0, 1)
    R = DLBridge.wrap(Array{T,2}, DLBridge.from_shared(handle); unsafe_ignore_readonly = true)
    return Z[2, 1] == one(T) && R[2, 1] == one(T) && count(!iszero, R) == 1
end

@testset "values of every eltype: $T" for T in DLBridge.SUPPORTED_ELTYPES
    @test values_round_trip(T)
    @test zeros_written_and_seen(T)
end

@noinline function odd_shapes()
    h0, t0 = DLBridge.empty_shared(Float64)
    h1, t1 = DLBridge.empty_shared(Int16, 0, 5)
    s0 = DLBridge.from_shared(remember(h0); writable = true)
    s1 = DLBridge.from_shared(remember(h1))
    DLBridge.wrap(s0)[] = 2.5
    return size(s0) == () && DLBridge.wrap(t0)[] == 2.5 && size(s1) == (0, 5) &&
           size(DLBridge.wrap(copy(s1))) == (5, 0)
end

@testset "0-d and empty tensors" begin
    @test odd_shapes()
end

@noinline function strided_to_shared(order::Symbol)
    A = reshape(collect(1.0:24.0), 4, 6)
    v = view(A, 1:2:3, 6:-2:1)  # a gap and a negative step
    t = DLBridge.share(v; order = order)
    s = DLBridge.from_shared(remember(DLBridge.to_shared(t)))
    R = DLBridge.wrap(s; unsafe_ignore_readonly = true)
    c_strides = (size(s)[2], 1)
    return (DLBridge.iscopied(s), strides(s) == c_strides, vec(R),
            DLBridge.wrap(copy(s); order = :permuted) == (order === :same ? v : permutedims(v)))
end

@testset "to_shared copies any strides into C order" begin
    v = view(reshape(collect(1.0:24.0), 4, 6), 1:2:3, 6:-2:1)
    copied, compact, values, same = strided_to_shared(:reversed)
    @test copied && compact && same
    @test values == vec(v)              # T[i, j] == v[j, i], row-major: v's column-major order
    copied, compact, values, same = strided_to_shared(:same)
    @test copied && compact && same
    @test values == vec(permutedims(v)) # T[i, j] == v[i, j], row-major
end

@noinline function read_only_mapping()
    handle, t = DLBridge.empty_shared(Int32, 4)
    DLBridge.wrap(t) .= 1:4
    r = DLBridge.from_shared(remember(handle))
    w = DLBridge.from_shared(handle; writable = true)
    return (DLBridge.isreadonly(r), !DLBridge.isreadonly(w),
            throws_naming(() -> DLBridge.wrap(r), ArgumentError, "read-only"),
            throws_naming(() -> DLBridge.wrap(Array{Int32,1}, r), ArgumentError, "read-only"),
            DLBridge.wrap(r; unsafe_ignore_readonly = true) == 1:4,
            DLBridge.wrap(copy(r)) == 1:4)
end

@testset "read-only mappings refuse a writable wrap" begin
    @test all(read_only_mapping())
end

# The second process: opens ARGS[1] writable, checks the parent's values, writes, exits.
const WRITER = """
using DLBridge
t = DLBridge.from_shared(ARGS[1]; writable = true)
A = DLBridge.wrap(Array{Float64,2}, t)
A == reshape(0.0:5.0, 3, 2) || exit(2)
A .*= 10
exit(0)
"""

@noinline function write_in_second_process()
    handle, t = DLBridge.empty_shared(Float64, 2, 3)
    remember(handle)
    A = DLBridge.wrap(t)
    A .= reshape(0.0:5.0, 3, 2)
    ok = success(pipeline(julia_process(WRITER, handle); stderr = stderr))
    return ok, A == reshape(0.0:10.0:50.0, 3, 2)
end

# The second process reads a handed-over segment (read-only) and checks its values.
const READER = """
using DLBridge
t = DLBridge.from_shared(ARGS[1])
exit(DLBridge.wrap(t; unsafe_ignore_readonly = true) == reshape(Int32.(1:6), 3, 2) ? 0 : 2)
"""

# The second process makes a segment, prints its handle and exits before anyone opens it.
const PRODUCER = "using DLBridge; print(DLBridge.to_shared(reshape(ComplexF32.(1:6), 3, 2)))"

@noinline function read_in_second_process()
    handle = remember(DLBridge.to_shared(reshape(Int32.(1:6), 3, 2)))
    ok = success(pipeline(julia_process(READER, handle); stderr = stderr))
    return ok, handle
end

@noinline function open_from_exited_process()
    handle = remember(read(pipeline(julia_process(PRODUCER); stderr = stderr), String))
    exists_after_exit = !CAN_SEE_SEGMENTS || segment_exists(handle)
    t = DLBridge.from_shared(handle)
    return exists_after_exit,
           DLBridge.wrap(Array{ComplexF32,2}, copy(t)) == reshape(ComplexF32.(1:6), 3, 2), handle
end

@testset "a second process" begin
    ok, seen = write_in_second_process()
    @test ok  # it saw the parent's values
    @test seen  # and the parent sees its writes
    ok, handle = read_in_second_process()
    @test ok
    @test !CAN_SEE_SEGMENTS || !segment_exists(handle)  # the reader released the hand-over
    exists_after_exit, same, handle = open_from_exited_process()
    @test exists_after_exit && same
    full_gc()
    @test !CAN_SEE_SEGMENTS || !segment_exists(handle)
end

@noinline made_and_dropped() = remember(first(DLBridge.empty_shared(UInt8, 16)))
@noinline function made_and_finalized()
    handle, t = DLBridge.empty_shared(UInt8, 16)
    finalize(t)
    return remember(handle)
end

# A fake segment file of `bytes` (no dlbridge header), removed after `f(handle)`.
function with_fake_segment(f, bytes::Vector{UInt8})
    # A sealed memory file like a segment's (MFD_CLOEXEC | MFD_ALLOW_SEALING; F_ADD_SEALS with
    # F_SEAL_SHRINK | F_SEAL_GROW), named by a handle carrying the token its bytes hold.
    fd = ccall(:memfd_create, Cint, (Cstring, Cuint), "dlbridge-fake", 0x0003)
    fd >= 0 || error("memfd_create failed")
    try
        written = GC.@preserve bytes ccall(:write, Cssize_t, (Cint, Ptr{UInt8}, Csize_t), fd,
                                           pointer(bytes), length(bytes))
        written == length(bytes) || error("write failed")
        ccall(:fcntl, Cint, (Cint, Cint, Cint...), fd, 1033, 6) == 0 || error("sealing failed")
        token = length(bytes) >= 80 ? reinterpret(UInt64, bytes[73:80])[1] : UInt64(0)
        return f("dlbridge-$(getpid())-$fd-$(string(token; base = 16, pad = 16))")
    finally
        ccall(:close, Cint, (Cint,), fd)
    end
end

# A real segment whose header's dtype code (byte 32 of the segment layout) is overwritten.
@noinline function corrupted_dtype_error()
    handle, t = DLBridge.empty_shared(Float32, 4)
    remember(handle)
    parts = split(handle, '-')
    open("/proc/$(parts[2])/fd/$(parts[3])", "r+") do io
        seek(io, 32)
        write(io, 0x2a)
    end
    return throws_naming(() -> DLBridge.from_shared(handle), ArgumentError, handle, "42")
end

@testset "errors name the handle" begin
    handle = made_and_finalized()
    @test throws_naming(() -> DLBridge.from_shared(handle), ArgumentError, handle,
                        "DLB_ERR_SHM_NOT_FOUND")
    handle = made_and_dropped()
    full_gc()
    @test throws_naming(() -> DLBridge.from_shared(handle), ArgumentError, handle,
                        "DLB_ERR_SHM_NOT_FOUND")
    gone = "dlbridge-$(getpid())-999999-00000000000000aa"
    @test throws_naming(() -> DLBridge.from_shared(gone), ArgumentError, gone,
                        "DLB_ERR_SHM_NOT_FOUND")
    for bad in ("", ".", "..", "a/b", "../etc/passwd", "x"^300, "dlbridge-never-made")
        @test throws_naming(() -> DLBridge.from_shared(bad), ArgumentError, repr(bad),
                            "DLB_ERR_UNKNOWN_NAME")
    end
    @test throws_naming(() -> DLBridge.from_shared("dlbridge\0x"), ArgumentError, "dlbridge\\0x")
    if CAN_SEE_SEGMENTS
        @test with_fake_segment(zeros(UInt8, 8)) do handle
            throws_naming(() -> DLBridge.from_shared(handle), ArgumentError, handle,
                          "truncated", "DLB_ERR_SHM_INVALID")
        end
        @test with_fake_segment(fill(0x41, 4096)) do handle
            throws_naming(() -> DLBridge.from_shared(handle; writable = true), ArgumentError,
                          handle, "magic", "DLB_ERR_SHM_INVALID")
        end
        @test corrupted_dtype_error()
    end
    @test throws_naming(() -> DLBridge.empty_shared(Char, 2), ArgumentError, "Char")
    @test throws_naming(() -> DLBridge.empty_shared(Float32, 2, -3), ArgumentError, "-3",
                        "DLB_ERR_NEGATIVE_DIM")
    @test throws_naming(() -> DLBridge.to_shared(1:3), ArgumentError, "UnitRange")
    @test throws_naming(() -> DLBridge.to_shared("x"), ArgumentError, "String")
    p = make_producer(Float32, (4,), (1,); device = (10, 0))
    @test throws_naming(() -> DLBridge.to_shared(DLBridge.import_tensor(p.managed)),
                        ArgumentError, "DLB_ERR_NOT_ON_CPU", "rocm")
    # CUDA memory is shared through the CUDA driver, which a process holding CUDA memory has
    # loaded: this one has not.
    p = make_producer(Float32, (4,), (1,); device = (2, 0))
    @test throws_naming(() -> DLBridge.to_shared(DLBridge.import_tensor(p.managed)),
                        ErrorException, "DLB_ERR_CUDA_DRIVER_NOT_LOADED")
    t = DLBridge.arange(Int8, 3)
    finalize(t)
    @test throws_naming(() -> DLBridge.to_shared(t), ArgumentError, "finalized")
    @test DLBridge.status_exception(30, "m") isa ErrorException
    @test DLBridge.status_exception(31, "m") == ArgumentError("m (DLB_ERR_SHM_NOT_FOUND)")
    @test DLBridge.status_exception(32, "m") == ArgumentError("m (DLB_ERR_SHM_INVALID)")
end

@noinline function inferred_calls()
    handle, t = @inferred DLBridge.empty_shared(Float32, 2, 3)
    s = @inferred DLBridge.from_shared(remember(handle); writable = true)
    h = @inferred DLBridge.to_shared(s)
    DLBridge.from_shared(remember(h))
    h = @inferred DLBridge.to_shared(rand(2))  # every handed-over segment must be opened once
    finalize(DLBridge.from_shared(remember(h)))
    return true
end

@testset "type-stable calls" begin
    @test inferred_calls()
end

@testset "no segment is left behind" begin
    full_gc()
    DLBridge.collect_released()
    full_gc()
    @test !isempty(SHM_HANDLES)
    if CAN_SEE_SEGMENTS
        @test filter(segment_exists, SHM_HANDLES) == String[]
    end
end

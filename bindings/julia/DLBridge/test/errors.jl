# Bad tensors from producers, unsupported dtypes and arrays, read-only and device tensors, and
# the one mapping from C ABI status codes to Julia exceptions.

# `f()` throws an `E` whose message contains every one of `parts`.
function throws_naming(f, E, parts...)
    try
        f()
    catch e
        e isa E || (@error "expected a $E" exception = e; return false)
        message = sprint(showerror, e)
        return all(part -> occursin(part, message), parts)
    end
    @error "expected a $E, nothing was thrown"
    return false
end

# How many deleters `f()` runs itself (the collector is off, so no finalizer runs meanwhile).
function deletions_during(f)
    before = DELETIONS[]
    GC.enable(false)
    try
        f()
    finally
        GC.enable(true)
    end
    return DELETIONS[] - before
end

# A valid producer's tensor whose first stride is then overwritten with `stride`.
function with_first_stride(stride)
    p = make_producer(Float32, (2, 2), (2, 1))
    m = unsafe_load(Ptr{DLManagedTensorVersionedC}(p.managed))
    unsafe_store!(m.dl_tensor.strides, stride, 1)
    return p
end

@testset "invalid producer tensors raise, and their deleter runs exactly once" begin
    cases = [
        (() -> make_producer(Float32, (2, -3), (1, 1)), ["-3", "DLB_ERR_NEGATIVE_DIM"]),
        (() -> make_producer(Float32, (2,), (1,); version = (2, 0)), ["DLB_ERR_UNSUPPORTED_VERSION"]),
        (() -> make_producer(Float32, (2,), (1,); dtype = (42, 32, 1)), ["42"]),
        (() -> make_producer(Float32, (2,), (1,); dtype = (2, 24, 1)), ["24"]),
        (() -> make_producer(Float32, (2,), (1,); device = (99, 0)), ["99"]),
        (() -> make_producer(Float32, (2, 2), (2, 1); null_data = true), ["DLB_ERR_NULL_DATA"]),
        (() -> make_producer(Float32, (2,), (1,); null_shape = true), ["DLB_ERR_NULL_SHAPE"]),
        (() -> make_producer(Float32, (2,), (1,); ndim = -1), ["-1"]),
        (() -> make_producer(Float32, (2,), (1,); legacy = true, ndim = 2000), ["2000"]),
        (() -> with_first_stride(typemax(Int64) ÷ 2), ["DLB_ERR_STRIDE_OVERFLOW"]),
    ]
    for (make, parts) in cases
        p = make()
        deleted = deletions_during() do
            @test throws_naming(() -> DLBridge.import_tensor(p.managed), ArgumentError, parts...)
        end
        @test deleted == 1
    end
    @test throws_naming(ArgumentError, "DLB_ERR_NULL_TENSOR") do
        DLBridge.import_tensor(Ptr{DLBridge.DLManagedTensorVersioned}(C_NULL))
    end
    @test throws_naming(ArgumentError, "Ptr{Nothing}") do
        DLBridge.import_tensor(Ptr{Cvoid}(C_NULL))
    end
end

@testset "bool bytes other than 0 and 1 are refused, never wrapped as Bool" begin
    # The one bool rule: bytes [0, 1, 2, 255] make no Bool array (a Julia Bool holding 2 is
    # undefined behaviour; before the rule, count(wrap(t)) was 2); the error names the element.
    # A bool tensor over `bytes` (every byte written, also those the strides skip).
    function bool_tensor(bytes, strides = (1,))
        p = make_producer(UInt8, (length(bytes) ÷ strides[1],), strides; dtype = (6, 8, 1))
        for (i, b) in enumerate(bytes)
            unsafe_store!(p.element0, b, i)
        end
        return DLBridge.import_tensor(p.managed)
    end
    function refusals(bytes)
        t = bool_tensor(bytes)
        @test eltype(t) === Bool
        for f in (() -> DLBridge.wrap(t), () -> DLBridge.wrap(t; order = :permuted),
                  () -> DLBridge.wrap(Array{Bool,1}, t),
                  () -> DLBridge.wrap(DLBridge.StridedView{Bool,1}, t))
            @test throws_naming(f, ArgumentError, "index [2]", "0x02", "DLB_ERR_INVALID_BOOL")
        end
        finalize(t)
    end
    @test deletions_during(() -> refusals(UInt8[0, 1, 2, 255])) == 1
    t = bool_tensor(UInt8[1, 0, 255, 1])
    @test throws_naming(() -> DLBridge.wrap(copy(t)), ArgumentError, "index [2]", "0xff")
    # Only the elements the layout reaches count: every other byte of [0, 2, 1, 255] is 0 or 1.
    A = DLBridge.wrap(bool_tensor(UInt8[0, 2, 1, 255], (2,)))
    @test A == [false, true] && count(A) == 1
    @test DLBridge.wrap(bool_tensor(UInt8[0, 1, 1, 0])) == [false, true, true, false]
end

@testset "unsupported dtypes are named" begin
    for (dtype, name) in [((10, 8, 1), "float8_e4m3fn"), ((2, 32, 4), "float32x4"),
                          ((17, 4, 1), "float4_e2m1fn"), ((3, 64, 1), "handle64")]
        p = make_producer(UInt8, (4,), (1,); dtype = dtype)
        t = DLBridge.import_tensor(p.managed)
        @test DLBridge.dtype(t) == name
        @test throws_naming(() -> DLBridge.wrap(t), ArgumentError, name)
        @test throws_naming(() -> eltype(t), ArgumentError, name)
    end
end

@testset "unsupported arrays are named" begin
    @test throws_naming(() -> DLBridge.share(["a"]), ArgumentError, "String")
    @test throws_naming(() -> DLBridge.share(Int128[1, 2]), ArgumentError, "Int128")
    @test throws_naming(() -> DLBridge.share(1:3), ArgumentError, "UnitRange")
    @test throws_naming(() -> DLBridge.share(trues(3)), ArgumentError, "BitArray")
    @test throws_naming(() -> DLBridge.share(view(rand(4), [1, 3])), ArgumentError, "SubArray")
    @test throws_naming(() -> DLBridge.share(rand(2); order = :C), ArgumentError, ":C")
    @test throws_naming(() -> DLBridge.arange(Char, 3), ArgumentError, "Char")
end

@testset "read-only tensors need the caller's explicit opt-in" begin
    p = make_producer(Int64, (2, 2), (2, 1); flags = DLBridge.DLB_FLAG_READ_ONLY)
    t = DLBridge.import_tensor(p.managed)
    @test DLBridge.isreadonly(t)
    @test throws_naming(() -> DLBridge.wrap(t), ArgumentError, "read-only", "unsafe_ignore_readonly")
    @test throws_naming(() -> DLBridge.wrap(Array{Int64,2}, t), ArgumentError, "read-only")
    @test reversed_matches(DLBridge.wrap(t; unsafe_ignore_readonly = true), p)
    c = copy(t)
    @test !DLBridge.isreadonly(c) && DLBridge.iscopied(c)
    @test reversed_matches(DLBridge.wrap(c), p)
end

@testset "tensors Julia cannot address are refused" begin
    p = make_producer(Float32, (4,), (1,); device = (2, 0))
    t = DLBridge.import_tensor(p.managed)
    @test DLBridge.device(t) == (2, 0)
    @test throws_naming(() -> DLBridge.wrap(t), ArgumentError, "(2, 0)")
    @test throws_naming(() -> copy(t), ArgumentError, "DLB_ERR_NOT_ON_CPU")
    q = make_producer(Float32, (4,), (1,); misalign = 2)
    @test throws_naming(() -> DLBridge.wrap(DLBridge.import_tensor(q.managed)), ArgumentError,
                        "not aligned")
end

@testset "wrong requests" begin
    t = DLBridge.arange(Float64, 6)
    @test throws_naming(() -> DLBridge.wrap(t; order = :C), ArgumentError, ":C")
    @test throws_naming(() -> DLBridge.wrap(Array{Float32,1}, t), ArgumentError, "float64")
    @test throws_naming(() -> DLBridge.wrap(Array{Float64,2}, t), DimensionMismatch, "1 dimensions")
    @test throws_naming(() -> copy(t; order = :K), ArgumentError, ":K")
    s = DLBridge.share(view(rand(4, 4), 1:2:3, :))
    @test throws_naming(() -> DLBridge.wrap(Array{Float64,2}, s), ArgumentError, "StridedView")
    finalize(t)
    @test throws_naming(() -> DLBridge.wrap(t), ArgumentError, "finalized")
end

@testset "a missing library is named" begin
    @test throws_naming(() -> DLBridge.load_library("/nonexistent/libdlbridge.so"),
                        ErrorException, "/nonexistent/libdlbridge.so", "DLBRIDGE_LIB")
end

@testset "C ABI status codes map to one exception each" begin
    @test DLBridge.status_exception(14, "dimension 1 has negative size -3") ==
          ArgumentError("dimension 1 has negative size -3 (DLB_ERR_NEGATIVE_DIM)")
    @test DLBridge.status_exception(23, "m") isa DimensionMismatch
    @test DLBridge.status_exception(24, "m") isa DimensionMismatch
    @test DLBridge.status_exception(2, "m") isa ErrorException
    @test DLBridge.status_exception(29, "m") isa ErrorException
    @test DLBridge.status_exception(99, "m") == ArgumentError("m (dlbridge status 99)")
end

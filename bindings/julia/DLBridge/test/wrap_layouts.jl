# Every supported eltype in every layout, from a hand-built producer: values element by element
# against the producer's own indexing, the array type and size each layout promises, and writes
# seen on both sides.

# (name, DLPack shape, element strides or `nothing` for NULL strides, expected kind):
# :row → Array with reversed dims, :column → Array with the same dims,
# :strided → DLBridge.StridedView with reversed dims.
const LAYOUTS = [
    ("row-major", (2, 3, 4), (12, 4, 1), :row),
    ("row-major, NULL strides", (3, 4), nothing, :row),
    ("column-major", (2, 3, 4), (1, 2, 6), :column),
    ("column-major with a size-1 dim", (4, 1, 3), (1, 4, 4), :column),
    ("gaps", (3, 4), (10, 2), :strided),
    ("negative outer stride", (3, 4), (-4, 1), :strided),
    ("negative inner stride", (2, 5), (5, -1), :strided),
    ("permuted dims", (3, 4, 2), (1, 6, 3), :strided),
    ("zero stride (broadcast)", (3, 4), (0, 1), :strided),
    ("size-1 dim with an odd stride", (3, 1, 4), (4, 999, 1), :row),
    ("(1, 1, N) with F strides", (1, 1, 5), (1, 1, 1), :row),
    ("(1, 1, N) with C strides", (1, 1, 5), (5, 5, 1), :row),
    ("(N, 1) with F strides", (5, 1), (1, 5), :row),
    ("0-d", (), (), :row),
    ("empty", (0, 3), (3, 1), :row),
    ("empty with odd strides", (4, 0, 2), (7, 1, -3), :row),
]

# Each check gets its own @noinline function, specialised on one concrete array type (see
# ENVIRONMENT.md: Julia 1.5 + LLVM 9 can abort on small Unions of ComplexF32 arrays).

"B[reverse(I)] (1-based) is the producer's element I (0-based), for every I."
@noinline reversed_matches(B, p) =
    all(I -> B[reverse(I .+ 1)...] === producer_get(p, I), indices0(p.shape))

"B[I] (1-based) is the producer's element I (0-based), for every I."
@noinline same_order_matches(B, p) =
    all(I -> B[(I .+ 1)...] === producer_get(p, I), indices0(p.shape))

# A value of type T other than `x`.
other_value(x::T) where {T} = first(v for v in (sample(T, k) for k in 150:160) if v !== x)

"A write through B at I (0-based, B indexed by `to_b(I)`) reaches the producer, and back."
@noinline function writes_are_shared(B, p, to_b)
    isempty(B) && return true
    last_index = p.shape .- 1
    v = other_value(producer_get(p, last_index))
    B[to_b(last_index)...] = v
    seen_by_producer = producer_get(p, last_index) === v
    first_index = map(zero, p.shape)
    w = other_value(B[to_b(first_index)...])
    producer_set!(p, first_index, w)
    return seen_by_producer && B[to_b(first_index)...] === w
end

reversed_index(I) = reverse(I .+ 1)
same_index(I) = I .+ 1

function check_layout(T, name, shape, strides, kind, byte_offset)
    p = make_producer(T, shape, strides; byte_offset = byte_offset)
    t = DLBridge.import_tensor(p.managed)
    @test size(t) == shape
    @test eltype(t) === T
    @test length(t) == prod(shape)
    B = DLBridge.wrap(t)
    P = DLBridge.wrap(t; order = :permuted)
    if kind === :column
        @test B isa Array{T,length(shape)}
        @test size(B) == shape
        @test same_order_matches(B, p)
        @test writes_are_shared(B, p, same_index)
    else
        @test B isa (kind === :row ? Array : DLBridge.StridedView){T,length(shape)}
        @test size(B) == reverse(shape)
        @test reversed_matches(B, p)
        @test writes_are_shared(B, p, reversed_index)
    end
    @test P isa PermutedDimsArray{T,length(shape)}
    @test size(P) == shape
    @test same_order_matches(P, p)
    @test writes_are_shared(P, p, same_index)
    S = DLBridge.wrap(DLBridge.StridedView{T,length(shape)}, t; order = :permuted)
    @test same_order_matches(S, p)
    return nothing
end

@testset "$T" for T in DLBridge.SUPPORTED_ELTYPES
    for (name, shape, strides, kind) in LAYOUTS, byte_offset in (true, false)
        @testset "$name, element 0 via $(byte_offset ? "byte_offset" : "data")" begin
            check_layout(T, name, shape, strides, kind, byte_offset)
        end
    end
end

@testset "a (1, 1, N) tensor reads like other row-major tensors (DLPack.jl issue 47)" begin
    for strides in ((1, 1, 1), (3, 3, 1), (7, 9, 1))
        p = make_producer(Float32, (1, 1, 3), strides)
        B = DLBridge.wrap(DLBridge.import_tensor(p.managed))
        @test size(B) == (3, 1, 1)
        @test reversed_matches(B, p)
    end
end

@testset "strided views index, stride and share like arrays" begin
    p = make_producer(Float64, (3, 4), (-8, 2))
    S = DLBridge.wrap(DLBridge.import_tensor(p.managed))
    @test S isa DLBridge.StridedView{Float64,2}
    @test strides(S) == (2, -8)
    @test pointer(S) == p.element0
    @test parent(S) isa Vector{Float64}
    # The span runs from the last row (2 steps of -8 back) to the last column (3 steps of 2).
    @test pointer(parent(S)) == p.element0 - 16 * sizeof(Float64)
    @test length(parent(S)) == 16 + 6 + 1
    @test_throws BoundsError S[5, 1]
    @test collect(S) == [producer_get(p, (i - 1, j - 1)) for j in 1:4, i in 1:3]
    @test S[:, 2] == [producer_get(p, (1, j - 1)) for j in 1:4]
    @test DLBridge.wrap(DLBridge.share(S)) == S
end

# Exchange through the C ABI: tensors the Rust core made, managed-tensor pointers in and out
# (versioned and legacy), and DLPack.jl's wrap(o, to_dlpack) / share(A, from_dlpack) pair.

# What the Rust core's arange promises: i (bool: i != 0; complex: real part i).
expected_arange(::Type{T}, n) where {T} = [T(i) for i in 0:n-1]
expected_arange(::Type{Bool}, n) = [i != 0 for i in 0:n-1]
@noinline same_values(A, B) = size(A) == size(B) && all(i -> A[i] == B[i], eachindex(A, B))

@testset "Rust-made tensors: $T" for T in DLBridge.SUPPORTED_ELTYPES
    a = DLBridge.arange(T, 7)
    @test size(a) == (7,) && eltype(a) === T
    @test same_values(DLBridge.wrap(a), expected_arange(T, 7))
    z = DLBridge.zeros(T, 2, 3)
    Z = DLBridge.wrap(z)
    @test Z isa Array{T,2} && size(Z) == (3, 2) && all(iszero, Z)
    Z[2, 1] = one(T)  # row-major (0, 1)
    @test same_values(DLBridge.wrap(copy(z; order = :F)), [zero(T) one(T) zero(T); zero(T) zero(T) zero(T)])
    @test size(DLBridge.wrap(DLBridge.zeros(T))) == ()
    @test size(DLBridge.wrap(DLBridge.zeros(T, 0, 4))) == (4, 0)
end

@testset "managed tensors out and back in, zero copy" begin
    A = rand(Float32, 3, 5)
    p = DLBridge.export_tensor(DLBridge.share(A))
    @test p isa Ptr{DLBridge.DLManagedTensorVersioned}
    B = DLBridge.wrap(DLBridge.import_tensor(p))
    @test B == A && pointer(B) == pointer(A)

    q = DLBridge.export_tensor(DLBridge.share(A); legacy = true)
    @test q isa Ptr{DLBridge.DLManagedTensor}
    C = DLBridge.wrap(DLBridge.import_tensor(q; readonly = false))
    C[3, 5] = 42
    @test A[3, 5] == 42

    r = DLBridge.export_tensor(DLBridge.share(A); readonly = true)
    t = DLBridge.import_tensor(r)
    @test DLBridge.isreadonly(t)
    @test_throws ArgumentError DLBridge.export_tensor(t; legacy = true)
    legacy = DLBridge.export_tensor(t; legacy = true, unsafe_ignore_readonly = true)
    @test DLBridge.isreadonly(DLBridge.import_tensor(legacy))

    t = DLBridge.share(A)
    @test DLBridge.import_tensor(t) === t
end

@testset "legacy producers: read-only unless the caller says writable" begin
    # A legacy tensor cannot say "read-only", so its import is read-only (numpy's rule too).
    q = make_producer(Int32, (2, 3), nothing; legacy = true)
    t = DLBridge.import_tensor(q.managed)
    @test DLBridge.isreadonly(t)
    refusal = try
        DLBridge.wrap(t)
    catch e
        e
    end
    @test refusal isa ArgumentError && occursin("readonly = false", sprint(showerror, refusal))
    @test reversed_matches(DLBridge.wrap(t; unsafe_ignore_readonly = true), q)
    @test reversed_matches(DLBridge.wrap(copy(t)), q)
    p = make_producer(Int32, (2, 3), (3, 1); legacy = true)
    t = DLBridge.import_tensor(p.managed; readonly = false)
    @test !DLBridge.isreadonly(t)
    @test reversed_matches(DLBridge.wrap(t), p)
end

@testset "DLPack.jl's method pair" begin
    A = rand(ComplexF64, 4, 2)
    to_dlpack(o) = DLBridge.export_tensor(DLBridge.share(o))
    B = DLBridge.wrap(A, to_dlpack)
    @test B == A && pointer(B) == pointer(A)
    P = DLBridge.wrap(A, to_dlpack; order = :permuted)
    @test P == permutedims(A) && parent(P) isa Array{ComplexF64,2}
    @test DLBridge.wrap(Array{ComplexF64,2}, A, to_dlpack) == A

    producer = make_producer(UInt16, (3, 2), (1, 3))
    @test same_order_matches(DLBridge.wrap(nothing, _ -> producer.managed), producer)

    consumed = Ref{Any}()
    from_dlpack(p) = (consumed[] = DLBridge.wrap(DLBridge.import_tensor(p)); :consumer_result)
    @test DLBridge.share(A, from_dlpack) === :consumer_result
    @test consumed[] == A && pointer(consumed[]) == pointer(A)
    from_legacy(p) = p isa Ptr{DLBridge.DLManagedTensor} &&
        DLBridge.wrap(DLBridge.import_tensor(p; readonly = false)) == A
    @test DLBridge.share(A, from_legacy; legacy = true)
    from_same(p) = DLBridge.wrap(DLBridge.import_tensor(p); order = :permuted)
    @test DLBridge.share(A, from_same; order = :same) == A
end

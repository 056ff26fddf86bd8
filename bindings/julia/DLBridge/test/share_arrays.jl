# Sharing Julia arrays: the tensor's metadata, the Rust core reading the elements through its
# own indexing (`copy`), zero-copy in both directions, and every kind of strided array.

# The exported managed tensor's fields, as a C consumer reads them.
function exported_fields(t)
    p = DLBridge.export_tensor(t)
    m = unsafe_load(Ptr{DLManagedTensorVersionedC}(p))
    n = Int(m.dl_tensor.ndim)
    fields = (version = (m.major, m.minor), data = m.dl_tensor.data, flags = m.flags,
              shape = ntuple(i -> unsafe_load(m.dl_tensor.shape, i), n),
              strides = ntuple(i -> unsafe_load(m.dl_tensor.strides, i), n))
    ccall(m.deleter, Cvoid, (Ptr{Cvoid},), p)
    return fields
end

@noinline same_elements(A, B) = size(A) == size(B) && all(i -> A[i] === B[i], eachindex(A, B))
@noinline first_element(A) = A[firstindex(A)]
@noinline set_first!(A, v) = (A[firstindex(A)] = v; A)

@testset "$T arrays" for T in DLBridge.SUPPORTED_ELTYPES
    A = samples(T, 3, 4, 2)
    t = DLBridge.share(A)
    @test size(t) == reverse(size(A)) == (2, 4, 3)
    @test strides(t) == reverse(strides(A)) == (12, 3, 1)
    @test eltype(t) === T
    @test DLBridge.device(t) == (1, 0)
    @test !DLBridge.isreadonly(t)
    @test !DLBridge.iscopied(t)
    fields = exported_fields(t)
    @test fields.version == (1, 3)
    @test fields.data == pointer(A)
    @test fields.shape == (2, 4, 3) && fields.strides == (12, 3, 1)

    # The Rust core reads the elements through the exported strides.
    c = copy(t)
    @test DLBridge.iscopied(c)
    @test same_elements(DLBridge.wrap(c), A)
    @test same_elements(DLBridge.wrap(copy(t; order = :F)), permutedims(A, (3, 2, 1)))

    # Zero copy: wrap gives back A's memory, and writes go both ways.
    B = DLBridge.wrap(t)
    @test B isa Array{T,3} && pointer(B) == pointer(A)
    set_first!(B, sample(T, 101))
    @test first_element(A) === sample(T, 101)
    set_first!(A, sample(T, 102))
    @test first_element(B) === sample(T, 102)

    s = DLBridge.share(A; order = :same)
    @test size(s) == size(A) && strides(s) == strides(A)
    @test same_elements(DLBridge.wrap(s), A)
    @test same_elements(DLBridge.wrap(s; order = :permuted), A)
    @test same_elements(DLBridge.wrap(copy(s)), permutedims(A, (3, 2, 1)))

    z = fill(sample(T, 7))
    tz = DLBridge.share(z)
    @test size(tz) == () && strides(tz) == ()
    @test same_elements(DLBridge.wrap(tz), z)
    @test same_elements(DLBridge.wrap(copy(tz)), z)

    for e in (Array{T}(undef, 0, 3), Array{T}(undef, 2, 0, 4), Array{T}(undef, 0))
        te = DLBridge.share(e)
        @test size(te) == reverse(size(e)) && length(te) == 0
        @test size(DLBridge.wrap(te)) == size(e)
        @test size(DLBridge.wrap(te; order = :permuted)) == size(te)
    end
end

@testset "strided arrays: $name" for (name, V) in [
    ("contiguous SubArray", view(samples(Float32, 3, 4, 2), :, :, 2)),
    ("SubArray with a gap", view(samples(Float32, 3, 4, 2), :, 2:3, 1)),
    ("SubArray with steps", view(samples(Int16, 6, 5), 1:2:5, 5:-2:1)),
    ("negative step", view(samples(ComplexF32, 4, 3), 4:-1:1, :)),
    ("row of a matrix", view(samples(UInt8, 4, 3), 2, :)),
    ("reshaped Array", reshape(samples(Float64, 12), 3, 4)),
    ("reinterpreted Array", reinterpret(UInt32, samples(Float32, 6))),
    ("PermutedDimsArray", PermutedDimsArray(samples(Int64, 2, 3, 4), (3, 1, 2))),
    ("BFloat16 SubArray", view(samples(DLBridge.BFloat16, 5, 4), 2:4, 1:2:3)),
    ("Bool SubArray", view(samples(Bool, 5, 4), 5:-1:1, 2)),
]
    t = DLBridge.share(V)
    @test size(t) == reverse(size(V))
    @test strides(t) == reverse(strides(V))
    @test same_elements(DLBridge.wrap(t), V)
    @test same_elements(DLBridge.wrap(copy(t)), V)
    @test same_elements(DLBridge.wrap(t; order = :permuted), PermutedDimsArray(V, ndims(V):-1:1))
    s = DLBridge.share(V; order = :same)
    @test strides(s) == strides(V)
    @test same_elements(DLBridge.wrap(s; order = :permuted), V)
    @test exported_fields(t).data == pointer(V)
    W = DLBridge.wrap(DLBridge.StridedView{eltype(V),ndims(V)}, t)
    set_first!(W, sample(eltype(V), 103))
    @test first_element(V) === sample(eltype(V), 103)
end

@testset "readonly = true flags the tensor for consumers" begin
    A = samples(Float32, 4)
    t = DLBridge.share(A; readonly = true)
    @test DLBridge.isreadonly(t)
    @test exported_fields(t).flags & DLBridge.DLB_FLAG_READ_ONLY != 0
    @test_throws ArgumentError DLBridge.wrap(t)
    @test DLBridge.wrap(t; unsafe_ignore_readonly = true) == A
end

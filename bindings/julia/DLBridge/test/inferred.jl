# The type-stable paths, checked with @inferred (one @noinline function per array type).

@noinline stable_getindex(A, I...) = @inferred A[I...]

@testset "$T" for T in (Float32, ComplexF32, Bool, DLBridge.BFloat16)
    A = samples(T, 3, 4)
    t = @inferred DLBridge.share(A)
    @test (@inferred DLBridge.share(view(A, 1:2:3, :))) isa DLBridge.Tensor
    B = @inferred DLBridge.wrap(Array{T,2}, t)
    @test B == A
    S = @inferred DLBridge.wrap(DLBridge.StridedView{T,2}, t)
    @test stable_getindex(S, 2, 3) === A[2, 3]
    P = @inferred DLBridge.wrap(DLBridge.StridedView{T,2}, t; order = :permuted)
    @test stable_getindex(P, 3, 2) === A[2, 3]
    @test (@inferred DLBridge.isreadonly(t)) === false
    @test (@inferred DLBridge.device(t)) == (1, 0)
    @test (@inferred DLBridge.collect_released()) isa Int
end

# DLBridge's test suite (Julia's Test stdlib). Run from the repository root with
#   scripts/test/julia.sh
# or, with libdlbridge built and DLBRIDGE_LIB pointing at it,
#   julia --project=bindings/julia/DLBridge bindings/julia/DLBridge/test/runtests.jl
using Test
using DLBridge

include("producers.jl")

@testset "DLBridge" begin
    @testset "wrap: every eltype and layout" begin
        include("wrap_layouts.jl")
    end
    @testset "BFloat16" begin
        include("bfloat16.jl")
    end
    @testset "share" begin
        include("share_arrays.jl")
    end
    @testset "exchange with the Rust core and other frontends" begin
        include("exchange.jl")
    end
    @testset "lifetimes and deleters" begin
        include("lifetimes.jl")
    end
    @testset "errors" begin
        include("errors.jl")
    end
    @testset "shared memory, across processes" begin
        include("shared_memory.jl")
    end
    @testset "type-stable paths" begin
        include("inferred.jl")
    end
    @testset "every deleter ran, every shared array was released" begin
        GC.gc(); GC.gc()
        @test LIVE_PRODUCERS[] == 0
        @test DLBridge.shared_count() == 0
    end
end

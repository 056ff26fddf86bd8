# Deleters run exactly once, only after every Julia array over the tensor is unreachable; shared
# arrays stay alive until every consumer lets go, on any thread. Everything that must become
# garbage is allocated inside @noinline functions: a test's own frame would keep it rooted.

full_gc() = (GC.gc(); GC.gc(); nothing)
@noinline alive(weak::WeakRef) = weak.value !== nothing
@noinline held_equals(holder, key, expected) = holder[key] == expected

# Wraps a producer's tensor several ways, keeps only derived arrays in `holder`, and drops the
# Tensor itself.
@noinline function wrap_into(holder)
    p = make_producer(Float64, (2, 3), (3, 1))
    t = DLBridge.import_tensor(p.managed)
    holder[:row] = view(DLBridge.wrap(t), :, 2)
    holder[:permuted] = reshape(DLBridge.wrap(t; order = :permuted), 6)
    holder[:strided] = DLBridge.wrap(DLBridge.StridedView{Float64,2}, t)
    finalize(t)
    return nothing
end

@testset "the deleter runs once, after the last array over the tensor" begin
    full_gc()
    deletions = DELETIONS[]
    holder = Dict{Symbol,Any}()
    wrap_into(holder)
    full_gc()
    @test DELETIONS[] == deletions
    @test held_equals(holder, :row, [sample(Float64, k) for k in 3:5])
    delete!(holder, :row)
    delete!(holder, :permuted)
    full_gc()
    @test DELETIONS[] == deletions
    @test held_equals(holder, :strided, [sample(Float64, 3i + j) for j in 0:2, i in 0:1])
    empty!(holder)
    full_gc()
    @test DELETIONS[] == deletions + 1
    full_gc()
    @test DELETIONS[] == deletions + 1
end

@noinline function wrap_and_drop(n)
    for i in 1:n
        p = make_producer(Int32, (i, 2), nothing)
        A = DLBridge.wrap(DLBridge.import_tensor(p.managed))
        A[end] = i
    end
end

@testset "deleter counts go back to zero after GC" begin
    full_gc()
    live = LIVE_PRODUCERS[]
    wrap_and_drop(200)
    full_gc()
    @test LIVE_PRODUCERS[] == live
end

# Shares a fresh array and exports it; the Tensor itself is dropped.
@noinline function share_and_export(n)
    A = rand(Float32, n)
    return WeakRef(A), DLBridge.export_tensor(DLBridge.share(A))
end

deleter_of(p) = unsafe_load(Ptr{Ptr{Cvoid}}(p + fieldoffset(DLManagedTensorVersionedC, 4)))

# A consumer on a thread Julia did not start: the export's deleter runs as that thread's start
# routine. (The deleter's type is void (*)(DLManagedTensorVersioned *), a start routine's is
# void *(*)(void *): the argument travels the same way, and the return value is never read.)
function delete_on_foreign_threads(exports)
    threads = [Ref{UInt}(0) for _ in exports]
    for (thread, p) in zip(threads, exports)
        ccall(:pthread_create, Cint, (Ptr{UInt}, Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Cvoid}),
              thread, C_NULL, deleter_of(p), p) == 0 || error("pthread_create failed")
    end
    for thread in threads
        ccall(:pthread_join, Cint, (UInt, Ptr{Cvoid}), thread[], C_NULL) == 0 ||
            error("pthread_join failed")
    end
end

@testset "a shared array lives until the consumer lets go" begin
    full_gc()
    DLBridge.collect_released()
    weak, p = share_and_export(1000)
    full_gc()
    @test alive(weak)
    @test DLBridge.collect_released() == 0
    ccall(deleter_of(p), Cvoid, (Ptr{Cvoid},), p)
    @test DLBridge.collect_released() == 1
    full_gc()
    @test !alive(weak)
end

@testset "releases on foreign threads are collected on Julia's thread" begin
    full_gc()
    DLBridge.collect_released()
    shared = [share_and_export(100 + i) for i in 1:8]
    full_gc()
    rooted = DLBridge.shared_count()
    delete_on_foreign_threads(last.(shared))
    @test length(DLBridge.ROOTS) == rooted  # nothing ran on those threads but the queue
    DLBridge.arange(Int8, 1)  # any DLBridge call collects the releases
    @test length(DLBridge.ROOTS) == rooted - 8
    full_gc()
    @test !any(alive, first.(shared))
end

@noinline function wrap_shared(holder)
    A = collect(1.0:6.0)
    holder[1] = DLBridge.wrap(DLBridge.share(A))
    return WeakRef(A)
end

@testset "arrays wrapped over a shared array keep it alive" begin
    holder = Any[nothing]
    weak = wrap_shared(holder)
    full_gc()
    DLBridge.collect_released()
    full_gc()
    @test alive(weak)
    @test held_equals(holder, 1, 1.0:6.0)
    holder[1] = nothing
    full_gc()
    DLBridge.collect_released()
    full_gc()
    @test !alive(weak)
end

# Shares and wraps on every Julia thread at once (JULIA_NUM_THREADS; serially with one thread).
@noinline function share_on_threads(n)
    weaks = Vector{WeakRef}(undef, n)
    ok = fill(false, n)
    Threads.@threads for i in 1:n
        A = fill(Float64(i), 16)
        t = DLBridge.share(A)
        ok[i] = DLBridge.wrap(t)[16] == i
        weaks[i] = WeakRef(A)
        finalize(t)
    end
    return weaks, all(ok)
end

@testset "share and wrap on $(Threads.nthreads()) Julia threads" begin
    weaks, ok = share_on_threads(400)
    @test ok
    full_gc()
    DLBridge.collect_released()
    full_gc()
    @test !any(alive, weaks)
end

# Keeping shared Julia arrays alive: a root per `share`d array, keyed by a token, until the C
# library's release queue hands the token back.
#
# A consumer may drop the last reference to a shared tensor on any thread, including threads
# Julia did not start, where entering Julia (a `@cfunction`) crashes Julia 1.5. So the release
# runs no Julia code: libdlbridge records the token in a queue (dlb_tensor_from_memory_queued),
# and DLBridge drains that queue on its own thread, on every DLBridge call and in
# `collect_released()`, and unroots those arrays.

const RELEASE_QUEUE = Ref{Ptr{Cvoid}}(C_NULL)
const ROOTS = Dict{UInt64,Any}()
const ROOTS_LOCK = ReentrantLock()
const NEXT_TOKEN = Ref{UInt64}(0)
const DRAIN_BUFFER = Vector{UInt64}(undef, 64)

# Creates this process's release queue (at `__init__`; it lives as long as the process).
function open_release_queue()
    out = Ref{Ptr{Cvoid}}(C_NULL)
    check(dlb_release_queue_new(out))
    RELEASE_QUEUE[] = out[]
    return nothing
end

# Keeps `A` alive until its token comes back through the release queue; returns the token.
function root!(A)
    lock(ROOTS_LOCK)
    try
        token = NEXT_TOKEN[] += 1
        ROOTS[token] = A
        return token
    finally
        unlock(ROOTS_LOCK)
    end
end

# Drops the root of a tensor that was never made.
function unroot!(token::UInt64)
    lock(ROOTS_LOCK)
    try
        delete!(ROOTS, token)
    finally
        unlock(ROOTS_LOCK)
    end
    return nothing
end

"""
    DLBridge.collect_released() -> Int

Unroots every Julia array whose shared tensor has been released by all its consumers since the
last call (on any thread), so the garbage collector can free it; returns how many. Every
DLBridge call that makes, wraps, imports or exports a tensor does this first, so calling it is
only needed to free memory promptly while no such call happens.
"""
function collect_released()
    released = 0
    lock(ROOTS_LOCK)
    try
        n = Ref{Csize_t}(0)
        while true
            check(dlb_release_queue_drain(RELEASE_QUEUE[], DRAIN_BUFFER, length(DRAIN_BUFFER), n))
            for i in 1:n[]
                delete!(ROOTS, DRAIN_BUFFER[i])
            end
            released += Int(n[])
            n[] < length(DRAIN_BUFFER) && break
        end
    finally
        unlock(ROOTS_LOCK)
    end
    return released
end

"""
    DLBridge.shared_count() -> Int

How many Julia arrays DLBridge keeps alive for consumers of [`DLBridge.share`](@ref)d tensors
(after unrooting the released ones, as [`DLBridge.collect_released`](@ref) does).
"""
function shared_count()
    collect_released()
    lock(ROOTS_LOCK)
    try
        return length(ROOTS)
    finally
        unlock(ROOTS_LOCK)
    end
end

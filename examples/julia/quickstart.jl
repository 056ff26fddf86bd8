# A starting point for Julia: Rust-owned memory seen as a Julia array, and a Julia array handed
# out as a DLPack tensor, both without copies. Run it with the project's Julia and DLBridge on
# the load path (docs/julia.md):
#   JULIA_LOAD_PATH="$PWD/bindings/julia:" "$(scripts/install-julia.sh)" examples/julia/quickstart.jl
using DLBridge

t = DLBridge.arange(Float32, 6)        # memory the Rust core allocated
B = DLBridge.wrap(t)                   # a Vector{Float32} over it
B[6] = 50
println(B, " ", DLBridge.wrap(t)[6])   # a second wrap sees the write: the same memory

A = [1.0 2.0 3.0; 4.0 5.0 6.0]
s = DLBridge.share(A)                  # a row-major tensor over A's memory (dims reversed)
C = DLBridge.wrap(s)                   # and back: A's own memory
println(size(s), " ", strides(s), " ", pointer(C) == pointer(A))

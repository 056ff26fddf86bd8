# Julia hop of the demo: map the segment, report, add 1 to element `mark` (row-major).
using DLBridge

function hop(handle, mark)
    t = DLBridge.from_shared(handle; writable=true)
    B = DLBridge.wrap(t)            # column-major view with reversed dims: B[j, i] == T[i, j]
    flat = vec(B)                   # row-major order of the DLPack tensor
    checksum = sum(Float64(v) * i for (i, v) in enumerate(flat))
    flat[mark + 1] += 1
    addr = UInt(pointer(B))
    println("{\"runtime\": \"julia\", \"address\": $addr, \"copied\": $(DLBridge.iscopied(t)), \"checksum\": $checksum}")
end

hop(ARGS[1], parse(Int, ARGS[2]))

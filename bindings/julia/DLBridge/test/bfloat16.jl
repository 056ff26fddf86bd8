# DLBridge.BFloat16: one rounding from every source type, comparisons, sorting and hashing as
# the Float32 it stands for.
const BF = DLBridge.BFloat16
bf_bits(x::BF) = reinterpret(UInt16, x)
bf_from_bits(b::UInt16) = reinterpret(BF, b)

# Whether `b` is the BFloat16 nearest to finite `x`, ties to the even bit pattern: checked
# against both neighbours of `b` in Float64, where every BFloat16 value is exact.
function nearest_even(x::Float64, b::BF)
    isinf(Float32(b)) && return abs(x) >= 0x1.ffp127  # (2 - 2^-8) * 2^127 rounds up to Inf
    d = abs(Float64(b) - x)
    for n in (bf_bits(b) - 0x0001, bf_bits(b) + 0x0001)
        neighbour = bf_from_bits(n)
        signbit(neighbour) == signbit(b) && isfinite(Float32(neighbour)) || continue
        dn = abs(Float64(neighbour) - x)
        dn < d && return false
        dn == d && isodd(bf_bits(b)) && return false
    end
    return true
end

@testset "Float64 converts with one rounding, to nearest even" begin
    @test Float32(BF(1 + 2.0^-8 + 2.0^-40)) == 1.0078125f0  # a tie plus a sticky bit: up
    @test Float32(BF(1 + 2.0^-8)) == 1.0f0                   # an exact tie: to even (down)
    @test Float32(BF(1 + 3 * 2.0^-8)) == 1.015625f0          # an exact tie: to even (up)
    @test Float32(BF(-(1 + 2.0^-8 + 2.0^-40))) == -1.0078125f0
    @test bf_bits(BF(0.0)) == 0x0000 && bf_bits(BF(-0.0)) == 0x8000
    @test bf_bits(BF(Inf)) == 0x7f80 && bf_bits(BF(-Inf)) == 0xff80
    @test isnan(BF(NaN)) && signbit(BF(-NaN)) && !signbit(BF(NaN))
    @test bf_bits(BF(0x1.fep127)) == 0x7f7f                  # the largest finite value
    @test bf_bits(BF(0x1.ff0000001p127)) == 0x7f80           # past the midpoint to Inf
    @test bf_bits(BF(0x1.ffp127)) == 0x7f80                  # the tie goes to Inf (even)
    @test bf_bits(BF(2.0^-133)) == 0x0001                    # the smallest subnormal
    @test bf_bits(BF(2.0^-134)) == 0x0000                    # its half: a tie, to zero (even)
    @test bf_bits(BF(2.0^-134 + 2.0^-160)) == 0x0001         # just past the half: up
    @test bf_bits(BF(1e-300)) == 0x0000 && bf_bits(BF(-1e300)) == 0xff80
    seed = UInt64(0x9e3779b97f4a7c15)
    checked = 0
    for i in 1:20000
        seed = seed * 0x5851f42d4c957f2d + 0x14057b7ef767814f
        # Random mantissas over exponents from below BFloat16's subnormals to past its range.
        x = ldexp(1.0 + (seed >> 12) / 2.0^52, Int(seed % 280) - 140) * (isodd(i) ? -1 : 1)
        b = BF(x)
        nearest_even(x, b) || (@test nearest_even(x, b); break)
        checked += 1
    end
    @test checked == 20000
end

@testset "Float32, Float16 and integers also round once" begin
    @test Float32(BF(1.0078125f0)) == 1.0078125f0
    @test Float32(BF(Float16(3.5))) == 3.5f0
    @test Float32(BF(257)) == 256.0f0 && Float32(BF(259)) == 260.0f0
    # 2^62 + 2^54 + 1: through Float64 it would become the tie 2^62 + 2^54, then 2^62.
    @test Float64(BF(2^62 + 2^54 + 1)) == 2.0^62 + 2.0^55
    @test Float64(BF(big(2)^200 + 1)) == Inf  # past the range
    @test BF(BF(2.5)) === BF(2.5)
end

@testset "comparisons, sort and hash follow Float32" begin
    xs = BF.([3.0, -1.5, 0.0, NaN, -Inf, 2.25, -0.0, Inf])
    @test BF(1.0) < BF(2.0) && !(BF(2.0) < BF(1.0)) && BF(2.0) <= BF(2.0)
    @test !(BF(NaN) < BF(1.0)) && !(BF(1.0) < BF(NaN)) && !(BF(NaN) <= BF(NaN))
    @test isless(BF(1.0), BF(NaN)) && !isless(BF(NaN), BF(1.0)) && isless(BF(-0.0), BF(0.0))
    @test BF(1.5) < 2 && BF(1.5) > 1.25 && 1.0 < BF(1.5)
    sorted = sort(xs)
    @test Float32.(sorted[1:7]) == Float32[-Inf, -1.5, -0.0, 0.0, 2.25, 3.0, Inf]
    @test signbit(sorted[3]) && !signbit(sorted[4]) && isnan(sorted[8])
    @test Float32.(sort(xs[[1, 2, 6]]; rev = true)) == Float32[3.0, 2.25, -1.5]
    @test maximum(BF.([1.0, 4.0, 2.0])) === BF(4.0)
    @test hash(BF(1.5)) == hash(1.5f0) == hash(1.5) && hash(BF(2.0)) == hash(2)
    @test hash(BF(0.0)) != hash(BF(-0.0))  # like Float32: isequal(0.0, -0.0) is false
    @test length(Set(BF.([1.0, 1.0, 2.0]))) == 2 && BF(2.0) in Set([2.0])
    @test Dict(BF(1.5) => :a)[BF(1.5)] === :a
end

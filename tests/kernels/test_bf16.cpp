// The bf16 element type (kernels/bf16.hpp), exhaustively, with the conversions run in kernels on
// the execution space under test: every one of the 65536 bit patterns decodes exactly and
// survives float -> bf16 unchanged (signalling NaNs come back quiet); and float -> bf16 agrees
// with a float64 reference (scale to the bf16 grid, nearbyint ties to even, scale back) on every
// bf16 value, every midpoint between neighbours, the floats just below and above each midpoint,
// the neighbours of every bf16 value, NaNs with payloads, overflow and subnormals, plus a million
// random floats.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "bf16.hpp"
#include "kernel_test_util.hpp"

namespace {

using kformer::kernels::bf16;
using ktest::Exec;

float float_of_bits(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// The value a bf16 bit pattern stands for, decoded from its fields (not by shifting into a
// float): sign, 8-bit exponent with bias 127, 7-bit mantissa; exponent 0 is subnormal.
double decode(std::uint16_t b) {
  const int sign = b >> 15, e = (b >> 7) & 0xff, m = b & 0x7f;
  double v;
  if (e == 0xff)
    v = m ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else if (e == 0)
    v = std::ldexp(m / 128.0, -126);
  else
    v = std::ldexp(1.0 + m / 128.0, e - 127);
  return sign ? -v : v;
}

// Round-to-nearest-even of a finite float x onto the bf16 grid, in float64: the grid spacing at
// |x| is 2^(floor(log2 |x|) - 7) for normals and 2^-133 below 2^-126; past the largest bf16 (the
// tie at 2^128 included, its even neighbour being 2^128) the result is inf.
double reference(double x) {
  if (x == 0) return x;
  int e = 0;
  std::frexp(std::fabs(x), &e);  // |x| = f 2^e, f in [0.5, 1)
  const double ulp = std::ldexp(1.0, std::max(e - 1, -126) - 7);
  double r = std::nearbyint(std::fabs(x) / ulp) * ulp;  // default rounding mode: ties to even
  if (r >= std::ldexp(1.0, 128)) r = std::numeric_limits<double>::infinity();
  return std::copysign(r, x);
}

// float -> bf16 -> float in a kernel on Exec: returns the bf16 bits and the float read back.
struct Converted {
  std::vector<std::uint16_t> bits;
  std::vector<float> back;
};
Converted convert(const std::vector<float>& in) {
  const std::size_t n = in.size();
  ktest::View<float*> x("x", n), y("y", n);
  ktest::View<std::uint16_t*> b("b", n);
  Kokkos::deep_copy(x, Kokkos::View<const float*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(in.data(), n));
  Kokkos::parallel_for(
      "test_bf16_convert", Kokkos::RangePolicy<Exec>(0, n), KOKKOS_LAMBDA(const std::size_t i) {
        const bf16 h(x(i));
        b(i) = h.bits;
        y(i) = h;
      });
  Kokkos::fence();
  Converted c{std::vector<std::uint16_t>(n), std::vector<float>(n)};
  Kokkos::deep_copy(Kokkos::View<std::uint16_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(c.bits.data(), n), b);
  Kokkos::deep_copy(Kokkos::View<float*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(c.back.data(), n), y);
  return c;
}

// Checks every conversion of `in` against the reference; returns the number of wrong results
// and reports the first few.
std::size_t wrong_roundings(const std::vector<std::uint32_t>& in_bits) {
  std::vector<float> in(in_bits.size());
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = float_of_bits(in_bits[i]);
  const Converted c = convert(in);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < in.size(); ++i) {
    const double x = in[i], got = decode(c.bits[i]);
    bool ok;
    if (std::isnan(x)) {  // a NaN of the same sign, quiet, with the float's top payload bits
      const std::uint16_t top = static_cast<std::uint16_t>(in_bits[i] >> 16);
      ok = std::isnan(got) && (c.bits[i] & 0x0040) && (c.bits[i] & ~0x0040) == (top & ~0x0040);
    } else {
      const double ref = reference(x);
      ok = got == ref && std::signbit(got) == std::signbit(ref);
    }
    // The float read back is the bf16's value exactly.
    ok = ok && (std::isnan(got) ? std::isnan(c.back[i]) : double(c.back[i]) == got);
    if (!ok && ++wrong <= 5)
      ADD_FAILURE() << std::hex << "float 0x" << in_bits[i] << " (" << x << ") -> bf16 0x" << c.bits[i] << " ("
                    << got << "), reference " << reference(x);
  }
  return wrong;
}

TEST(Bf16, EveryBitPatternDecodesExactlyAndRoundTrips) {
  std::vector<float> in(65536);
  for (std::uint32_t b = 0; b < 65536; ++b) in[b] = float_of_bits(b << 16);
  const Converted c = convert(in);
  std::size_t wrong = 0, nans = 0;
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const double v = decode(static_cast<std::uint16_t>(b));
    const bool nan = std::isnan(v);
    nans += nan;
    // Back from float: the same bits, except that a signalling NaN comes back quiet.
    const std::uint16_t expect = static_cast<std::uint16_t>(nan ? b | 0x0040 : b);
    const float direct = bf16::from_bits(static_cast<std::uint16_t>(b));  // on the host
    const bool ok = c.bits[b] == expect && (nan ? std::isnan(c.back[b]) && std::isnan(direct)
                                                : double(c.back[b]) == v && double(direct) == v) &&
                    std::signbit(c.back[b]) == bool(b >> 15);
    if (!ok && ++wrong <= 5)
      ADD_FAILURE() << std::hex << "bf16 0x" << b << " -> float " << c.back[b] << " -> bf16 0x" << c.bits[b];
  }
  EXPECT_EQ(wrong, 0u);
  EXPECT_EQ(nans, 2u * 127u);  // exponent 0xff with a nonzero 7-bit mantissa, both signs
}

TEST(Bf16, MidpointsAndTheirNeighboursRoundToNearestEven) {
  // For every bf16 pattern b (both signs, subnormals, the largest finite value whose upper
  // midpoint overflows, inf and NaN exponents): b itself and the floats b + {1, 0x7fff, 0x8000
  // (the midpoint to the next pattern), 0x8001, 0xffff} in the low 16 bits.
  std::vector<std::uint32_t> in;
  for (std::uint32_t b = 0; b < 65536; ++b)
    for (std::uint32_t low : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu}) in.push_back(b << 16 | low);
  EXPECT_EQ(wrong_roundings(in), 0u);
}

TEST(Bf16, SpecialValuesRoundAsIeeeSays) {
  const float inf = std::numeric_limits<float>::infinity(), fmax = std::numeric_limits<float>::max();
  const float bmax = float(std::numeric_limits<bf16>::max()), half_ulp_at_max = std::ldexp(1.0f, 127 - 8);
  struct Case {
    float x;
    float expect;
  };
  const Case cases[] = {
      {fmax, inf},                                              // overflow
      {-fmax, -inf},
      {bmax + half_ulp_at_max, inf},                            // the tie above the largest: even is inf
      {std::nextafter(bmax + half_ulp_at_max, 0.0f), bmax},     // just below that tie
      {std::numeric_limits<float>::denorm_min(), 0.0f},         // 2^-149 << half of bf16's 2^-133
      {-std::numeric_limits<float>::denorm_min(), -0.0f},
      {std::ldexp(1.0f, -134), 0.0f},                           // half of bf16's denorm_min: tie to even 0
      {std::ldexp(1.5f, -134), std::ldexp(1.0f, -133)},         // above it
      {std::ldexp(3.0f, -134), std::ldexp(2.0f, -133)},         // 1.5 denorm_min: tie to even (2)
      {std::numeric_limits<float>::min(), std::numeric_limits<float>::min()},  // 2^-126 is a bf16
      {1.0f + std::ldexp(1.0f, -8), 1.0f},                      // tie between 1 and 1 + 2^-7: even is 1
      {1.0f + std::ldexp(3.0f, -8), 1.0f + std::ldexp(1.0f, -6)},  // tie: even is the upper
  };
  for (const Case& c : cases) {
    const bf16 h(c.x);
    EXPECT_EQ(float(h), c.expect) << c.x;
    EXPECT_EQ(std::signbit(float(h)), std::signbit(c.expect)) << c.x;
  }
  EXPECT_EQ(float(std::numeric_limits<bf16>::max()), 0x1.fep127f);
  EXPECT_EQ(float(std::numeric_limits<bf16>::min()), std::numeric_limits<float>::min());
  EXPECT_EQ(float(std::numeric_limits<bf16>::denorm_min()), std::ldexp(1.0f, -133));
  EXPECT_EQ(float(std::numeric_limits<bf16>::epsilon()), std::ldexp(1.0f, -7));
  EXPECT_EQ(float(std::numeric_limits<bf16>::lowest()), -0x1.fep127f);
  EXPECT_EQ(float(std::numeric_limits<bf16>::infinity()), inf);
  EXPECT_TRUE(std::isnan(float(std::numeric_limits<bf16>::quiet_NaN())));
}

TEST(Bf16, NaNsWithPayloadsStayQuietNaNs) {
  std::mt19937_64 rng(ktest::fresh_seed());
  std::vector<std::uint32_t> in = {0x7f800001u, 0x7f80ffffu, 0x7fbfffffu, 0x7fc00000u, 0x7fffffffu,
                                   0xff800001u, 0xffc00001u, 0xff80ffffu, 0xffffffffu};
  for (int i = 0; i < 100000; ++i) {  // random payloads, both signs, signalling and quiet
    const std::uint32_t payload = static_cast<std::uint32_t>(rng()) & 0x007fffffu;
    in.push_back((static_cast<std::uint32_t>(rng()) & 0x80000000u) | 0x7f800000u | (payload ? payload : 1u));
  }
  EXPECT_EQ(wrong_roundings(in), 0u);
}

TEST(Bf16, RandomFloatsMatchTheReference) {
  std::mt19937_64 rng(ktest::fresh_seed());
  std::vector<std::uint32_t> in(1 << 20);
  for (auto& u : in) u = static_cast<std::uint32_t>(rng());
  EXPECT_EQ(wrong_roundings(in), 0u);
}

// v(i) = bf16(v(i) * i) on the device (outside a test body: CUDA's device lambdas may not live in
// GoogleTest's private TestBody).
void scale_by_index(const ktest::View<bf16*>& v) {
  Kokkos::parallel_for(
      "test_bf16_arith", Kokkos::RangePolicy<Exec>(0, v.extent(0)),
      KOKKOS_LAMBDA(const int i) { v(i) = bf16(v(i) * float(i)); });
  Kokkos::fence();
}

TEST(Bf16, ViewsHoldZerosAndTakeValues) {
  ktest::View<bf16*> v("v", 5);  // value-initialised: +0
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(h(i).bits, 0);
  Kokkos::deep_copy(v, bf16(1.5f));
  scale_by_index(v);
  Kokkos::deep_copy(h, v);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(float(h(i)), 1.5f * i);
  EXPECT_EQ(kformer::kernels::round_to_bf16(1.0f + std::ldexp(1.0f, -9)), 1.0f);
}

}  // namespace

// bfloat16, the element type of bf16 mixed precision (train.precision=bf16): the top 16 bits of
// an IEEE float (sign, 8 exponent bits, 7 mantissa bits). Kokkos 3.4 has no bhalf_t and 4.x's is
// not in 3.4, so kformer carries its own: just the 16 bits, the same code on host and device
// (integer operations only, so nvcc needs no __nv_bfloat16 and no CUDA header).
//
// float -> bf16 rounds to nearest, ties to even, on the bit pattern: exact for normals,
// subnormals (bf16 has float's exponent range, so its subnormals are float's with the low 16
// bits cut) and infinities; a finite value that rounds past the largest bf16 becomes inf; a NaN
// stays a NaN of the same sign, made quiet (a payload only in the low 16 bits would otherwise
// round to inf). bf16 -> float is exact (16 zero bits appended). Arithmetic goes through float:
// the conversion to float is implicit, the one from float explicit, so that every rounding to
// bf16 is written where it happens.
//
// comm/ maps the type to DType::bf16 by its `is_bfloat16` marker (comm knows no kernels/).
#pragma once

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <cstring>
#include <limits>

namespace kformer::kernels {

namespace detail {
KOKKOS_INLINE_FUNCTION std::uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}
KOKKOS_INLINE_FUNCTION float bits_float(std::uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}
}  // namespace detail

// Round-to-nearest-even float -> bf16 bits (see the file comment).
KOKKOS_INLINE_FUNCTION std::uint16_t bf16_bits_from_float(float f) {
  const std::uint32_t u = detail::float_bits(f);
  // Adding 0x7fff rounds up exactly the values above the midpoint; the lowest kept bit adds one
  // more on a tie, so ties go to the even neighbour. A carry out of the mantissa moves to the next
  // binade (or to inf past the largest finite value), which is the right answer. A NaN is made
  // quiet instead. Both are computed and one selected, without a branch, so that loops storing
  // bf16 vectorise.
  const std::uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const std::uint32_t quiet_nan = (u >> 16) | 0x0040u;
  return static_cast<std::uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}

KOKKOS_INLINE_FUNCTION float bf16_bits_to_float(std::uint16_t b) {
  return detail::bits_float(static_cast<std::uint32_t>(b) << 16);
}

struct bf16 {
  static constexpr bool is_bfloat16 = true;  // the marker comm/views.hpp looks for
  std::uint16_t bits;

  struct BitsTag {};

  bf16() = default;  // uninitialised like float; bf16{} and value-initialised Views hold +0
  KOKKOS_INLINE_FUNCTION explicit bf16(float f) : bits(bf16_bits_from_float(f)) {}
  KOKKOS_INLINE_FUNCTION constexpr bf16(std::uint16_t b, BitsTag) : bits(b) {}
  KOKKOS_INLINE_FUNCTION constexpr static bf16 from_bits(std::uint16_t b) { return bf16(b, BitsTag{}); }
  KOKKOS_INLINE_FUNCTION operator float() const { return bf16_bits_to_float(bits); }
};

static_assert(sizeof(bf16) == 2 && alignof(bf16) == 2, "bf16 must be exactly 16 bits");

// Rounds v to the nearest bf16 and back: the value a bf16 copy of v holds.
KOKKOS_INLINE_FUNCTION float round_to_bf16(float v) { return float(bf16(v)); }

}  // namespace kformer::kernels

// numeric_limits, as for float, so that generic code (test poisoning, reductions' identities)
// works on bf16 Views too.
namespace std {
template <>
struct numeric_limits<kformer::kernels::bf16> {
  using T = kformer::kernels::bf16;

  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = true;
  static constexpr bool is_integer = false;
  static constexpr bool is_exact = false;
  static constexpr bool has_infinity = true;
  static constexpr bool has_quiet_NaN = true;
  static constexpr bool has_signaling_NaN = true;
  static constexpr std::float_denorm_style has_denorm = std::denorm_present;
  static constexpr std::float_round_style round_style = std::round_to_nearest;
  static constexpr bool is_iec559 = false;
  static constexpr int radix = 2;
  static constexpr int digits = 8;  // 7 stored bits + the implicit one
  static constexpr int min_exponent = -125, max_exponent = 128;
  static constexpr T min() noexcept { return T::from_bits(0x0080); }
  static constexpr T max() noexcept { return T::from_bits(0x7f7f); }
  static constexpr T lowest() noexcept { return T::from_bits(0xff7f); }
  static constexpr T epsilon() noexcept { return T::from_bits(0x3c00); }  // 2^-7
  static constexpr T round_error() noexcept { return T::from_bits(0x3f00); }  // 0.5
  static constexpr T infinity() noexcept { return T::from_bits(0x7f80); }
  static constexpr T quiet_NaN() noexcept { return T::from_bits(0x7fc0); }
  static constexpr T signaling_NaN() noexcept { return T::from_bits(0x7fa0); }
  static constexpr T denorm_min() noexcept { return T::from_bits(0x0001); }
};
}  // namespace std

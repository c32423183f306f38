// exp(x) for float without a library call: Cephes-style range reduction and a degree-6
// polynomial, branch-free so the host compiler vectorises loops that call it (glibc's expf is
// a scalar call unless -ffast-math, which kformer does not use). Relative error ~2 ulp over the
// normal range; 0 below -87.3 (where expf would return a denormal or 0), +inf above 88.3.
// Used by the softmax-like kernels (attention, causal softmax) and the activations.
#pragma once

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <cstring>

namespace kformer::kernels::detail {

KOKKOS_INLINE_FUNCTION float fast_exp(float x) {
  constexpr float kLog2e = 1.44269504088896341f, kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding and subtracting rounds to nearest
  const float xc = x < -87.3f ? -87.3f : (x > 88.3f ? 88.3f : x);  // keeps 2^n normal
  const float n = (xc * kLog2e + kRound) - kRound;
  const float r = (xc - n * kLn2Hi) - n * kLn2Lo;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.f;
  const std::int32_t bits = (static_cast<std::int32_t>(n) + 127) << 23, inf_bits = 0x7f800000;
  float scale, inf;
  std::memcpy(&scale, &bits, sizeof scale);
  std::memcpy(&inf, &inf_bits, sizeof inf);
  const float y = p * scale;
  return x < -87.3f ? 0.f : (x > 88.3f ? inf : y);
}

}  // namespace kformer::kernels::detail

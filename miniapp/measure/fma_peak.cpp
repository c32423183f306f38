// The FMA peak benchmark (see fma_peak.hpp).
#include "measure/fma_peak.hpp"

#include <Kokkos_Core.hpp>
#include <Kokkos_Timer.hpp>

#include <algorithm>

#include "platform/device.hpp"
#include "gemm_micro_kernel.hpp"  // KFORMER_UNROLL

namespace kformer {
namespace {

// One work item: Chains independent chains of `iters` FMAs each. m and a arrive at run time (so
// nothing folds), and the sum of the chains is stored (so nothing is dead). m < 1 keeps the values
// bounded: x tends to a / (1 - m), never to infinity or a denormal.
template <int Chains>
struct FmaChains {
  Kokkos::View<float*, Mem> out;
  int iters;
  float m, a;
  KOKKOS_INLINE_FUNCTION void operator()(const int i) const {
    float x[Chains];
    KFORMER_UNROLL
    for (int c = 0; c < Chains; ++c) x[c] = 1.0f + 1e-3f * float(c) + 1e-7f * float(i);
    for (int k = 0; k < iters; ++k) {
      KFORMER_UNROLL
      for (int c = 0; c < Chains; ++c) x[c] = x[c] * m + a;
    }
    float s = 0;
    KFORMER_UNROLL
    for (int c = 0; c < Chains; ++c) s += x[c];
    out(i) = s;
  }
};

template <int Chains>
FmaPeak time_chains(long items, double target_ms, float m, float a) {
  Exec exec;
  Kokkos::View<float*, Mem> out("fma_peak_out", items);
  const auto run = [&](int iters) {
    exec.fence();
    Kokkos::Timer t;
    Kokkos::parallel_for("kformer::fma_peak", Kokkos::RangePolicy<Exec>(exec, 0, items),
                         FmaChains<Chains>{out, iters, m, a});
    exec.fence();
    return t.seconds();
  };
  // Size the launch from a short one, then keep the best of three.
  int iters = 256;
  const double probe = run(iters);
  iters = int(std::min(1e7, std::max(256.0, iters * (target_ms * 1e-3) / std::max(probe, 1e-7))));
  double best = 1e30;
  for (int rep = 0; rep < 3; ++rep) best = std::min(best, run(iters));
  FmaPeak p;
  p.tflops = 2.0 * Chains * double(iters) * double(items) / best / 1e12;
  p.chains = Chains;
  p.work_items = items;
  p.seconds = best;
  return p;
}

}  // namespace

FmaPeak measure_fma_peak(double target_ms) {
  // On a CPU one work item per thread; on a GPU as many as it holds resident.
  const long items = std::max<long>(1, Exec().concurrency());
  const float m = 0.999999f, a = 1e-6f;
  FmaPeak best;
  const auto keep = [&](const FmaPeak& p) {
    if (p.tflops > best.tflops) best = p;
  };
#if defined(KOKKOS_ENABLE_CUDA)
  keep(time_chains<4>(items, target_ms, m, a));
  keep(time_chains<8>(items, target_ms, m, a));
#else
  // 8 vector registers of chains cover 2 FMA ports x 4 cycles of latency; 16 lanes (AVX-512)
  // x 8 = 128, 8 lanes (AVX2) x 8 = 64. More chains than registers spill: try both.
  keep(time_chains<64>(items, target_ms, m, a));
  keep(time_chains<128>(items, target_ms, m, a));
#endif
  return best;
}

}  // namespace kformer

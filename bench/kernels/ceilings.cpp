// Ceilings and the shared benchmark loops (see ceilings.hpp).
#include "ceilings.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace kformer::bench {
namespace {

double fenced_seconds(const std::function<void()>& f) {
  Kokkos::Timer timer;
  f();
  Exec().fence();
  return timer.seconds();
}

// The q-quantile (0 <= q <= 1) of v by linear interpolation; NaN for an empty v.
double quantile(std::vector<double> v, double q) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(v.begin(), v.end());
  const double pos = q * double(v.size() - 1);
  const std::size_t lo = static_cast<std::size_t>(pos);
  const std::size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - double(lo)) * (v[hi] - v[lo]);
}

// One untimed call of f (first touch, lazily created handles); false, with the case marked
// skipped and the reason shown, when f throws (kernels.gemm=vendor in a build without BLAS).
bool warm_up(benchmark::State& state, const std::function<void()>& f) {
  try {
    f();
    Exec().fence();
    return true;
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return false;
  }
}

void set_rate_counters(benchmark::State& state, double total_seconds, double flops, double bytes) {
  const double per_call = total_seconds / static_cast<double>(state.iterations());
  if (flops > 0) state.counters["gflops"] = flops / per_call * 1e-9;
  if (bytes > 0) state.counters["gbps"] = bytes / per_call * 1e-9;
}

}  // namespace

double median_seconds(const std::function<void()>& f, int reps) {
  f();
  Exec().fence();
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) t.push_back(fenced_seconds(f));
  return quantile(t, 0.5);
}

double copy_bandwidth_gbps() {
  static double bw = [] {
    const std::int64_t n = std::int64_t(1) << 26;  // 256 MiB per buffer
    Kokkos::View<float*, Exec::memory_space> a("copy_a", n), b("copy_b", n);
    Kokkos::deep_copy(a, 1.0f);
    const double s = median_seconds([&] {
      Kokkos::parallel_for(
          "kformer::bench::copy", Kokkos::RangePolicy<Exec>(0, n), KOKKOS_LAMBDA(const std::int64_t i) { b(i) = a(i); });
    });
    return 2.0 * n * sizeof(float) / s * 1e-9;
  }();
  return bw;
}

void run_case(benchmark::State& state, const std::function<void()>& f, double flops, double bytes) {
  if (!warm_up(state, f)) return;
  double total = 0;
  for (auto _ : state) {
    const double s = fenced_seconds(f);
    state.SetIterationTime(s);
    total += s;
  }
  set_rate_counters(state, total, flops, bytes);
  state.counters["vs_ceiling"] = bytes / (total / static_cast<double>(state.iterations())) * 1e-9 /
                                 copy_bandwidth_gbps();
}

void run_case(benchmark::State& state, const std::function<void()>& f, double flops, double bytes,
              const Reference& ref) {
  bool have_ref = true;
  try {
    ref.run();  // warm-up, and the test whether a vendor library is there
    Exec().fence();
  } catch (const std::exception&) {
    have_ref = false;
  }
  if (!warm_up(state, f)) return;
  double total = 0;
  std::vector<double> ratio, ref_gflops;
  bool ref_first = true;
  for (auto _ : state) {
    double t_ref = 0;
    if (have_ref && ref_first) t_ref = fenced_seconds(ref.run);
    const double s = fenced_seconds(f);
    if (have_ref && !ref_first) t_ref = fenced_seconds(ref.run);
    ref_first = !ref_first;
    state.SetIterationTime(s);
    total += s;
    if (have_ref) {
      ref_gflops.push_back(ref.flops / t_ref * 1e-9);
      ratio.push_back((flops / s) / (ref.flops / t_ref));
    }
  }
  set_rate_counters(state, total, flops, bytes);
  state.counters["ceiling_gflops"] = quantile(ref_gflops, 0.5);
  state.counters["vs_ceiling"] = quantile(ratio, 0.5);
  state.counters["vs_q1"] = quantile(ratio, 0.25);
  state.counters["vs_q3"] = quantile(ratio, 0.75);
}

benchmark::internal::Benchmark* add_case(const std::string& name, std::function<void(benchmark::State&)> fn,
                                         double min_time) {
  return benchmark::RegisterBenchmark(name.c_str(), [fn](benchmark::State& s) { fn(s); })
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond)
      ->MinTime(min_time);
}

}  // namespace kformer::bench

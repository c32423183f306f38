// Ceilings and the shared benchmark loop (see ceilings.hpp).
#include "ceilings.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <vector>

namespace kformer::bench {

double median_seconds(const std::function<void()>& f, int reps) {
  f();
  Exec().fence();
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    Kokkos::Timer timer;
    f();
    Exec().fence();
    t.push_back(timer.seconds());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

double ceiling_gflops(const std::string& key, double flops, const std::function<void()>& run) {
  static std::map<std::string, double> cache;
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  double g = std::numeric_limits<double>::quiet_NaN();
  try {
    g = flops / median_seconds(run) * 1e-9;
  } catch (const std::exception&) {
  }
  return cache[key] = g;
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

void run_case(benchmark::State& state, const std::function<void()>& f, double flops, double bytes,
              double ceiling_gflops_value) {
  f();  // warm-up: first-touch, lazily created handles
  Exec().fence();
  double total = 0;
  for (auto _ : state) {
    Kokkos::Timer timer;
    f();
    Exec().fence();
    const double s = timer.seconds();
    state.SetIterationTime(s);
    total += s;
  }
  const double per_call = total / static_cast<double>(state.iterations());
  const double gflops = flops / per_call * 1e-9, gbps = bytes / per_call * 1e-9;
  if (flops > 0) state.counters["gflops"] = gflops;
  if (bytes > 0) state.counters["gbps"] = gbps;
  state.counters["vs_ceiling"] = ceiling_gflops_value > 0 || std::isnan(ceiling_gflops_value)
                                     ? gflops / ceiling_gflops_value
                                     : gbps / copy_bandwidth_gbps();
}

benchmark::internal::Benchmark* add_case(const std::string& name, std::function<void(benchmark::State&)> fn) {
  return benchmark::RegisterBenchmark(name.c_str(), [fn](benchmark::State& s) { fn(s); })
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond)
      ->MinTime(0.3);
}

}  // namespace kformer::bench

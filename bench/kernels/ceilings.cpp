// Ceilings and the shared benchmark loops (see ceilings.hpp).
#include "ceilings.hpp"

#include "crash_report.hpp"

#include <algorithm>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

namespace kformer::bench {
namespace {

// Seconds of `calls` calls of f and one fence after them.
double fenced_seconds(const std::function<void()>& f, int calls = 1) {
  Kokkos::Timer timer;
  for (int i = 0; i < calls; ++i) f();
  Exec().fence();
  return timer.seconds();
}

// Calls per timing: as many as make one fenced batch last kMinBatchSeconds, so that a launch and
// a fence (several microseconds each on a GPU, longer than a small kernel) weigh little in what
// is timed, as in a training step, where kernels follow each other unfenced. 1 for calls that
// long or longer (the host's cases, mostly), at most kMaxBatch.
constexpr double kMinBatchSeconds = 5e-4;
constexpr int kMaxBatch = 4096;
int batch_size(const std::function<void()>& f) {
  int calls = 1;
  while (calls < kMaxBatch && fenced_seconds(f, calls) < kMinBatchSeconds) calls *= 2;
  return calls;
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

// One untimed, fenced call of f (first touch, lazily created handles): the empty string, or why
// it threw (kernels.gemm=vendor in a build without BLAS).
std::string warm_up(const std::function<void()>& f) {
  try {
    f();
    Exec().fence();
    return "";
  } catch (const std::exception& e) {
    return e.what();
  }
}

// warm_up(f), the case marked skipped with the reason when f cannot run.
bool warm_up(benchmark::State& state, const std::function<void()>& f) {
  const std::string why = warm_up(f);
  if (!why.empty()) state.SkipWithError(why.c_str());
  return why.empty();
}

void set_rate_counters(benchmark::State& state, double total_seconds, double flops, double bytes) {
  const double per_call = total_seconds / static_cast<double>(state.iterations());
  if (flops > 0) state.counters["gflops"] = flops / per_call * 1e-9;
  if (bytes > 0) state.counters["gbps"] = bytes / per_call * 1e-9;
}

// A fenced copy between two buffers of `bytes` / 2 each (half read, half written). On a GPU it is
// the runtime's own device copy (cudaMemcpy, wide accesses): a loop of one float per index fell far
// short of it on an H200 (837 against 2961 GB/s); on the host, such a loop.
struct Copy {
  Kokkos::View<float*, Exec::memory_space> a, b;
  int calls = 1;  // copies per timing (batch_size)
  explicit Copy(double bytes, const char* label)
      : a(std::string(label) + "_a", std::max<std::int64_t>(1, std::int64_t(bytes / (2 * sizeof(float))))),
        b(std::string(label) + "_b", a.extent(0)) {
    Kokkos::deep_copy(a, 1.0f);
    calls = batch_size(copy());
  }
  std::function<void()> copy() const {
    auto src = a, dst = b;
#if defined(KOKKOS_ENABLE_CUDA)
    if (!std::is_same<Exec::memory_space, Kokkos::HostSpace>::value) return [=] { Kokkos::deep_copy(Exec(), dst, src); };
#endif
    const std::int64_t n = a.extent(0);
    return [=] {
      Kokkos::parallel_for(
          "kformer::bench::copy", Kokkos::RangePolicy<Exec>(0, n), KOKKOS_LAMBDA(const std::int64_t i) { dst(i) = src(i); });
    };
  }
  double bytes() const { return 2.0 * a.extent(0) * sizeof(float); }
  double seconds() const { return fenced_seconds(copy(), calls) / calls; }  // of one copy
  double gbps() const { return bytes() / seconds() * 1e-9; }
};

// The memory-bound ceiling: a Copy of two 256 MiB buffers, far larger than the caches. Allocated
// on first use, released at Kokkos::finalize (a static View must not outlive Kokkos).
const Copy& copy_probe() {
  static Copy* probe = nullptr;
  if (!probe) {
    probe = new Copy(2.0 * (std::int64_t(1) << 26) * sizeof(float), "copy");
    Kokkos::push_finalize_hook([] {
      delete probe;
      probe = nullptr;
    });
  }
  return *probe;
}

void set_spread_counters(benchmark::State& state, const std::vector<double>& ratio) {
  state.counters["vs_ceiling"] = quantile(ratio, 0.5);
  state.counters["vs_q1"] = quantile(ratio, 0.25);
  state.counters["vs_q3"] = quantile(ratio, 0.75);
}

}  // namespace

void run_case(benchmark::State& state, const std::function<void()>& f, double flops, double bytes) {
  if (!warm_up(state, f)) return;
  const Copy& copy = copy_probe();
  const double copy_s = copy.seconds();  // warm-up, and the length of a block
  const int batch = batch_size(f);
  double total = 0, block = 0;
  std::int64_t calls = 0;
  std::vector<double> ratio, copy_gbps;
  auto close_block = [&] {
    const double c = copy.seconds();
    copy_gbps.push_back(copy.bytes() / c * 1e-9);
    ratio.push_back((bytes * double(calls) / block) / (copy.bytes() / c));
    block = 0, calls = 0;
  };
  while (state.KeepRunningBatch(batch)) {  // one iteration a call, `batch` calls a timing
    const double s = fenced_seconds(f, batch);
    state.SetIterationTime(s);
    total += s, block += s, calls += batch;
    if (block >= copy_s) close_block();
  }
  if (calls > 0) close_block();
  set_rate_counters(state, total, flops, bytes);
  state.counters["copy_gbps"] = quantile(copy_gbps, 0.5);
  set_spread_counters(state, ratio);
  // What the case's size allows: a copy of its bytes per call, after its loop (its buffers would
  // otherwise share the caches with the case's), where a call's launch and its first and last waves
  // weigh as much as in the case (a few MB on a GPU), or its data stays in a cache.
  if (bytes > 0 && total > 0) {
    const Copy same(bytes, "copy_same");
    const double same_gbps = quantile({same.gbps(), same.gbps(), same.gbps()}, 0.5);
    state.counters["copy_same_gbps"] = same_gbps;
    state.counters["vs_same_size"] = bytes * double(state.iterations()) / total * 1e-9 / same_gbps;
  }
}

void run_case(benchmark::State& state, const std::function<void()>& f, double flops, double bytes,
              const Reference& ref) {
  const bool have_ref = warm_up(ref.run).empty();  // false without a vendor library
  if (!warm_up(state, f)) return;
  const int batch = batch_size(f), ref_batch = have_ref ? batch_size(ref.run) : 0;
  double total = 0;
  std::vector<double> ratio, ref_gflops;
  bool ref_first = true;
  while (state.KeepRunningBatch(batch)) {  // one iteration a call, `batch` calls a timing
    double t_ref = 0;  // of one call
    if (have_ref && ref_first) t_ref = fenced_seconds(ref.run, ref_batch) / ref_batch;
    const double s = fenced_seconds(f, batch);
    if (have_ref && !ref_first) t_ref = fenced_seconds(ref.run, ref_batch) / ref_batch;
    ref_first = !ref_first;
    state.SetIterationTime(s);
    total += s;
    if (have_ref) {
      ref_gflops.push_back(ref.flops / t_ref * 1e-9);
      ratio.push_back((flops * batch / s) / (ref.flops / t_ref));
    }
  }
  set_rate_counters(state, total, flops, bytes);
  state.counters["ceiling_gflops"] = quantile(ref_gflops, 0.5);
  set_spread_counters(state, ratio);
}

benchmark::internal::Benchmark* add_case(const std::string& name, std::function<void(benchmark::State&)> fn,
                                         double min_time) {
  return benchmark::RegisterBenchmark(name.c_str(),
                                      [fn, name](benchmark::State& s) {
                                        note_case(name);
                                        fn(s);
                                      })
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond)
      ->MinTime(min_time);
}

void add_mem(const std::string& name, std::function<std::function<void()>()> make, double bytes) {
  add_case(name, [=](benchmark::State& state) { run_case(state, make(), 0.0, bytes); });
}

std::string dims(std::initializer_list<int> d) {
  std::string s;
  for (int x : d) s += (s.empty() ? "" : "x") + std::to_string(x);
  return s;
}

}  // namespace kformer::bench

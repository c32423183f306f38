// The figures of a run (see metrics.hpp).
#include "train/metrics.hpp"

#include <algorithm>
#include <cstdio>

namespace kformer {

std::string format_log_line(const IterationRecord& r) {
  char buf[640];
  std::snprintf(buf, sizeof(buf),
                " iteration %8lld/%8lld | consumed samples: %12lld | consumed tokens: %14lld | elapsed time per "
                "iteration (s): %.3f | learning rate: %.3E | global batch size: %5lld | lm loss: %.6E | grad norm: "
                "%.3f | number of skipped iterations: %3lld | number of nan iterations: %3lld | samples per second: "
                "%.3f | tokens per second: %.1f | TFLOPs: %.3f |",
                (long long)r.iteration, (long long)r.total, (long long)r.consumed_samples,
                (long long)r.consumed_tokens, r.elapsed_s, r.lr, (long long)r.global_batch, r.loss, r.grad_norm,
                (long long)r.skipped_total, (long long)r.nan_total, r.samples_per_s, r.tokens_per_s,
                r.tflops_per_rank);
  return buf;
}

Straggler straggler_of(const std::vector<double>& t) {
  Straggler s;
  if (t.empty()) return s;
  const auto mx = std::max_element(t.begin(), t.end());
  const double mn = *std::min_element(t.begin(), t.end());
  s.slowest_rank = static_cast<int>(mx - t.begin());
  if (mn > 0) s.slowdown = *mx / mn;
  if (*mx > 0) s.delay = (*mx - mn) / *mx;
  return s;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

nlohmann::json iteration_json(const IterationRecord& r) {
  return {{"iteration", r.iteration},
          {"loss", r.loss},
          {"grad_norm", r.grad_norm},
          {"lr", r.lr},
          {"elapsed_ms", r.elapsed_s * 1e3},
          {"consumed_samples", r.consumed_samples},
          {"consumed_tokens", r.consumed_tokens},
          {"tokens_per_s", r.tokens_per_s},
          {"samples_per_s", r.samples_per_s},
          {"tflops_per_rank", r.tflops_per_rank},
          {"skipped", r.skipped},
          {"time_split_ms",
           {{"forward", r.forward_ms},
            {"backward", r.backward_ms},
            {"optimizer", r.optimizer_ms},
            {"comm_exposed", r.comm_exposed_ms},
            {"comm_total", r.comm_total_ms}}},
          {"rank_busy_ms", r.rank_busy_ms},
          {"rank_comm_ms", r.rank_comm_ms},
          {"rank_compute_ms", r.rank_compute_ms},
          {"rank_stretch_ms", r.rank_stretch_ms},
          {"rank_bubble", r.rank_bubble}};
}

}  // namespace kformer

namespace kformer {

nlohmann::json summarize(const std::vector<IterationRecord>& records, double flops_per_iter,
                         std::int64_t tokens_per_iter) {
  std::vector<IterationRecord> rs = records;
  if (rs.size() >= 3) rs.erase(rs.begin());
  auto med = [&](double IterationRecord::*f) {
    std::vector<double> v;
    for (const auto& r : rs) v.push_back(r.*f);
    return median(v);
  };
  const double step_s = med(&IterationRecord::elapsed_s);
  auto per_rank_sum = [&](std::vector<double> IterationRecord::*f) {
    std::vector<double> sum;
    for (const auto& r : rs) {
      if (sum.empty()) sum.assign((r.*f).size(), 0.0);
      for (std::size_t i = 0; i < sum.size() && i < (r.*f).size(); ++i) sum[i] += (r.*f)[i];
    }
    return sum;
  };
  const Straggler s = straggler_of(per_rank_sum(&IterationRecord::rank_busy_ms));
  const Straggler sc = straggler_of(per_rank_sum(&IterationRecord::rank_comm_ms));
  // The rank that slept (straggler.rank), its compute and what it slept, over the iterations: held
  // by the tests and the straggler study without timing the machine (metrics.hpp).
  const std::vector<double> slept = per_rank_sum(&IterationRecord::rank_stretch_ms);
  const std::vector<double> computed = per_rank_sum(&IterationRecord::rank_compute_ms);
  int sleeper = -1;
  for (std::size_t k = 0; k < slept.size(); ++k)
    if (slept[k] > 0) sleeper = static_cast<int>(k);
  std::vector<double> bubble;  // the mean over ranks of each iteration's idle fraction
  for (const auto& r : rs) {
    double b = 0;
    for (double x : r.rank_bubble) b += x;
    bubble.push_back(r.rank_bubble.empty() ? 0.0 : b / double(r.rank_bubble.size()));
  }
  return {{"step_ms_median", step_s * 1e3},
          {"tokens_per_s", step_s > 0 ? tokens_per_iter / step_s : 0.0},
          {"model_tflops_per_rank", step_s > 0 ? flops_per_iter / step_s / 1e12 : 0.0},
          {"iterations_summarised", rs.size()},
          {"time_split_ms",
           {{"forward", med(&IterationRecord::forward_ms)},
            {"backward", med(&IterationRecord::backward_ms)},
            {"optimizer", med(&IterationRecord::optimizer_ms)},
            {"comm_exposed", med(&IterationRecord::comm_exposed_ms)},
            {"comm_total", med(&IterationRecord::comm_total_ms)}}},
          {"straggler",
           {{"slowdown", s.slowdown},
            {"delay", s.delay},
            {"slowest_rank", s.slowest_rank},
            {"injected_rank", sleeper},
            {"injected_compute_ms", sleeper >= 0 ? computed[sleeper] : 0.0},
            {"injected_slept_ms", sleeper >= 0 ? slept[sleeper] : 0.0}}},
          {"pipeline", {{"bubble_measured", median(bubble)}}},
          {"straggler_comm", {{"slowdown", sc.slowdown}, {"delay", sc.delay}, {"slowest_rank", sc.slowest_rank}}}};
}

}  // namespace kformer

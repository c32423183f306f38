// The median of calibrate's kernel rounds (see calibrate_rounds.hpp).
#include "predict/calibrate_rounds.hpp"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <stdexcept>

namespace kformer::predict {

std::string RoundsSpread::describe() const {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.0f%%", 100 * relative);
  return "the median of " + std::to_string(rounds) + " round(s)" +
         (figure.empty() ? std::string() : " (widest spread " + std::string(buf) + " in " + figure + ")");
}

namespace {

// Each figure of the result, the same field in every round: its median, and its spread noted.
class Median {
 public:
  Median(const std::vector<MachineProfile>& rounds, RoundsSpread* spread) : rounds_(rounds), spread_(spread) {}

  void operator()(const std::string& what, const std::function<double(const MachineProfile&)>& get, double& out) {
    std::vector<double> v;
    for (const MachineProfile& r : rounds_) v.push_back(get(r));
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    out = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    const double rel = out > 0 ? (v.back() - v.front()) / out : 0;
    if (spread_ && rel > spread_->relative) spread_->relative = rel, spread_->figure = what;
  }

 private:
  const std::vector<MachineProfile>& rounds_;
  RoundsSpread* spread_;
};

void rates(Median& median, const std::vector<MachineProfile>& rounds, bool bf16, ComputeRates& out) {
  const char* prec = bf16 ? "bf16" : "fp32";
  const auto of = [bf16](const MachineProfile& r) -> const ComputeRates& { return bf16 ? r.bf16 : r.fp32; };
  for (const MachineProfile& r : rounds)
    if (of(r).gemm_points.size() != out.gemm_points.size() || of(r).attention_points.size() != out.attention_points.size())
      throw std::logic_error("calibrate: its rounds measured different kernels");
  for (std::size_t i = 0; i < out.gemm_points.size(); ++i) {
    GemmPoint& g = out.gemm_points[i];
    const std::string shape = std::to_string(g.m) + "x" + std::to_string(g.n) + "x" + std::to_string(g.k);
    for (const MachineProfile& r : rounds) {
      const GemmPoint& h = of(r).gemm_points[i];
      if (h.m != g.m || h.n != g.n || h.k != g.k) throw std::logic_error("calibrate: its rounds measured different GEMMs");
    }
    median(std::string(prec) + " GEMM " + shape + " forward", [&](const MachineProfile& r) { return of(r).gemm_points[i].forward_us; }, g.forward_us);
    median(std::string(prec) + " GEMM " + shape + " backward", [&](const MachineProfile& r) { return of(r).gemm_points[i].backward_us; }, g.backward_us);
  }
  for (std::size_t i = 0; i < out.attention_points.size(); ++i) {
    AttentionPoint& a = out.attention_points[i];
    const std::string what = std::string(prec) + " " + a.kind + " attention T " + std::to_string(a.t) + ", " +
                             std::to_string(a.h) + " heads";
    median(what + " forward", [&](const MachineProfile& r) { return of(r).attention_points[i].forward_us; }, a.forward_us);
    median(what + " backward", [&](const MachineProfile& r) { return of(r).attention_points[i].backward_us; }, a.backward_us);
  }
  for (auto& [kind, rate] : out.attention_tflops)
    median(std::string(prec) + " " + kind + " attention's rate",
           [&, k = kind](const MachineProfile& r) { return of(r).attention_tflops.count(k) ? of(r).attention_tflops.at(k) : 0.0; }, rate);
  for (auto& [family, gbps] : out.memory_gbps)
    median(std::string(prec) + " " + family + " GB/s",
           [&, f = family](const MachineProfile& r) { return of(r).memory_gbps.count(f) ? of(r).memory_gbps.at(f) : 0.0; }, gbps);
}

}  // namespace

MachineProfile median_of_rounds(const std::vector<MachineProfile>& rounds, RoundsSpread* spread) {
  if (rounds.empty()) throw std::logic_error("calibrate: no kernel round to take the median of");
  if (spread) *spread = RoundsSpread{int(rounds.size()), 0, ""};
  MachineProfile p = rounds.front();
  Median median(rounds, spread);
  median("the launch", [](const MachineProfile& r) { return r.launch_us; }, p.launch_us);
  median("the FMA peak", [](const MachineProfile& r) { return r.fma_peak_tflops; }, p.fma_peak_tflops);
  median("the copy", [](const MachineProfile& r) { return r.copy_gbps; }, p.copy_gbps);
  for (auto& [family, gbps] : p.memory_gbps)
    median(family + " GB/s", [f = family](const MachineProfile& r) { return r.memory_gbps.count(f) ? r.memory_gbps.at(f) : 0.0; }, gbps);
  rates(median, rounds, false, p.fp32);
  rates(median, rounds, true, p.bf16);
  return p;
}

}  // namespace kformer::predict

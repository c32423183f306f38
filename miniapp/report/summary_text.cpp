// The printed summary (see summary_text.hpp).
#include "report/summary_text.hpp"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace kformer {
namespace {

std::string fmt(const char* f, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, f);
  std::vsnprintf(buf, sizeof(buf), f, ap);
  va_end(ap);
  return buf;
}

double num(const nlohmann::json& j, const char* a, const char* b = nullptr) {
  const nlohmann::json* p = &j;
  for (const char* k : {a, b}) {
    if (!k) break;
    if (!p->is_object() || !p->contains(k)) return 0;
    p = &(*p)[k];
  }
  return p->is_number() ? p->get<double>() : 0;
}

bool has(const nlohmann::json& j, const char* a, const char* b = nullptr) {
  if (!j.is_object() || !j.contains(a)) return false;
  return !b || (j[a].is_object() && j[a].contains(b));
}

std::string gb(double bytes) { return fmt("%.3g GB", bytes / 1e9); }

// output.kernel_times: the families as predict.breakdown prints them, longest first, then the
// three longest entry points and the time outside every call.
std::string kernel_times_text(const nlohmann::json& k) {
  std::vector<std::pair<double, std::string>> fam;
  for (const auto& [family, ms] : k["by_family_ms"].items()) fam.emplace_back(ms.get<double>(), family);
  std::sort(fam.rbegin(), fam.rend());
  const double step = num(k, "step_ms");
  const auto share = [&](double ms) { return step > 0 ? 100 * ms / step : 0.0; };
  std::string out = fmt("  kernel calls     rank 0's, measured (ms of a timed step, each call fenced; %d step%s of %.3f ms):",
                        int(num(k, "steps")), num(k, "steps") == 1 ? "" : "s", step);
  for (std::size_t i = 0; i < fam.size(); ++i)
    out += (i % 4 == 0 ? "\n    " : " | ") + fam[i].second + fmt(" %.3f (%.1f%%)", fam[i].first, share(fam[i].first));
  out += fmt("\n    outside the calls %.3f (%.1f%%)", num(k, "outside_calls_ms"), share(num(k, "outside_calls_ms")));
  if (k.contains("entries") && k["entries"].is_array()) {
    out += "; longest entries:";
    for (std::size_t i = 0; i < k["entries"].size() && i < 3; ++i) {
      const auto& e = k["entries"][i];
      out += fmt(" %s %.3f ms (%.4g calls)%s", e.value("name", std::string("?")).c_str(), num(e, "ms"), num(e, "calls"),
                 i + 1 < std::min<std::size_t>(3, k["entries"].size()) ? "," : "");
    }
  }
  return out + "\n";
}

}  // namespace

std::string format_summary(const nlohmann::json& s) {
  const double tokens = num(s, "tokens_per_s"), step = num(s, "step_ms_median"), tf = num(s, "model_tflops_per_rank");
  std::string out = fmt("FOM: %.1f tokens/s | step %.3f ms | %.4g model TFLOP/s per rank | MFU %.3f\n", tokens, step,
                        tf, num(s, "mfu"));
  const auto n = static_cast<long>(num(s, "iterations_summarised"));
  out += fmt("summary (medians over %ld iteration%s; output.json has every field):\n", n, n == 1 ? "" : "s");
  out += fmt("  throughput       %.1f tokens/s, %.3f ms per step, %.4g model TFLOP/s per rank\n", tokens, step, tf);
  if (has(s, "precision") && s["precision"].is_string())
    out += "  precision        " + s["precision"].get<std::string>() +
           (s["precision"] == "bf16" ? " (fp32 masters and AdamW state, bf16 weight copies and activations)\n" : "\n");
  if (has(s, "time_split_ms")) {
    const auto& t = s["time_split_ms"];
    out += fmt("  time split (ms)  forward %.3f | backward %.3f | optimizer %.3f | communication %.3f total, %.3f exposed\n",
               num(t, "forward"), num(t, "backward"), num(t, "optimizer"), num(t, "comm_total"), num(t, "comm_exposed"));
  }
  if (has(s, "pipeline")) {
    const auto& p = s["pipeline"];
    std::string what;
    if (has(p, "schedule") && p["schedule"].is_string())
      what = fmt(" (%s, %d stage%s, %d micro-batch%s", p["schedule"].get<std::string>().c_str(), int(num(p, "stages")),
                 num(p, "stages") == 1 ? "" : "s", int(num(p, "microbatches")), num(p, "microbatches") == 1 ? "" : "es") +
             (num(p, "virtual_stages") > 1 ? fmt(", %d virtual stages)", int(num(p, "virtual_stages"))) : ")");
    out += fmt("  pipeline bubble  %.3f measured, %.3f analytic", num(p, "bubble_measured"), num(p, "bubble_analytic")) +
           what + "\n";
  }
  if (has(s, "straggler")) {
    out += fmt("  stragglers       compute: slowdown %.3f, delay %.3f, slowest rank %d", num(s, "straggler", "slowdown"),
               num(s, "straggler", "delay"), int(num(s, "straggler", "slowest_rank")));
    if (has(s, "straggler_comm"))
      out += fmt("; communication: slowdown %.3f, delay %.3f, slowest rank %d", num(s, "straggler_comm", "slowdown"),
                 num(s, "straggler_comm", "delay"), int(num(s, "straggler_comm", "slowest_rank")));
    out += "\n";
  }
  if (has(s, "memory"))
    out += "  memory per rank  estimated " + gb(num(s, "memory", "estimated_bytes")) + ", measured peak " +
           gb(num(s, "memory", "peak_bytes")) + " (largest over the ranks)" +
           (has(s, "memory", "allocated_peak_bytes") ? ", allocated " + gb(num(s, "memory", "allocated_peak_bytes")) : "") +
           "\n";
  out += fmt("  MFU              %.3f of the best GEMM measured", num(s, "mfu"));
  if (has(s, "gemm_ceiling", "impl") && s["gemm_ceiling"]["impl"].is_string())
    out += fmt(" (%s %s, %.4g TFLOP/s at %s)", s["gemm_ceiling"]["impl"].get<std::string>().c_str(),
               s["gemm_ceiling"].value("precision", std::string("fp32")).c_str(), num(s, "gemm_ceiling_tflops"),
               s["gemm_ceiling"].value("shape", std::string("?")).c_str());
  if (num(s, "fma_peak_tflops") > 0)
    out += fmt("; %.3f of the FMA peak measured (%.4g TFLOP/s)", num(s, "mfu_fma_peak"), num(s, "fma_peak_tflops"));
  if (has(s, "mfu_peak")) out += fmt("; %.3f of output.peak_tflops", num(s, "mfu_peak"));
  if (num(s, "hfu") > num(s, "mfu")) out += fmt("; HFU %.3f with the recomputed work", num(s, "hfu"));
  out += "\n";
  if (num(s, "gemm_ceiling", "native_tflops") > 0 || num(s, "gemm_ceiling", "vendor_tflops") > 0)
    out += fmt("  ceilings         GEMM native %.4g, vendor %.4g TFLOP/s (0: not built); FMA peak %.4g TFLOP/s\n",
               num(s, "gemm_ceiling", "native_tflops"), num(s, "gemm_ceiling", "vendor_tflops"),
               num(s, "fma_peak_tflops"));
  if (has(s, "kernels_gemm", "impl") && s["kernels_gemm"]["impl"].is_string())
    out += "  GEMM used        " + s["kernels_gemm"]["impl"].get<std::string>() + " (kernels.gemm=" +
           s["kernels_gemm"].value("setting", std::string("?")) + ": " +
           s["kernels_gemm"].value("reason", std::string("?")) + ")\n";
  if (has(s, "kernel_times", "by_family_ms")) out += kernel_times_text(s["kernel_times"]);
  if (has(s, "kernels_attention", "kind") && s["kernels_attention"]["kind"].is_string())
    out += "  attention used   " + s["kernels_attention"]["kind"].get<std::string>() + " (kernels.attention=" +
           s["kernels_attention"].value("setting", std::string("?")) + ": " +
           s["kernels_attention"].value("reason", std::string("?")) + ")\n";
  return out;
}

}  // namespace kformer

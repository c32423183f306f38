// kernels.gemm resolved (see gemm_choice.hpp).
#include "measure/gemm_choice.hpp"

#include <cstdio>

namespace kformer {

GemmChoice choose_gemm(GemmSetting setting, double native_tflops, double vendor_tflops, Precision precision) {
  GemmChoice c;
  c.setting = setting;
  c.native_tflops = native_tflops;
  c.vendor_tflops = vendor_tflops;
  c.precision = precision;
  if (setting != GemmSetting::automatic) {
    c.impl = setting == GemmSetting::vendor ? kernels::GemmImpl::vendor : kernels::GemmImpl::native;
    c.reason = "set in the deck";
    return c;
  }
  c.impl = vendor_tflops > native_tflops ? kernels::GemmImpl::vendor : kernels::GemmImpl::native;
  if (vendor_tflops <= 0) {
    c.reason = "no vendor GEMM in this build";
    return c;
  }
  const bool native = c.impl == kernels::GemmImpl::native;
  char text[128];
  std::snprintf(text, sizeof(text), "%s %.3g vs %s %.3g TFLOP/s", name_of(precision),
                native ? native_tflops : vendor_tflops, native ? "vendor" : "native",
                native ? vendor_tflops : native_tflops);
  c.reason = text;
  return c;
}

std::string describe(const GemmChoice& c) {
  if (c.setting != GemmSetting::automatic) return "";
  return std::string(kernels::to_string(c.impl)) + " (" + c.reason + ")";
}

}  // namespace kformer

// kernels.gemm resolved to the GEMM the run uses: `native` and `vendor` as set; `auto` the faster
// of the two as the start-up ceiling timed them (ceiling.hpp: each at a layer's shape in the run's
// precision), the rates averaged over the ranks first so that every rank takes the same. Decided
// from plain numbers, so that tests can give any.
#pragma once

#include <string>

#include "kernels/kernel_choice.hpp"
#include "settings/choices.hpp"

namespace kformer {

struct GemmChoice {
  GemmSetting setting = GemmSetting::automatic;  // kernels.gemm
  kernels::GemmImpl impl = kernels::GemmImpl::native;  // what the run uses
  double native_tflops = 0, vendor_tflops = 0;          // the timings `auto` compared (0: not built)
  Precision precision = Precision::fp32;      // of those timings
  std::string reason;                         // "fp32 0.41 vs vendor 0.17 TFLOP/s"; "set in the deck"
};

// `setting` as kernels.gemm says it; the rates are what `auto` compares (ignored otherwise).
// auto takes vendor where it measured faster, native otherwise (ties and no vendor built).
GemmChoice choose_gemm(GemmSetting setting, double native_tflops, double vendor_tflops, Precision precision);

// What `auto` became, for the start-up print (DeckEcho::text's `gemm_choice`) and the summary:
// "native (fp32 0.41 vs vendor 0.17 TFLOP/s)"; empty where the deck set native or vendor.
std::string describe(const GemmChoice& c);

}  // namespace kformer

// kernels.gemm resolved (miniapp/gemm_choice.hpp) from given rates, so that the verdict does not
// depend on which GEMM is faster on the machine running the test: auto takes the faster, says
// which and by what figures; native and vendor are honoured whatever the rates.
#include <gtest/gtest.h>

#include "measure/gemm_choice.hpp"

using kformer::choose_gemm;
using kformer::kernels::GemmImpl;
using kformer::GemmSetting;
using kformer::Precision;

TEST(GemmChoice, AutoTakesTheFasterAndSaysWhy) {
  auto c = choose_gemm(GemmSetting::automatic, 0.41, 0.17, Precision::fp32);
  EXPECT_EQ(c.impl, GemmImpl::native);
  EXPECT_EQ(kformer::describe(c), "native (fp32 0.41 vs vendor 0.17 TFLOP/s)");
  c = choose_gemm(GemmSetting::automatic, 0.30, 0.42, Precision::bf16);
  EXPECT_EQ(c.impl, GemmImpl::vendor);
  EXPECT_EQ(kformer::describe(c), "vendor (bf16 0.42 vs native 0.3 TFLOP/s)");
  EXPECT_EQ(c.native_tflops, 0.30);
  EXPECT_EQ(c.vendor_tflops, 0.42);
}

TEST(GemmChoice, AutoWithoutAVendorGemmTakesNative) {
  const auto c = choose_gemm(GemmSetting::automatic, 0.41, 0.0, Precision::fp32);
  EXPECT_EQ(c.impl, GemmImpl::native);
  EXPECT_EQ(kformer::describe(c), "native (no vendor GEMM in this build)");
}

TEST(GemmChoice, ASettingIsHonouredWhateverTheRates) {
  auto c = choose_gemm(GemmSetting::native, 0.1, 0.9, Precision::fp32);
  EXPECT_EQ(c.impl, GemmImpl::native);
  EXPECT_EQ(kformer::describe(c), "");  // nothing to resolve: the print shows the value alone
  c = choose_gemm(GemmSetting::vendor, 0.9, 0.1, Precision::fp32);
  EXPECT_EQ(c.impl, GemmImpl::vendor);
  EXPECT_EQ(c.reason, "set in the deck");
}

// kformer's own run on a GPU's profile (predict/own_build.hpp): described as the CUDA build runs it,
// its GEMMs cuBLAS (kernels.gemm=auto), which writes a bf16 GEMM's output itself and fuses the
// GELU's gradient into FC2's backward. Checked on a described middle chunk of tiny.yaml (GPT, one
// block) against the same chunk described as the host build. Part of test_predict_features.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "predict/kernel_costs.hpp"
#include "predict/own_build.hpp"
#include "predict_features_helpers.hpp"

using namespace predict_features;

namespace {

const kp::MachineProfile& a100() {
  static const kp::MachineProfile p = profile("perlmutter-a100-40gb");
  return p;
}

kformer::RunPlan middle(std::vector<std::string> overrides) {
  for (const char* s : {"predict.world=8", "parallel.pp=4", "parallel.tp=2", "train.recompute=none"})
    overrides.push_back(s);
  return plan("tiny.yaml", overrides);
}

kp::ChunkWork work(const kformer::RunPlan& layout) { return kp::chunk_work(a100(), layout, 1); }

std::size_t count(const std::vector<kp::WorkItem>& items, const std::string& name_or_family) {
  std::size_t n = 0;
  for (const auto& i : items)
    n += i.kind == kp::ItemKind::compute && (i.name == name_or_family || i.family == name_or_family);
  return n;
}

// The convert items that directly follow a forward GEMM: a GEMM's fp32 output rounded for storage.
std::size_t rounded_outputs(const std::vector<kp::WorkItem>& items) {
  std::size_t n = 0;
  const kp::WorkItem* last = nullptr;
  for (const auto& i : items) {
    if (i.kind != kp::ItemKind::compute) continue;
    n += last && last->family == "gemm" && i.family == "convert";
    last = &i;
  }
  return n;
}

double family_us(const std::vector<kp::WorkItem>& items, const std::string& family) {
  double us = 0;
  for (const auto& i : items) us += i.kind == kp::ItemKind::compute && i.family == family ? i.us : 0;
  return us;
}

}  // namespace

// On a GPU's profile (kformer_build: cuda) the default system's bf16 chunk is the CUDA build's: no
// GEMM output rounded by a pass of its own (the host build rounds QKV's and FC1's), no separate GELU
// backward (one fused matmul_backward_gelu instead), the same GEMMs forward. The gradients rounded
// before their GEMMs and the pipeline messages' conversions stay: the CUDA build runs those too.
TEST(PredictOwnBuild, AGpuProfileDescribesTheCudaBuildsGemms) {
  const kformer::RunPlan host = middle({"train.precision=bf16"});
  const kformer::RunPlan cuda = kp::on_own_build(host, a100());
  ASSERT_EQ(cuda.code_path, kformer::kernels::CodePath::cuda);
  EXPECT_EQ(cuda.gemm, kformer::kernels::GemmImpl::vendor);  // kernels.gemm=auto: cuBLAS on a GPU
  const kp::ChunkWork h = work(host), c = work(cuda);
  EXPECT_EQ(rounded_outputs(h.forward), 2u);  // QKV's and FC1's outputs, stored in bf16
  EXPECT_EQ(rounded_outputs(c.forward), 0u);
  EXPECT_EQ(count(c.forward, "convert"), count(h.forward, "convert") - 2);  // the messages' stay
  EXPECT_EQ(count(c.forward, "gemm"), count(h.forward, "gemm"));
  // the host build's QKV and FC1 write fp32, 2 bytes an element more than the profile's bf16-output
  // curve: (rows, 3C/tp) and (rows, 4C/tp) at tiny.yaml's micro-batch 2, T 32, C 64, tp 2
  const double rows = 2 * 32, wider = 2 * rows * (3 * 64 / 2 + 4 * 64 / 2);
  EXPECT_NEAR(family_us(h.forward, "gemm") - family_us(c.forward, "gemm"),
              wider / (kp::stream_gbps(a100()) * 1e3), 1e-9);
  EXPECT_EQ(count(h.backward, "gelu_backward"), 1u);
  EXPECT_EQ(count(c.backward, "gelu_backward"), 0u);
  EXPECT_EQ(count(c.backward, "matmul_backward_gelu"), 1u);
  EXPECT_GT(count(c.backward, "convert"), 0u);  // fp32 gradients rounded before their GEMMs
  EXPECT_LT(kp::compute_us(c.forward), kp::compute_us(h.forward));
  EXPECT_LT(kp::compute_us(c.backward), kp::compute_us(h.backward));
  // the output projection and FC2 write fp32 into kformer's residual stream on both builds; a system
  // that keeps its stream in bf16 writes them in bf16: no extra bytes over the curve
  const kformer::RunPlan mlm = middle({"train.precision=bf16", "predict.system=megatron-lm-2022"});
  const double own_stream = 2 * rows * (64 + 64);
  EXPECT_NEAR(family_us(c.forward, "gemm") - family_us(work(mlm).forward, "gemm"),
              own_stream / (kp::stream_gbps(a100()) * 1e3), 1e-9);
}

// Only kformer's own run on a GPU's profile changes: another system's preset costs its own kernels
// (its GELU backward a pass of its own, as Megatron-LM's bias-GELU kernel is), a deck that names the
// native GEMM keeps it (it adds its K chunks into an fp32 C, which a pass then rounds), and a host
// profile describes this build. In fp32 the two builds' chunks cost alike.
TEST(PredictOwnBuild, OnlyKformersOwnRunOnAGpuProfileChanges) {
  const auto same = [](const kformer::RunPlan& a, const kformer::RunPlan& b) {
    EXPECT_EQ(a.code_path, b.code_path);
    EXPECT_EQ(a.gemm, b.gemm);
  };
  const kformer::RunPlan mlm = middle({"train.precision=bf16", "predict.system=megatron-lm-2022"});
  same(kp::on_own_build(mlm, a100()), mlm);
  const kformer::RunPlan native = kp::on_own_build(middle({"train.precision=bf16", "kernels.gemm=native"}), a100());
  EXPECT_EQ(native.code_path, kformer::kernels::CodePath::cuda);
  EXPECT_EQ(native.gemm, kformer::kernels::GemmImpl::native);
  EXPECT_EQ(rounded_outputs(work(native).forward), 2u);
  kp::MachineProfile cpu = a100();
  cpu.kformer_build = kformer::kernels::CodePath::this_build;
  const kformer::RunPlan own = middle({"train.precision=bf16"});
  same(kp::on_own_build(own, cpu), own);
  const kformer::RunPlan fp32 = middle({});
  EXPECT_DOUBLE_EQ(kp::compute_us(work(kp::on_own_build(fp32, a100())).forward), kp::compute_us(work(fp32).forward));
}

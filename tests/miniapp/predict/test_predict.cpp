// kformer predict: the simulated schedules against the analytic bubble, the report's fields and
// its memory against the estimate, stragglers and emulated latency in the step time, and the
// machine profiles (the shipped ones load; a bad one is refused with one line).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "platform/errors.hpp"
#include "plan/memory.hpp"
#include "settings/prediction_deck.hpp"
#include "predict/chunk_work.hpp"
#include "predict/kernel_costs.hpp"
#include "predict/machine_profile.hpp"
#include "predict/pipeline_sim.hpp"
#include "predict/predict_report.hpp"
#include "predict/step_sim.hpp"
#include "parallel/schedule.hpp"
#include "train/make_plan.hpp"
#include "train/step_work.hpp"

namespace kp = kformer::predict;
using kformer::Phase;

namespace {

const std::string kSource = KFORMER_SOURCE_DIR;

kp::MachineProfile a100() { return kp::load_profile(kSource + "/input/machines/perlmutter-a100-40gb.yaml"); }

kformer::RunPlan deck(const std::string& file, std::vector<std::string> overrides) {
  overrides.insert(overrides.begin(), kSource + "/input/" + file);
  return kformer::make_plan(kformer::read_prediction_deck("predict", overrides, false).settings);
}

// Every chunk costs F forward and B backward, nothing else; messages are free.
std::vector<kp::StageTimeline> uniform(kformer::ScheduleKind kind, int pp, int m, int v, double F, double B,
                                       double W = 0) {
  kp::MachineProfile free_net;
  free_net.intra_node.fallback = {0, 0, 0};
  free_net.inter_node = free_net.intra_node;
  const kp::NetworkCost net(free_net, {});
  kp::PipelineSetup s;
  s.pp = pp, s.n_chunks = pp * v, s.microbatches = m;
  const kformer::Schedule sched = kformer::make_schedule(kind, pp, m, v);
  for (int r = 0; r < pp; ++r) s.programs.push_back(kformer::comm_program(sched[r], pp, pp * v));
  s.gather_bytes.assign(pp, {}), s.bucket_bytes.assign(pp, {});
  for (int c = 0; c < pp * v; ++c) {
    kp::ChunkWork w;
    w.forward.push_back({kp::ItemKind::compute, "f", F / v, 0, 0});
    w.backward.push_back({kp::ItemKind::compute, "b", B / v, 0, 0});
    if (W > 0) w.weight.push_back({kp::ItemKind::compute, "w", W / v, 0, 0});
    s.chunks.push_back(w);
  }
  return kp::simulate_pipeline(s, net, false);
}

// The idle fraction of a rank over the pipeline's makespan (the last rank to finish), the
// quantity (p-1)/(m+p-1) describes.
double makespan(const std::vector<kp::StageTimeline>& st) {
  double end = 0;
  for (const auto& t : st) end = std::max(end, t.wall_us);
  return end;
}

}  // namespace

TEST(PredictSchedule, UniformCostsGiveTheAnalyticBubble) {
  for (kformer::ScheduleKind kind : {kformer::ScheduleKind::gpipe, kformer::ScheduleKind::one_f_one_b})
    for (int pp : {2, 3, 4})
      for (int m : {pp, 2 * pp, 8}) {
        const auto st = uniform(kind, pp, m, 1, 1.0, 2.0);
        for (int r = 0; r < pp; ++r)
          EXPECT_NEAR(1.0 - (st[r].forward_us + st[r].backward_us) / makespan(st), kformer::analytic_bubble(pp, m, 1), 1e-9)
              << kformer::name_of(kind) << " pp=" << pp << " m=" << m << " rank " << r;
      }
}

TEST(PredictSchedule, ZeroBubbleH1WithEqualFBWGivesItsAnalyticBubble) {
  for (int pp : {2, 3, 4})
    for (int m : {pp, 2 * pp, 8}) {
      const auto st = uniform(kformer::ScheduleKind::zb_h1, pp, m, 1, 1.0, 1.0, 1.0);  // F = B = W, as (p-1)/(3m+p-1) assumes
      EXPECT_NEAR(makespan(st), 3.0 * m + pp - 1, 1e-9) << "pp=" << pp << " m=" << m;
      for (int r = 0; r < pp; ++r)
        EXPECT_NEAR(1.0 - (st[r].forward_us + st[r].backward_us) / makespan(st),
                    kformer::analytic_bubble(kformer::ScheduleKind::zb_h1, pp, m, 1), 1e-9)
            << "pp=" << pp << " m=" << m << " rank " << r;
    }
}

TEST(PredictSchedule, InterleavingShrinksTheBubble) {
  for (int pp : {2, 4})
    for (int m : {pp, 2 * pp}) {
      const auto plain = uniform(kformer::ScheduleKind::one_f_one_b, pp, m, 1, 1.0, 2.0), inter = uniform(kformer::ScheduleKind::interleaved, pp, m, 2, 1.0, 2.0);
      // Each rank computes the same either way: the interleaved makespan is shorter, and no
      // shorter than (p-1)/(v*m+p-1) allows.
      const double busy = plain[0].forward_us + plain[0].backward_us;
      EXPECT_NEAR(inter[0].forward_us + inter[0].backward_us, busy, 1e-9);
      const double b_inter = 1.0 - busy / makespan(inter), b_plain = 1.0 - busy / makespan(plain);
      EXPECT_LT(b_inter, b_plain - 1e-6) << "pp=" << pp << " m=" << m;
      EXPECT_GE(b_inter, kformer::analytic_bubble(pp, m, 2) - 1e-9) << "pp=" << pp << " m=" << m;
    }
}

TEST(PredictReport, HasTheRunsFieldsAndTheEstimatedMemory) {
  const kformer::RunPlan cfg = deck("gpt3-small.yaml", {"parallel.pp=2", "predict.world=8"});
  const auto prof = a100();
  const nlohmann::json j = kp::predict_report(cfg, prof, kp::predict_step(cfg, prof, false));
  for (const char* k : {"config", "mesh", "iterations", "summary", "predicted"}) EXPECT_TRUE(j.contains(k)) << k;
  const auto& s = j["summary"];
  for (const char* k : {"step_ms_median", "tokens_per_s", "model_tflops_per_rank", "mfu", "time_split_ms", "pipeline",
                        "straggler", "memory", "flops"})
    EXPECT_TRUE(s.contains(k)) << k;
  for (const char* k : {"forward", "backward", "optimizer", "comm_exposed", "comm_total"})
    EXPECT_GT(s["time_split_ms"][k].get<double>(), 0) << k;
  EXPECT_GE(s["time_split_ms"]["backward"].get<double>(), s["time_split_ms"]["forward"].get<double>());
  EXPECT_GT(s["pipeline"]["bubble_measured"].get<double>(), 0);
  EXPECT_EQ(s["memory"]["estimated_bytes"].get<double>(), cfg.memory.total());
  EXPECT_EQ(j["mesh"]["dp"].get<int>(), 4);
  // The FLOPs of every rank add up to the closed form (gpt3-small's head included).
  EXPECT_NEAR(s["flops"]["counted_per_iteration_all_ranks"].get<double>() /
                  s["flops"]["closed_form_per_iteration"].get<double>(), 1.0, 0.02);
}

// MFU and HFU are taken against the profile's peak in the run's precision (a bf16 run: the tensor
// cores' bf16 peak, never the CUDA cores' fp32 FMA peak), the profile's best GEMM beside it.
TEST(PredictReport, MfuIsOfThePeakInTheRunsPrecision) {
  const auto prof = kp::load_profile(kSource + "/input/machines/dgx-a100-80gb.yaml");
  for (const char* precision : {"fp32", "bf16"}) {
    const kformer::RunPlan cfg = deck("gpt3-small.yaml", {std::string("train.precision=") + precision});
    const nlohmann::json s = kp::predict_report(cfg, prof, kp::predict_step(cfg, prof, false))["summary"];
    const double achieved = s["model_tflops_per_rank"].get<double>();
    const double peak = prof.rates(cfg.settings.bf16()).gemm_peak_tflops;
    EXPECT_EQ(peak, std::string(precision) == "bf16" ? 312 : 19.5) << precision;
    EXPECT_NEAR(s["mfu"].get<double>(), achieved / peak, 1e-12) << precision;
    EXPECT_NEAR(s["mfu_gemm_ceiling"].get<double>(), achieved / prof.rates(cfg.settings.bf16()).best_gemm_tflops(), 1e-12);
    EXPECT_LE(s["mfu"].get<double>(), 1.0) << precision << ": a fraction of the peak the work ran against";
    EXPECT_GE(s["hfu"].get<double>(), s["mfu"].get<double>());
  }
}

TEST(PredictReport, ALayoutTooBigForTheDeviceDoesNotFit) {
  const auto v100 = kp::load_profile(kSource + "/input/machines/v100-16gb-10gbe.yaml");
  const kformer::RunPlan big = deck("gpt3-small.yaml", {"parallel.dp=3", "parallel.zero=3", "train.global_batch=12", "kernels.attention=naive"});
  EXPECT_FALSE(kp::predict_report(big, v100, kp::predict_step(big, v100, false))["summary"]["memory"]["fits"].get<bool>());
  const kformer::RunPlan small = deck("tiny.yaml", {});
  EXPECT_TRUE(kp::predict_report(small, v100, kp::predict_step(small, v100, false))["summary"]["memory"]["fits"].get<bool>());
}

// The H200 profile is the H100 SXM's GH100 with 141 GB of HBM3e at 4.8 TB/s: the same GEMMs, more
// memory (what CUDA reported on the lent H200) and faster streaming kernels. Llama 3 8B at micro-batch
// 4 under ZeRO-1 over 8 needs about 86 GB a rank: over the H100's 85, within the H200's 150.
TEST(MachineProfile, TheH200HoldsWhatTheH100CannotWithTheSameGemms) {
  const auto h100 = kp::load_profile(kSource + "/input/machines/h100-sxm-80gb.yaml");
  const auto h200 = kp::load_profile(kSource + "/input/machines/h200-sxm-141gb.yaml");
  EXPECT_DOUBLE_EQ(kp::gemm_us(h100, true, 8192, 4096, 4096, false), kp::gemm_us(h200, true, 8192, 4096, 4096, false));
  const kformer::RunPlan big = deck("llama3-8b.yaml", {"parallel.tp=1", "parallel.sequence_parallel=false", "parallel.dp=8",
                                                       "parallel.zero=1", "train.precision=bf16", "train.global_batch=64",
                                                       "train.micro_batch=4"});
  const kp::StepPrediction on100 = kp::predict_step(big, h100, false), on200 = kp::predict_step(big, h200, false);
  EXPECT_FALSE(kp::predict_report(big, h100, on100)["summary"]["memory"]["fits"].get<bool>());
  EXPECT_TRUE(kp::predict_report(big, h200, on200)["summary"]["memory"]["fits"].get<bool>());
  EXPECT_LT(on200.step_ms, on100.step_ms);
}

// A bf16 GEMM writing fp32 outputs costs the bf16-output curve and its extra output bytes streamed
// (gemm.output_bytes, kernel_costs.hpp): kformer's own H100 calibration (h100-measured.yaml, which
// timed matmul_forward writing an fp32 y) lies there at all ten of its forward shapes, the datasheet
// profile's curve (fitted to OpenXLA's bf16-output timings) taken with the calibration's launch and
// copy rate, where the curve alone is 5-30% fast. The backward, and a profile whose timings wrote
// fp32 as the call does, take nothing extra; a bf16 y on a profile timed with fp32 ones, less.
TEST(MachineProfile, AGemmsFp32OutputCostsItsExtraBytesOverTheBf16Curve) {
  auto h100 = kp::load_profile(kSource + "/input/machines/h100-sxm-80gb.yaml");
  const auto measured = kp::load_profile(kSource + "/input/machines/h100-measured.yaml");
  ASSERT_EQ(h100.bf16.gemm_output_bytes, 2);
  ASSERT_EQ(measured.bf16.gemm_output_bytes, 4);
  h100.launch_us = measured.launch_us;
  h100.copy_gbps = measured.copy_gbps;  // the epilogue streams at the calibration's copy rate (stream_gbps)
  std::vector<double> with, without;
  for (const auto& g : measured.bf16.gemm_points) {
    with.push_back(std::abs(kp::gemm_us(h100, true, g.m, g.n, g.k, false, 4) / g.forward_us - 1));
    without.push_back(std::abs(kp::gemm_us(h100, true, g.m, g.n, g.k, false, 2) / g.forward_us - 1));
  }
  ASSERT_EQ(with.size(), 10u);
  const auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
  };
  EXPECT_LT(median(with), 0.05);
  EXPECT_LT(*std::max_element(with.begin(), with.end()), 0.15);
  EXPECT_GT(median(without), 0.15);
  EXPECT_DOUBLE_EQ(kp::gemm_us(h100, true, 8192, 50304, 768, false, 4) - kp::gemm_us(h100, true, 8192, 50304, 768, false, 2),
                   8192.0 * 50304 * 2 / (kp::stream_gbps(h100) * 1e3));
  EXPECT_DOUBLE_EQ(kp::gemm_us(h100, true, 8192, 50304, 768, true, 4), kp::gemm_us(h100, true, 8192, 50304, 768, true, 2));
  // On the calibration itself: a point as timed, and a bf16 y (the CUDA build's QKV and FC1) less
  // the bytes it does not write; the head's comes out where the bf16-output curve puts it.
  const kp::GemmPoint& g = measured.bf16.gemm_points.front();
  EXPECT_DOUBLE_EQ(kp::gemm_us(measured, true, g.m, g.n, g.k, false, 4), g.forward_us);
  EXPECT_DOUBLE_EQ(kp::gemm_us(measured, true, g.m, g.n, g.k, false, 2),
                   g.forward_us - double(g.m) * g.n * 2 / (kp::stream_gbps(measured) * 1e3));
  EXPECT_DOUBLE_EQ(kp::gemm_us(measured, true, g.m, g.n, g.k, true, 2), g.backward_us);
  EXPECT_NEAR(kp::gemm_us(measured, true, 8192, 50304, 768, false, 2) / kp::gemm_us(h100, true, 8192, 50304, 768, false, 2),
              1.0, 0.03);
}

TEST(PredictStep, AStragglerAddsItsWaitAndLatencyAddsPerMessage) {
  const auto prof = a100();
  const kformer::RunPlan base = deck("tiny.yaml", {"parallel.dp=2"});
  const kp::StepPrediction p0 = kp::predict_step(base, prof, false);
  const kp::StepPrediction p1 = kp::predict_step(deck("tiny.yaml", {"parallel.dp=2", "straggler.rank=1", "straggler.slowdown=3"}), prof, false);
  const double busy = p0.rank_busy_ms[1] - p0.rank0.optimizer_ms;  // rank 1's forward and backward
  EXPECT_NEAR(p1.step_ms - p0.step_ms, 2 * busy, 0.05 * 2 * busy);
  // Each emulated millisecond of latency costs a pipeline step at least a millisecond per message
  // on its critical path; an emulated network never makes a step faster.
  const kformer::RunPlan pp = deck("tiny.yaml", {"parallel.pp=2"});
  const kformer::RunPlan slow = deck("tiny.yaml", {"parallel.pp=2", "comm.emulate.latency_us=1000"});
  EXPECT_GT(kp::predict_step(slow, prof, false).step_ms, kp::predict_step(pp, prof, false).step_ms + 4.0);
}

TEST(PredictStep, ScalesToLlama8BOn4096Ranks) {
  const kformer::RunPlan cfg = deck("llama3-8b.yaml", {"predict.world=4096", "parallel.tp=8", "parallel.pp=8", "parallel.dp=0",
                                                     "parallel.schedule=interleaved", "parallel.virtual_stages=2",
                                                     "train.global_batch=1024", "train.micro_batch=1"});
  const auto prof = kp::load_profile(kSource + "/input/machines/h100-sxm-80gb.yaml");
  const kp::StepPrediction p = kp::predict_step(cfg, prof, false);
  EXPECT_EQ(p.rank_busy_ms.size(), 4096u);
  EXPECT_GT(p.step_ms, 0);
}

TEST(MachineProfile, TheShippedProfilesLoad) {
  int shipped = 0;
  for (const auto& e : std::filesystem::directory_iterator(kSource + "/input/machines")) {
    const std::string f = e.path().filename().string();
    if (e.path().extension() != ".yaml" || f == "this-machine.yaml") continue;  // calibrate's, not shipped
    const auto p = kp::load_profile(e.path().string());
    EXPECT_GT(p.fma_peak_tflops, 0) << f;
    EXPECT_GT(p.memory_gb, 0) << f;
    // A GPU node's profile costs bf16 runs too, except a V100's (no bf16 tensor cores).
    if (f.rfind("v100", 0) != 0) EXPECT_TRUE(p.bf16.given()) << f;
    // Every shipped profile is a GPU's, where kformer runs as its CUDA build (own_build.hpp), and
    // says so as profile_yaml writes it back.
    EXPECT_EQ(p.kformer_build, kformer::kernels::CodePath::cuda) << f;
    const std::string again = testing::TempDir() + "/again_" + f;
    std::ofstream(again) << kp::profile_yaml(p, "# again\n");
    EXPECT_EQ(kp::load_profile(again).kformer_build, kformer::kernels::CodePath::cuda) << f;
    // and the element size its bf16 GEMM timings wrote (the datasheet curves bf16, calibrate fp32)
    if (p.bf16.given()) EXPECT_EQ(p.bf16.gemm_output_bytes, f.find("measured") != std::string::npos ? 4 : 2) << f;
    EXPECT_EQ(kp::load_profile(again).bf16.gemm_output_bytes, p.bf16.gemm_output_bytes) << f;
    ++shipped;
  }
  EXPECT_GE(shipped, 7);
}

// published_accuracy: how the published runs on a profile came out (scripts/validate_published.py
// --check holds it to them), read with its sign and note; a profile no published run checks has none.
TEST(MachineProfile, PublishedAccuracyIsReadWithItsSignAndNote) {
  const auto h100 = kp::load_profile(kSource + "/input/machines/h100-sxm-80gb.yaml");
  ASSERT_TRUE(h100.published.given());
  EXPECT_GE(h100.published.rows, 1);
  EXPECT_LT(h100.published.mean_signed_pct, 0);  // its steps come out short (docs/predict-published.md)
  EXPECT_FALSE(h100.published.note.empty());
  EXPECT_FALSE(a100().published.given());
}

// attention.flash2_tflops (FlashAttention-2's published rates by head size and sequence length,
// which predict.attention=flash costs): read where a profile gives them, each length's figure exact,
// interpolated in log2 T between lengths and held beyond the ends, written back by profile_yaml; a
// head size the chart has not taken from the nearest it has (in log2, the larger on a tie); one rate
// stands for every head size and one figure for every length; not given (the GEMM curve) where a
// profile says nothing.
TEST(MachineProfile, FlashAttention2sRatesByHeadSizeAndLengthAreReadAndWrittenBack) {
  const auto a100 = kp::load_profile(kSource + "/input/machines/perlmutter-a100-40gb.yaml");
  const kp::HeadSeqRate& fa2 = a100.bf16.flash2_tflops;
  EXPECT_EQ(fa2.at(128, 4096), 173);
  EXPECT_EQ(fa2.at(128, 8192), 182);
  EXPECT_NEAR(fa2.at(128, 6144), 173 + (182 - 173) * (std::log2(6144.0) - 12), 1e-9);  // log2 4096 = 12
  EXPECT_EQ(fa2.at(128, 256), 99);     // below the first length: its figure
  EXPECT_EQ(fa2.at(128, 65536), 189);  // past the last
  EXPECT_EQ(fa2.at(64, 4096), 156);    // the chart's head-64 panel
  EXPECT_EQ(fa2.at(32, 4096), 156);    // nearest: 64
  EXPECT_EQ(fa2.at(96, 4096), 173);    // nearest in log2: 128 (96/64 = 1.5 against 128/96 = 1.33)
  EXPECT_EQ(fa2.at(256, 4096), 173);   // nearest: 128
  EXPECT_FALSE(a100.fp32.flash2_tflops.given());
  EXPECT_EQ(a100.fp32.flash2_tflops.at(128, 4096), 0);
  const std::string path = testing::TempDir() + "/flash2_profile.yaml";
  std::ofstream(path) << kp::profile_yaml(a100, "# again\n");
  const auto back = kp::load_profile(path).bf16;
  for (int hd : {64, 128}) EXPECT_EQ(back.flash2_tflops.by_hd.at(hd).by_seq, fa2.by_hd.at(hd).by_seq) << hd;
  EXPECT_EQ(back.triton_tflops.by_hd.at(64).by_seq, a100.bf16.triton_tflops.by_hd.at(64).by_seq);
  kp::MachineProfile one = a100;
  one.bf16.flash2_tflops.by_hd = {{0, kp::SeqRate{{{0, 200}}}}};  // one figure for every head size and length
  std::ofstream(path) << kp::profile_yaml(one, "# one\n");
  const auto again = kp::load_profile(path);
  EXPECT_EQ(again.bf16.flash2_tflops.at(64, 512), 200);
  EXPECT_EQ(again.bf16.flash2_tflops.at(128, 16384), 200);
  EXPECT_FALSE(kp::load_profile(kSource + "/input/machines/h200-measured.yaml").bf16.flash2_tflops.given());
  std::remove(path.c_str());
}

// attention.batched_gemm_tflops (a published benchmark of batched-GEMM attention, which
// predict.attention=batched_gemm takes as its floor): by head size, each a rate by sequence length,
// read from the A100 80GB profiles, written back by profile_yaml; a 40 GB A100's are the 80 GB's bars
// times its HBM's 1555 over 2039 GB/s (kernels bound by HBM), to the profile's one decimal; none in
// the fp32 section.
TEST(MachineProfile, BatchedGemmAttentionsBenchmarkIsReadAndWrittenBack) {
  const auto a100 = kp::load_profile(kSource + "/input/machines/dgx-a100-80gb.yaml");
  const auto& m = a100.bf16.batched_gemm_tflops;
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m.at(64).at(2048), 43);
  EXPECT_EQ(m.at(128).at(8192), 86);
  EXPECT_EQ(m.at(128).at(16384), 86);  // past the last length (the chart's 16k ran out of memory)
  EXPECT_TRUE(a100.fp32.batched_gemm_tflops.empty());
  for (const char* f : {"polaris-a100-40gb", "perlmutter-a100-40gb"}) {
    const auto small = kp::load_profile(kSource + "/input/machines/" + f + ".yaml");
    ASSERT_EQ(small.bf16.batched_gemm_tflops.size(), m.size()) << f;
    for (const auto& [hd, r] : m)
      for (const auto& [t, rate] : r.by_seq)
        EXPECT_NEAR(small.bf16.batched_gemm_tflops.at(hd).at(t), rate * small.copy_gbps / a100.copy_gbps, 0.05)
            << f << " hd " << hd << " T " << t;
  }
  const std::string path = testing::TempDir() + "/batched_profile.yaml";
  std::ofstream(path) << kp::profile_yaml(a100, "# again\n");
  const auto again = kp::load_profile(path).bf16.batched_gemm_tflops;
  ASSERT_EQ(again.size(), m.size());
  for (const auto& [hd, r] : m) EXPECT_EQ(again.at(hd).by_seq, r.by_seq) << hd;
  std::remove(path.c_str());
}

// A fill (family copy) and the gradient norm's sum of squares (reduction) take the profile's own
// rates where it has them (kformer calibrate measures them), the residual add's where it has not;
// the rates are written back by profile_yaml; they do not raise the rate the streaming passes
// predict adds on its own take (stream_gbps, the fastest of the required families, no faster than
// the copy).
TEST(MachineProfile, AFillAndAReductionTakeTheirOwnRatesWhereGiven) {
  kp::MachineProfile p = a100();
  ASSERT_EQ(p.memory_gbps.count("copy"), 0u);
  const double bytes = 4e8, stream = kp::stream_gbps(p);
  const auto us = [&](kformer::kernels::Family f) {
    kformer::kernels::KernelCall c;
    c.family = f;
    c.bytes = bytes;
    return kp::kernel_us(p, c);
  };
  using F = kformer::kernels::Family;
  EXPECT_NEAR(us(F::copy), p.launch_us + bytes / (p.memory_gbps.at("residual") * 1e3), 1e-9 * us(F::copy));
  p.memory_gbps["copy"] = 3 * p.copy_gbps;
  p.memory_gbps["reduction"] = 200;
  EXPECT_NEAR(us(F::copy), p.launch_us + bytes / (3 * p.copy_gbps * 1e3), 1e-9 * us(F::copy));
  EXPECT_NEAR(us(F::reduction), p.launch_us + bytes / (200 * 1e3), 1e-9 * us(F::reduction));
  EXPECT_EQ(kp::stream_gbps(p), stream);
  const std::string path = testing::TempDir() + "/optional_families.yaml";
  std::ofstream(path) << kp::profile_yaml(p, "# again\n");
  const kp::MachineProfile again = kp::load_profile(path);
  EXPECT_EQ(again.memory_gbps.at("copy"), 3 * p.copy_gbps);
  EXPECT_EQ(again.memory_gbps.at("reduction"), 200);
  std::remove(path.c_str());
}

TEST(MachineProfile, ABadProfileIsRefusedWithOneLine) {
  const std::string good = [] {
    std::ifstream in(kSource + "/input/machines/perlmutter-a100-40gb.yaml");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }();
  const auto with = [&](const std::string& from, const std::string& to) {
    std::string t = good;
    const auto at = t.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return t.replace(at, from.size(), to);
  };
  const std::vector<std::pair<std::string, std::string>> bad = {
      {with("copy_gbps: 1555", "copy_gbsp: 1555"), "copy_gbsp"},
      {with("fma_peak_tflops: 19.5", "fma_peak_tflops: fast"), "fma_peak_tflops"},
      {with("max_efficiency: 0.9", "max_efficiency: 1.5"), "gemm"},
      {with("  norm: 1100", "  norm: -3"), "memory_bound.norm"},
      {with("  norm: 1100", "  norm: 1100\n  copy: 0"), "memory_bound.copy"},
      {with("  norm: 1100", "  norm: 1100\n  convert: 900"), "memory_bound"},
      {with("      128: {512: 99,", "      128: {512: 0,"), "attention.flash2_tflops.128"},
      {with("      128: {512: 99,", "      128: {-512: 99,"), "attention.flash2_tflops.128"},
      {with("      128: {512: 99,", "      128: {long: 99,"), "attention.flash2_tflops.128"},
      {with("      128: {512: 99,", "      -128: {512: 99,"), "attention.flash2_tflops"},
      {with("      64: {512: 59,", "      64: {512: 59, 99: {1: 2},"), "attention.triton_tflops.64"},
      {with("      64: {512: 27.5,", "      0: {512: 27.5,"), "attention.batched_gemm_tflops"},
      {with("      64: {512: 27.5,", "      64: {512: 0,"), "attention.batched_gemm_tflops.64"},
      {with("    batched_gemm_tflops:\n      64: {512: 27.5, 1024: 30.5, 2048: 32.8, 4096: 34.3, 8192: 35.1}\n"
            "      128: {512: 40.4, 1024: 51.1, 2048: 58.0, 4096: 60.2, 8192: 65.6}",
            "    batched_gemm_tflops: 50"),
       "attention.batched_gemm_tflops"},
      {with("network:", "networks:"), "networks"},
      {with("kformer_build: cuda", "kformer_build: gpu"), "kformer_build"},
      {with("output_bytes: 2", "output_bytes: 3"), "gemm.output_bytes"},
      {with("sms: 108", "# no SMs"), "collective_sms"},
      {with("{intra_node: 24,", "{intra_node: 108,"), "collective_sms"},
      {good + "published_accuracy:\n  rows: 0\n  median_abs_pct: 1\n  mean_signed_pct: -1\n", "published_accuracy"},
      {good + "published_accuracy:\n  rows: 3\n  median_abs_pct: -1\n  mean_signed_pct: 1\n",
       "published_accuracy.median_abs_pct"},
      {good + "published_accuracy:\n  rows: 3\n  median_abs_pct: 1\n", "published_accuracy.mean_signed_pct"},
      {good + "published_accuracy:\n  rows: 3\n  median_abs_pct: 1\n  mean_signed_pct: x\n",
       "published_accuracy.mean_signed_pct"},
      {good + "published_accuracy:\n  rows: 3\n  median_abs_pct: 1\n  mean_signed_pct: 1\n  notes: x\n",
       "published_accuracy.notes"},
      {"name: [unclosed\n", "YAML"},
      {"", "empty"}};
  const std::string path = testing::TempDir() + "/bad_profile.yaml";
  for (const auto& b : bad) {
    std::ofstream(path) << b.first;
    try {
      kp::load_profile(path);
      ADD_FAILURE() << "accepted a profile with " << b.second;
    } catch (const kformer::ConfigError& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
      EXPECT_NE(msg.find(path), std::string::npos) << msg;
      EXPECT_NE(msg.find(b.second), std::string::npos) << msg;
    }
  }
  EXPECT_THROW(kp::load_profile(path + ".missing"), kformer::ConfigError);
}

// The trainer's step begins with the step program's prepare phase (every gradient zeroed, the
// bf16 copies of the fp32 masters refreshed), so predict's does: its kernels move the bytes of the
// gradients (and in bf16 the masters read and their copies written: the estimate's 6 bytes a
// parameter), and each stage's pipeline starts once they are done.
TEST(PredictStep, EachStageBeginsAfterItsPrepareKernels) {
  const auto prof = a100();
  const auto bytes_of = [](const kformer::WorkLog& log) {
    double b = 0;
    for (const kformer::WorkEntry& e : log.entries)
      if (e.kind == kformer::WorkEntry::Kind::kernel) b += e.call.bytes;
    return b;
  };
  for (const char* precision : {"fp32", "bf16"}) {
    const kformer::RunPlan one = deck("gpt3-small.yaml", {std::string("train.precision=") + precision});
    const double b = bytes_of(kformer::describe_phases(one, {0, 0, 0}).before);
    const double expected = one.memory.grads + (one.memory.bf16 ? one.memory.params : 0.0);
    EXPECT_NEAR(b / expected, 1.0, 1e-4) << precision;  // a few bytes of the step's scalars besides

    const kformer::RunPlan two = deck("gpt3-small.yaml", {std::string("train.precision=") + precision, "parallel.pp=2"});
    const kp::StepPrediction p = kp::predict_step(two, prof, true);
    ASSERT_EQ(p.spans.size(), 2u);
    for (int r = 0; r < 2; ++r) {
      double prepare = 0;
      for (const kformer::WorkEntry& e : kformer::describe_phases(two, {r, 0, 0}).before.entries)
        if (e.kind == kformer::WorkEntry::Kind::kernel) prepare += kp::kernel_us(prof, e.call);
      ASSERT_GT(prepare, 0) << precision << " stage " << r;
      double first_compute = 1e300, prepare_end = -1;
      for (const kp::SimSpan& s : p.spans[std::size_t(r)]) {
        if (s.name == "prepare") {
          EXPECT_EQ(s.start_us, 0.0);
          prepare_end = s.end_us;
        }
        if (s.name == "forward" || s.name == "backward") first_compute = std::min(first_compute, s.start_us);
      }
      EXPECT_NEAR(prepare_end, prepare, 1e-6 * prepare) << precision << " stage " << r;
      EXPECT_GE(first_compute, prepare_end) << precision << " stage " << r;
    }
    // The pipeline's own time (and so its bubble) leaves the prepare phase out, as the trainer's
    // timer does: one stage has none.
    EXPECT_NEAR(kp::predict_step(one, prof, false).rank0.bubble(), 0.0, 1e-9) << precision;
  }
}

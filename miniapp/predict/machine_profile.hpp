// A machine profile: what one device (a GPU, or a CPU rank) and its network cost, as `kformer
// predict` needs it. Kernel families each have a cost model: GEMMs a saturating efficiency
// against their FLOP count (with measured times at exact shapes where `calibrate` took them),
// attention a FLOP rate per kind (again with measured shapes), memory-bound kernels an effective
// bandwidth over the bytes they move, each call a launch overhead. The network is Hockney's
// alpha-beta per link class (within a node, between nodes) and per collective, on nccl-tests'
// bus bytes (comm/alpha_beta.hpp), so a fitted beta reads as a busbw. Profiles are YAML files
// (input/machines/); load_profile refuses a bad one with one line that names the file and key.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "settings/choices.hpp"

namespace kformer::predict {

struct GemmPoint {  // a measured GEMM: y(m,n) = x(m,k) w(n,k)^T, and its backward (both GEMMs)
  int m = 0, n = 0, k = 0;
  double forward_us = 0, backward_us = 0;
};

struct AttentionPoint {  // a measured causal attention of one rank's heads
  int b = 0, t = 0, h = 0, kv = 0, hd = 0;
  std::string kind;  // naive, fused
  double forward_us = 0, backward_us = 0;
};

// A kernel's published rate (TFLOP/s) by sequence length: one figure for every length (a YAML
// number), or figures at lengths (a map {T: TFLOP/s}) interpolated in log2 T between them and held
// beyond the first and the last. Not given: empty.
struct SeqRate {
  std::map<int, double> by_seq;  // T -> TFLOP/s; one figure for every length sits at T = 0
  bool given() const { return !by_seq.empty(); }
  double at(int t) const;  // 0 where not given
};

// A kernel's published rate by head size and sequence length: one SeqRate for every head size (a
// YAML number or {T: TFLOP/s}), or one per head size its source charts ({hd: rate, ...}); a head
// size not charted takes the nearest charted one (in log2, the larger on a tie). Not given: empty.
struct HeadSeqRate {
  std::map<int, SeqRate> by_hd;  // head size -> rate; one for every head size sits at hd = 0
  bool given() const { return !by_hd.empty(); }
  double at(int hd, int t) const;  // 0 where not given
};

struct LinkCost {  // time = latency_us + bus bytes / bandwidth
  double latency_us = 0, bandwidth_gbps = 0;  // Gbit/s of bus bandwidth; 0 = unlimited
  int ranks = 0;                              // the group size it was measured on; 0 = any
};

struct LinkClass {
  LinkCost fallback;                                         // "default": any collective
  // allreduce, allgather, reduce_scatter, send; iallreduce and ireduce_scatter: the non-blocking
  // forms, posted several at once and waited for together, as the data-parallel buckets are.
  std::map<std::string, std::vector<LinkCost>> collectives;
  // The entry for `kind` nearest to a group of n ranks (with `nonblocking`, the non-blocking form's
  // where the class has one), else the default.
  LinkCost cost(comm::OpKind kind, int n, bool nonblocking = false) const;
};

// What GEMMs and causal attention cost in one element type (the GEMMs' inputs, attention's q, k,
// v): GEMM efficiency(flops) = max_efficiency * flops / (flops + half_efficiency_gflop * 1e9) of
// the peak, with measured times at exact shapes where calibrate took them; attention a FLOP rate
// per kind (naive, fused), again with measured shapes.
struct ComputeRates {
  double gemm_peak_tflops = 0, gemm_max_efficiency = 1, gemm_half_efficiency_gflop = 0;
  // gemm.output_bytes: the element size of C in the timings the curve and points come from (2: bf16
  // outputs, as OpenXLA's table and cuBLAS's benchmarks time a bf16 GEMM; 4: fp32, as calibrate times
  // kformer's matmul_forward); 0: not said. A bf16 forward GEMM that writes wider (narrower) elements
  // than its timings did costs the difference more (less) at the profile's streaming rate
  // (kernel_costs.hpp, gemm_us).
  int gemm_output_bytes = 0;
  std::vector<GemmPoint> gemm_points;
  std::map<std::string, double> attention_tflops;  // naive, fused
  std::vector<AttentionPoint> attention_points;
  // attention.flash2_tflops: FlashAttention-2's rate on this GPU by head size and sequence length
  // (forward and backward together, over the causal half's FLOPs), as its authors publish it;
  // predict.attention=flash takes the GEMM curve but never above it; not given: the curve alone. Not
  // kformer's kernel: what the systems that call FA2 run.
  HeadSeqRate flash2_tflops;
  // attention.triton_tflops: FlashAttention's Triton kernel (flash_attn_triton.py, which llm-foundry's
  // MPT runs as attn_impl: triton), forward and backward together over the causal half's FLOPs, as
  // published for this GPU: predict.attention=triton's ceiling. Not given: predict refuses triton.
  HeadSeqRate triton_tflops;
  // attention.cudnn_forward_tflops / cudnn_backward_tflops: cuDNN's fused flash attention's published
  // rates on this GPU at head size 128 by sequence length (over the causal half's FLOPs), each pass's
  // ceiling where predict costs cuDNN's kernel (predict.attention=cudnn, or kformer's own vendor
  // kernel where calibrate has not timed it); not given: the GEMM curve alone.
  SeqRate cudnn_forward_tflops, cudnn_backward_tflops;
  // attention.half_rate_share: where a call does less work than the charts' calls (16k tokens a call at
  // hidden 2048: B*H*T*hd = 2048 * 16384), the flash kernels' rates above (flash2, triton, cudnn) times
  // (1 + h) s / (s + h), s the call's share of the charts' work and h this: a saturating curve, at half
  // its height at share h and at the charted rate at share 1 and above, as a small call's tiles leave
  // SMs idle; 0: not said, the charted rate at every size (kernel_costs.hpp, attention_size_factor).
  double attention_half_rate_share = 0;
  // attention.batched_gemm_tflops: batched GEMMs around a softmax kernel (Megatron-LM's attention,
  // PyTorch's standard attention) as a published benchmark timed them on this GPU, by head size, each
  // a rate by sequence length: forward and backward together over both products' FLOPs on the full
  // T*T scores (14 hd an element of them). predict.attention=batched_gemm costs a call's passes no
  // faster together than this (kernel_costs.hpp); not given: the modelled passes alone.
  std::map<int, SeqRate> batched_gemm_tflops;  // head size -> its rate by T
  // bf16 section only: GB/s of the memory-bound families calibrate timed on bf16 activations
  // (half the bytes of fp32, not always half the time); a family missing here takes the top
  // level's rate.
  std::map<std::string, double> memory_gbps;
  bool given() const { return gemm_peak_tflops > 0; }
  double best_gemm_tflops() const;  // the curve's ceiling, or a measured shape's rate above it
};

// Eager PyTorch's host time per transformer layer on this machine (bench/eager_op_cost.py): the
// Python, dispatcher, autograd and launch work of the layer's operators, measured on a model small
// enough that the device waits for the host. predict.host=eager costs a pass as the longer of its
// kernels and this; predict.host=blocking (CUDA_LAUNCH_BLOCKING=1) as their sum with the blocking_
// figures, where the host also waits for each kernel. All 0 where the profile does not say.
// Beside the layers, eager only: the model's top (embedding, final norm, head and loss) per
// micro-batch, forward and backward, and the optimizer's step with its zero_grad per step.
struct EagerHost {
  double layer_forward_us = 0, layer_backward_us = 0;
  double blocking_layer_forward_us = 0, blocking_layer_backward_us = 0;
  std::string source;  // the measurement's run
  double top_forward_us = 0, top_backward_us = 0, optimizer_us = 0;
  bool given(bool blocking) const { return blocking ? blocking_layer_forward_us > 0 : layer_forward_us > 0; }
  // Whether predict.host=`host` adds anything: eager or blocking, with this profile's figures for it.
  bool costs(HostCost host) const { return host != HostCost::kformer && given(host == HostCost::blocking); }
};

// How the published runs on this profile came out (scripts/validate_published.py over the runs file's
// steady rows of this machine, in the statistics or shown, stand-ins aside: its --check holds this
// section to them):
// how far to trust a step predicted here. Not given (rows 0): no published run checks the profile.
struct PublishedAccuracy {
  int rows = 0;
  double median_abs_pct = 0, mean_signed_pct = 0;  // |predicted / measured - 1| and its signed mean, in %
  std::string note;                                 // why, where the profile says
  bool given() const { return rows > 0; }
};

struct MachineProfile {
  std::string name, source;  // source: the file it was read from
  int devices_per_node = 1;
  double memory_gb = 0;            // per device; 0 = unknown (nothing is checked)
  double process_baseline_gb = 0;  // what a rank's process holds before the model (runtime, MPI)
  double fma_peak_tflops = 0, copy_gbps = 0, launch_us = 0;
  // Measured over predicted compute of a whole model chunk (calibrate): what the kernels timed
  // one at a time miss when they run in sequence (caches, page faults, sharing the cores); 1 in
  // datasheet profiles.
  double compute_scale = 1;
  // The time a rank blocked in a call takes to resume once its peers arrive: 0 where each rank
  // has its own core (or GPU); on a node whose cores are shared, the wait for the next turn on a
  // core, which every synchronising call pays (calibrate measures it).
  double wakeup_us = 0;
  // The same for a collective that its members enter together, each after computing alike (TP's
  // all-reduces, ZeRO-3's gathers): only the member the scheduler delayed makes the others wait.
  double sync_wakeup_us = 0;
  // Whether a non-blocking collective progresses while the rank computes (NCCL on a GPU), or only
  // while the rank is inside the library (MPI without a progress thread, as calibrate finds it).
  bool async_progress = false;
  // The top-level gemm and attention sections (fp32), and the `bf16:` section's (bf16 mixed
  // precision: a datasheet's tensor-core rates, or what calibrate measured); a profile without
  // one cannot cost a bf16 run (rates() says so).
  ComputeRates fp32, bf16;
  const ComputeRates& rates(bool bf16) const;
  std::map<std::string, double> memory_gbps;  // per memory-bound family (memory_families())
  LinkClass intra_node, inter_node;
  // network.nics_per_node: the NICs a node's devices share for traffic between nodes. Given, the
  // inter_node bandwidth is one NIC's, and a group spread over nodes gets the share of the node's
  // NICs its members there hold (network_cost.hpp); 0: inter_node is each rank's own link.
  int nics_per_node = 0;
  // network.one_stream: the communication library runs a rank's calls in order on one stream (NCCL
  // on the execution space's stream, as kformer hands it), so a blocking TP or ZeRO-3 call waits
  // for the pipeline sends posted before it; false for MPI on the host.
  bool one_stream = false;
  // sms: the device's streaming multiprocessors; network.collective_sms: the SMs one NCCL collective
  // holds while it runs, within a node and across nodes (a CTA per channel, none shared with a compute
  // kernel: NVIDIA/nccl#689). Compute beside a collective in flight gets the SMs it leaves
  // (compute_share_lost). 0: not given (nothing is charged).
  int sms = 0, collective_sms_intra = 0, collective_sms_inter = 0;
  bool holds_collective_sms() const { return sms > 0 && collective_sms_intra + collective_sms_inter > 0; }
  EagerHost eager_host;
  PublishedAccuracy published;
  // kformer_build: the kformer build that runs on this machine, whose code a prediction of kformer's
  // own run describes: `cuda` on a GPU (its GEMMs cuBLAS, writing bf16 outputs themselves), `host`
  // where the ranks run on CPUs (calibrate writes the build it ran).
  kernels::CodePath kformer_build = kernels::CodePath::this_build;
};

// kformer_build as a profile and predict's report write it: "cuda" or "host".
inline const char* kformer_build_name(kernels::CodePath b) { return b == kernels::CodePath::cuda ? "cuda" : "host"; }

// The memory-bound kernel families a profile rates: norm, activation, residual, rope,
// embedding, cross_entropy, optimizer.
const std::vector<std::string>& memory_families();
// Those it may rate besides (kformer calibrate measures them): copy (a fill: every gradient buffer
// zeroed), reduction (the gradient norm's sum of squares). Where a profile does not, they take the
// residual add's rate.
const std::vector<std::string>& optional_memory_families();

// Reads and checks a profile; throws ConfigError naming the file, the key and the fix.
MachineProfile load_profile(const std::string& path);
// YAML text of a profile (what calibrate writes); load_profile reads it back.
std::string profile_yaml(const MachineProfile& p, const std::string& header_comment);

// Where predict looks when predict.machine is empty, and calibrate writes: $KFORMER_MACHINE if
// set, else input/machines/this-machine.yaml under the working directory.
std::string default_profile_path();

}  // namespace kformer::predict

// The time of one kernel call on a machine profile, per family: GEMMs (a measured shape, else the
// profile's efficiency curve), causal attention (a measured shape, else FLOPs over its rate) and
// memory-bound kernels (the bytes each call describes over its family's bandwidth, the count
// calibrate divides by when it measures a family, so a family measured at a deck's shapes
// predicts those shapes exactly). Shapes as in block.hpp: N = B*T tokens, C = d_model.
#pragma once

#include <string>

#include "predict/machine_profile.hpp"
#include "settings/choices.hpp"
#include "settings/run_settings.hpp"

namespace kformer::predict {

// y(m,n) = x(m,k) w(n,k)^T, 2mnk FLOPs; backward: dx and dW, twice that. bf16: the inputs' type
// (the profile's bf16 rates; a profile without them refuses). out_bytes: a bf16 forward's output
// element size; where it differs from what the profile's timings wrote (gemm.output_bytes), the
// difference in y's bytes at the streaming rate is added (a wider y) or taken off (a narrower one):
// kformer's H100 calibration (h100-measured.yaml, fp32 outputs) lies that far above the bf16-output
// curve at all ten of its shapes (docs/predict.md), so the bytes are on top of the compute.
double gemm_us(const MachineProfile& p, bool bf16, int m, int n, int k, bool backward, int out_bytes = 0);
// Causal attention of b sequences of t tokens, h query heads (kv shared), head size hd.
double attention_us(const MachineProfile& p, bool bf16, const std::string& kind, int b, int t, int h, int kv, int hd,
                    bool backward);
double attention_flops(int b, int t, int h, int hd, bool backward);
// The same attention as another system's kernels run it (predict.attention), on the profile's GEMM
// curve in the run's precision and its `activation` bandwidth, each batched call's efficiency that of
// one GEMM of its FLOPs (a batched call fills the GPU as one GEMM of its size):
// - batched_gemm (Megatron-LM's attention): QK^T and PV as batched GEMMs over the full T*T scores
//   (no causal skip), then the fused scale-mask-softmax reading the scores and writing the
//   probabilities, 2 bytes an element in bf16, 4 in fp32; backward: the four products of the two
//   gradients and the softmax's backward (reads the probabilities and their gradient, writes the
//   scores'). Each product takes the longer of its FLOPs on the curve and its T*T matrix's bytes at
//   the profile's copy bandwidth (batched_attention_us). With dropout > 0 (predict.attention_dropout)
//   the forward also runs a dropout pass over the probabilities (reads them, writes them and a 1-byte
//   mask) and the backward one over their gradient (reads it and the mask, writes it), at the
//   `activation` bandwidth: PyTorch's dropout kernels, which Megatron-LM's attention calls.
//   Where the profile gives batched_gemm_tflops (a published benchmark of these kernels on that GPU),
//   the two passes together take no less than it says, each scaled alike (measured_batched_us).
// - flash (FlashAttention-2: flash-attn 2, PyTorch SDPA's flash backend): both products over the causal
//   half, no T*T traffic; backward 2.5 times the forward's products (it recomputes the scores), on the
//   GEMM curve but no faster than the profile's flash2_tflops where it has one (FA2 is not a GEMM:
//   50-73% of the A100's peak, 35% of the H100's, as its authors report).
// - cudnn (cuDNN's fused flash attention, Transformer Engine's FusedAttention): the same FLOPs on the
//   GEMM curve, no faster than the profile's cudnn_forward_tflops and cudnn_backward_tflops where it
//   has them (its published rates on that GPU); kformer's own cuDNN kernel (kernels.attention=vendor)
//   is costed so where calibrate has not timed it.
// - triton (FlashAttention's Triton kernel, flash_attn_triton.py: llm-foundry's MPT with attn_impl:
//   triton): the same FLOPs on the GEMM curve, no faster than the profile's triton_tflops (its
//   published rate on that GPU, 0.43-0.50 of FA2's on the A100), which a profile must give.
// Each of the three published rates for calls as large as the charts' (16k tokens at hidden 2048),
// times attention_size_factor (below) for smaller ones.
double system_attention_us(const MachineProfile& p, bool bf16, AttentionModel model, int b, int t, int h, int hd,
                           bool backward, double dropout = 0);
// The share of a flash kernel's charted rate a call of b sequences of h heads of T x hd runs at:
// s (1 + h) / (s + h), s its share of the charts' work a call, h the profile's half_rate_share;
// 1 for calls at least as large, or where the profile does not say.
double attention_size_factor(const ComputeRates& r, int b, int h, int t, int hd);
// The batched-GEMM attention above with the scores and d(probabilities) in score_bytes an element
// (Megatron-LM and kformer's kernels.attention=batched_gemm: the run's precision), as modelled.
double batched_attention_us(const MachineProfile& p, bool bf16, double score_bytes, int b, int t, int h, int hd,
                            bool backward);
// What the profile's benchmark of batched-GEMM attention (batched_gemm_tflops) says a call over
// `scores` T*T scores at head size hd takes, forward and backward together; 0 where it gives none.
// A score's time (14 hd FLOPs at the rate at T) is linear in hd between the head sizes given and
// past the largest (the T*T passes cost a score the same at any hd, the products' work grows with
// it; never below the largest's there), held at the smallest's below it and at the one's where only
// one is given.
double measured_batched_us(const ComputeRates& r, double scores, int t, int hd);
// That benchmark's rate (TFLOP/s, both products' forward and backward FLOPs over every score) at T and
// head size hd, as measured_batched_us takes it; 0 where the profile gives none.
double batched_gemm_rate(const ComputeRates& r, int t, int hd);
// An RMSNorm of rows x channels as eager PyTorch runs torchtitan's RMSNorm module (predict.rmsnorm=eager;
// torchtitan/models/norms.py: output = (x.float() * rsqrt(x.float().pow(2).mean(-1) + eps)).type_as(x)
// * weight), each operator a kernel over the activations, at the profile's `activation` bandwidth.
// Forward, 8 kernels and 36 bytes an element: the widening (2 read, 4 written), pow (4, 4), mean (4),
// the eps and rsqrt (a row's each), the product (4, 4), the narrowing (4, 2), the weight (2, 2).
// Backward, autograd's formula for each, 14 kernels and 92 bytes an element: the weight's two
// products and its sum over the rows (4, 6, 2), the widening back (6), the product's two (8, 12) and
// the sum over the channels (4), rsqrt's (a row's), mean's expansion (4), pow's x.pow(1), its
// doubling and product (8, 8, 12), the two gradients of x added (12), the narrowing back (6).
double eager_rmsnorm_us(const MachineProfile& p, std::int64_t rows, std::int64_t channels, bool backward);
// torchtitan's Llama block as eager PyTorch runs it (predict.pointwise=eager; torchtitan/models/llama/
// model.py at 395a52627), each operator a kernel over the activations of e bytes an element (2 in
// bf16), at the profile's `activation` bandwidth:
// - RoPE of Q and K (apply_rotary_emb: view_as_complex(x.float()) * freqs_cis, view_as_real,
//   type_as): per tensor the widening (e read, 4 written), the complex product (4, 4) and the
//   narrowing (4, e), three kernels and 20 bytes an element in bf16; in fp32 the product alone.
//   Backward: autograd's of each, the same kernels and bytes. `elements`: the rotated ones, Q's and K's.
// `tensors`: Q and K (2), or one of them.
double eager_rope_us(const MachineProfile& p, bool bf16, double elements, int tensors = 2);
// - repeat_kv (GQA, kv < h heads): x[:, :, :, None].expand(...).reshape(...) copies K and V out to
//   h heads (kv read, h written); backward: expand's, a sum over the repeats (h read, kv written).
//   Two kernels each way; nothing where kv == h.
double eager_repeat_kv_us(const MachineProfile& p, bool bf16, double rows, int h, int kv, int hd);
// - SwiGLU (FeedForward: w2(silu(w1(x)) * w3(x))) over rows x F: silu (e, e) and the product (2e, e),
//   two kernels and 5e bytes an element; backward autograd's: the product's two gradients (2e, e
//   each) and silu_backward (2e, e), three kernels and 9e bytes an element.
double eager_swiglu_us(const MachineProfile& p, bool bf16, double elements, bool backward);
// The loss over `logits` (a rank's rows x vocabulary entries) as eager PyTorch's operators, each a
// kernel at the profile's `activation` bandwidth, its cost put on kformer's three passes (`pass`:
// xent_local_max, xent_local_sums, xent_finish, the widening and narrowing on the last, which knows
// the run's precision: bf16 logits widened to fp32, e read and 4 written, and the gradient narrowed
// back, 4 and e; xent_whole_rows, kformer's one pass where one rank holds the vocabulary, costs all
// three):
// - vocab_parallel (Megatron-LM's _VocabParallelCrossEntropy, megatron/mpu/cross_entropy.py, over
//   output.float()): max (4) | subtract in place (4, 4), exp in place (4, 4), sum (4) | divide in
//   place (4, 4) and backward's product in place (4, 4): 52 bytes a logit in bf16, 40 in fp32.
// - cross_entropy (PyTorch's F.cross_entropy over output.float()): log_softmax (4, 4) | nll_loss
//   and the backward's zero-filled gradient (4) | its scatter and log_softmax's backward (8, 4):
//   36 bytes a logit in bf16, 24 in fp32.
// - xentropy (flash-attn 1.0.9's CrossEntropyLoss, csrc/xentropy from apex, over the logits in their
//   own type): | a forward kernel, a block a row, its max and sum of exponentials (the row's second
//   read from L2: on an A100 a block of the bf16 rows' 100 KB each, a couple a SM, about 20 MB in
//   flight) writing the loss and the log-sum-exp (e) | a backward kernel reading the logits and
//   writing their gradient (e, e): 6 bytes a logit in bf16, 12 in fp32, at the profile's
//   cross_entropy rate (kformer's own loss kernels', the same kind of row-streaming kernel).
// bf16: the run's precision (the logits' type).
double eager_loss_us(const MachineProfile& p, LossKernels loss, const char* pass, bool bf16, double logits);
// Composer's training metrics over a micro-batch's `logits` (predict.train_metrics=composer_lm), as
// eager PyTorch's operators at the activation bandwidth. Composer 0.16's Trainer._train_microbatch
// calls _eval_train_metrics after each micro-batch's backward (composer/trainer/trainer.py at
// v0.16.4; the same in the v0.13.4 of the PURE tables): under torch.no_grad() and the precision's
// autocast, each training metric's update. MPT's
// (llm-foundry's ComposerMPTCausalLM at 061f2c7: use_train_metrics defaults true) are
// LanguageCrossEntropy and LanguagePerplexity, the second a subclass of the first, so each runs
// CrossEntropyLoss(reduction='sum') over the logits (composer/metrics/nlp.py), which CUDA autocast
// runs in fp32: the widening (e read, 4 written; none in fp32), log_softmax (4, 4), nll_loss's gather
// and sum, then the count of targets (a compare, a sum) and two additions into the metric's state:
// 7 kernels (6 in fp32) and 14 bytes a logit (8) each. Once for both, eval_forward's shift of the
// labels (a clone and two copies): 3 kernels over the tokens only.
double eager_train_metrics_us(const MachineProfile& p, bool bf16, double logits);
// A norm (`norm`) or a residual add of rows x channels in a bf16 run as software that keeps its
// residual stream in the activations' type moves it (predict.residual; kformer's stream is fp32), at
// the family's bf16 rate. A norm reads the stream and writes its output, 2 bytes an element each
// forward; backward it reads the output's gradient and the stream and writes the stream's gradient
// (2 + 2 + 2), beside its fp32 per-row statistics and per-channel parameter gradients. A residual add
// reads two bf16 tensors and writes one (6), forward, and so does a backward's sum of two branches'
// gradients (`backward`). With dropout (activations_dropout: Megatron-LM's bias_dropout_add_fused_train
// on each branch, megatron/model/transformer.py, --hidden-dropout 0.1 by default): a forward add also
// writes its 1-byte mask, and a gradient sum is joined by the dropout's backward (the gradient and
// the mask read, the branch's gradient written: 5 more).
double residual_stream_us(const MachineProfile& p, ResidualStream r, bool norm, bool backward, std::int64_t rows,
                          std::int64_t channels);
// A memory-bound kernel of `family` moving `bytes`; on bf16 activations (bf16) at the profile's
// bf16 rate of the family where it has one.
double memory_us(const MachineProfile& p, const std::string& family, double bytes, bool bf16 = false);
// The rate (GB/s) at which a GEMM's epilogue streams its output: the profile's copy bandwidth, no
// faster than its fastest memory-bound family. On a calibrated profile that is the copy calibrate
// measured (Kokkos' deep_copy of arrays larger than the caches; its families, timed at the deck's
// shapes, may sit in L2 or trail in kformer's own kernels); on a datasheet one, whose copy_gbps is
// the memory's peak, the ~80% its streaming families are given.
double stream_gbps(const MachineProfile& p);

// Bytes AdamW moves over `elements` parameters (fp32): p, g, m, v read; p, m, v written. The
// model's kernels describe their own bytes (kernels/call_record.hpp).
namespace bytes {
double adamw(double elements);
}  // namespace bytes

}  // namespace kformer::predict

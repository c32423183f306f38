// The deck schema (see schema.hpp) and the parsing of one value against it.
#include "settings/schema.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <sstream>

#include "platform/errors.hpp"
#include "settings/choices.hpp"
#include "settings/systems.hpp"

namespace kformer {
namespace {

constexpr double kNoMax = std::numeric_limits<double>::infinity();
// Counts the trainer keeps in an `int` (iterations, batch sizes, ranks) stop at INT32_MAX; sizes
// stop where the products validate.cpp checks cannot overflow and the estimate stays quick.
constexpr double kInt = std::numeric_limits<std::int32_t>::max();
constexpr double kMaxLayers = 1024;  // 8x the deepest published model; pp*virtual_stages <= this

KeySpec integer(std::string n, std::int64_t d, double lo, double hi, std::string help) {
  return {std::move(n), KeyType::integer, d, {}, lo, hi, std::move(help)};
}
KeySpec real(std::string n, double d, double lo, double hi, std::string help) {
  return {std::move(n), KeyType::real, d, {}, lo, hi, std::move(help)};
}
KeySpec text(std::string n, std::string d, std::string help) {
  return {std::move(n), KeyType::text, std::move(d), {}, 0, 0, std::move(help)};
}
KeySpec choice(std::string n, std::vector<std::string> c, std::string help) {
  std::string d = c.front();
  return {std::move(n), KeyType::choice, d, std::move(c), 0, 0, std::move(help)};
}
// The same with another of the choices as the default.
KeySpec choice(std::string n, std::vector<std::string> c, std::string d, std::string help) {
  return {std::move(n), KeyType::choice, std::move(d), std::move(c), 0, 0, std::move(help)};
}

std::vector<KeySpec> make_schema() {
  return {
      choice("model.family", names_of<Family>(),
             "gpt: LayerNorm, learned positions, GELU, tied head; llama: RMSNorm, RoPE, SwiGLU, GQA, untied head"),
      integer("model.n_layers", 2, 1, kMaxLayers, "transformer blocks"),
      integer("model.d_model", 64, 1, 1 << 20, "hidden size C"),
      integer("model.n_heads", 4, 1, 1 << 16, "attention (query) heads; must divide d_model"),
      integer("model.n_kv_heads", 0, 0, 1 << 16, "key/value heads (GQA); 0 = n_heads; must divide n_heads"),
      integer("model.ffn_dim", 0, 0, 1 << 22, "MLP hidden size; 0 = 4*d_model (gpt) or 8/3*d_model rounded to 64 (llama)"),
      integer("model.vocab_size", 256, 2, 1 << 24, "vocabulary size (padded to a multiple of 64*tp internally)"),
      integer("model.max_seq_len", 64, 1, 1 << 22, "longest sequence the position table or RoPE covers"),
      integer("train.steps", 10, 0, kInt, "last iteration (counted from the start of the run, also after a resume)"),
      integer("train.global_batch", 8, 1, 1 << 24, "sequences per iteration, over all data-parallel ranks"),
      integer("train.micro_batch", 2, 1, 1 << 24, "sequences per forward/backward pass on one rank"),
      integer("train.seq_len", 32, 1, 1 << 22, "tokens per sequence T (<= model.max_seq_len)"),
      real("train.lr", 3e-4, 0, kNoMax, "peak learning rate (AdamW)"),
      integer("train.warmup", 0, 0, kInt, "iterations of linear warm-up, then cosine decay to lr/10"),
      real("train.weight_decay", 0.1, 0, kNoMax, "decoupled weight decay (AdamW)"),
      real("train.grad_clip", 1.0, 0, kNoMax, "global gradient-norm clip; 0 = off"),
      integer("train.seed", 1234, 0, kNoMax, "seed of parameter initialisation and random data"),
      choice("train.precision", names_of<Precision>(),
             "fp32, or bf16 mixed precision: fp32 master weights and AdamW state, bf16 weight copies and "
             "activations, fp32 accumulation, norms, softmax and loss"),
      choice("train.recompute", names_of<Recompute>(),
             "activation recomputation: selective recomputes the naive or batched_gemm attention's"
             " probabilities in backward, "
             "full keeps only each block's input and re-runs its forward, "
             "op (llama; torchtitan's selective op policy) keeps the outputs of Q, V, attention and the gate and "
             "re-runs the norms, the K, output and up projections, RoPE and SwiGLU"),
      integer("train.recompute_layers", 0, 0, 1 << 20,
              "with train.recompute=full: recompute only the first N blocks of each model chunk, the others keep "
              "all their activations (Megatron-LM's --recompute-method block; torchtitan's selective layer "
              "checkpointing of every 2nd block is N = half the chunk's blocks); 0 = every block"),
      integer("train.max_nan", 5, 1, kInt, "stop after this many non-finite iterations in a row"),
      integer("train.stop_at", 0, 0, kInt,
              "stop after this iteration, as a walltime would (checkpoint saved); 0 = run to train.steps"),
      real("memory.limit_gb", 0, 0, kNoMax,
           "refuse a layout whose per-rank estimate exceeds it, in GB of 1e9 bytes, not GiB (the 79.1 GiB "
           "CUDA reports for an H100 80GB are 84.9 GB); 0 = the share of each rank in its node's memory "
           "(physical or cgroup limit)"),
      text("data.source", "random", "'random' (tokens from the global sample index) or a uint16 token file (llm.c header)"),
      integer("parallel.tp", 1, 1, 4096, "tensor-parallel ranks (must divide n_heads and n_kv_heads)"),
      integer("parallel.pp", 1, 1, 4096, "pipeline stages"),
      integer("parallel.dp", 0, 0, 1 << 24, "data-parallel ranks; 0 = world / (tp*pp)"),
      integer("parallel.zero", 0, 0, 3,
              "0 none, 1 optimizer state sharded (in bf16 the fp32 masters too, the bf16 weights all-gathered "
              "after the step), 2 + gradients, 3 + parameters (FSDP)"),
      choice("parallel.grad_reduce_dtype", names_of<Precision>(),
             "element type of the data-parallel gradient all-reduce/reduce-scatter; bf16 halves its bytes "
             "and keeps the gradients in one bf16 buffer (each micro-batch's fp32 unit gradient added "
             "into it; ZeRO-3 and zb-h1 keep fp32 gradients and send a bf16 copy)"),
      choice("parallel.schedule", names_of<ScheduleKind>(),
             "pipeline schedule; zb-h1 splits backward into input and weight gradients, deferring the latter"),
      choice("parallel.sequence_parallel", {"false", "true"},
             "with parallel.tp > 1: split the norms, residuals and the activations between TP regions along the "
             "tokens (all-gather + reduce-scatter instead of all-reduce)"),
      integer("parallel.microbatches", 0, 0, 1 << 24, "micro-batches per iteration per pipeline; 0 = global_batch / (micro_batch*dp)"),
      integer("parallel.virtual_stages", 1, 1, 1024, "model chunks per rank for the interleaved schedule"),
      KeySpec{"parallel.stage_layers", KeyType::int_list, std::vector<std::int64_t>{}, {}, 0, kMaxLayers,
              "layers per pipeline chunk, e.g. 3,3,3,3; empty = as even as possible; the first may be 0 (a stage "
              "holding only the embedding) and the last 0 (only the final norm and the head), as DeepSpeed's "
              "pipeline places them"},
      choice("comm.backend", {"auto", "mpi", "nccl", "self"},
             "communicator backend; auto = nccl when the build has NCCL and the ranks run on GPUs, else mpi "
             "(self in a build without MPI)"),
      real("comm.emulate.latency_us", 0, 0, 1e7, "emulated network latency added per message (alpha)"),
      real("comm.emulate.bandwidth_gbps", 0, 0, 1e6,
           "emulated network bandwidth (beta), Gbit/s, at least 0.001; 0 = no limit"),
      real("comm.timeout_s", 600, 0, 1e7, "abort a collective that has not completed after this long"),
      choice("comm.strict", {"false", "true"},
             "enforce NCCL's rules on any backend: buffers in device Views, sends that wait for their receive, "
             "one stream (default: $KFORMER_COMM_STRICT, which the test suite sets)"),
      integer("straggler.rank", -1, -1, kInt, "world rank whose compute is stretched; -1 = none"),
      real("straggler.slowdown", 1.0, 1.0, 1000, "factor by which the straggler's compute is stretched"),
      choice("kernels.gemm", names_of<GemmSetting>(),
             "GEMM: portable Kokkos (native), the vendor library (BLAS, cuBLAS), or auto: the faster of the two "
             "timed at start-up at a layer's shape in the run's precision"),
      choice("kernels.attention", names_of<AttentionSetting>(),
             "attention: materialised scores, tiled online softmax, materialised scores with its products as "
             "batched vendor GEMMs (cuBLAS, OpenBLAS), cuDNN's flash attention (vendor: bf16 under CUDA, builds "
             "with cuDNN), or auto: the fastest of those built and valid for the run's precision, timed at "
             "start-up at a layer's shape (the run's call, cut to a budget), among those whose memory estimate fits and whose results "
             "agree with another's there"),
      text("checkpoint.save", "", "directory to save universal checkpoints into; empty = none"),
      text("checkpoint.load", "", "checkpoint directory to resume from; empty = start fresh"),
      integer("checkpoint.every", 0, 0, kInt, "save every N iterations (and at the end); 0 = only at the end"),
      text("output.json", "", "path of the JSON report written by rank 0; empty = none"),
      text("output.trace", "", "directory for Chrome trace-event timelines; empty = none"),
      integer("output.log_every", 1, 1, kInt, "print a log line every N iterations"),
      choice("output.phase_timing", {"false", "true"},
             "fence after each micro-batch's forward and backward so the forward/backward split, the bubble and "
             "the timeline are the device's times on a GPU (a host synchronisation per micro-batch; on the host "
             "the times are the same either way)"),
      choice("output.kernel_times", {"false", "true"},
             "time every kernel call of the steps after the first between fences (a host synchronisation before and "
             "after each call; the steps run that much longer), and report them per step by kernel family and entry "
             "point beside the time outside the calls"),
      real("output.peak_tflops", 0, 0, kNoMax, "datasheet peak TFLOP/s per rank for a second MFU figure; 0 = none"),
      text("output.export", "", "one-rank runs: write parameters, gradients and tokens of iteration 1 as safetensors (reference checks)"),
      real("calibrate.agreement", 0.1, 0, 1,
           "kformer calibrate measures in rounds, the kernels and then the whole model's scale over them, until "
           "three rounds in a row agree on that scale within this fraction of their median (the wake-ups within 5 "
           "times it, or 50 us), at most calibrate.max_repeats times; each kernel figure is the median of its "
           "rounds; a figure whose repeats never agree is refused (exit 2, no profile written)"),
      integer("calibrate.max_repeats", 8, 3, 100, "the most rounds (and repeats of each wake-up) calibrate takes"),
      text("predict.machine", "",
           "machine profile (YAML) that kformer predict reads; empty = $KFORMER_MACHINE, else "
           "input/machines/this-machine.yaml (what kformer calibrate writes)"),
      integer("predict.world", 0, 0, 1 << 24, "ranks kformer predict simulates; 0 = tp*pp*dp (dp 1 when unset)"),
      choice("predict.system", software_system_names(),
             "software whose run kformer predict costs: kformer (its own run on the machine) or a preset that sets "
             "the predict.* keys below as that software behaves (megatron-lm-2022, megatron-core, deepspeed-2021, "
             "deepspeed-2022, torchtitan, pytorch-eager, llm-foundry-2023; docs/predict.md); a key given in the "
             "deck or on the command line keeps its value"),
      choice("predict.attention", names_of<AttentionModel>(),
             "attention kernels kformer predict costs: kformer's own (the profile's attention rates; under "
             "kernels.attention=auto the kind its start-up would take there, the fastest the profile rates whose "
             "memory fits: cuDNN's kernel in bf16 where it gives cudnn rates, batched GEMMs where it gives "
             "batched_gemm_tflops), batched_gemm "
             "(Megatron-LM's: two batched GEMMs over the full T*T scores on the GEMM curve, the softmax at memory "
             "bandwidth, no faster together than the profile's bf16 attention.batched_gemm_tflops), flash (FlashAttention-2's: the causal half on the GEMM curve, no faster than the profile's bf16 "
             "attention.flash2_tflops; no T*T traffic), cudnn (cuDNN's fused flash attention, Transformer Engine's "
             "choice on Hopper: the causal half on the GEMM curve, no faster than the profile's bf16 "
             "attention.cudnn_forward_tflops and cudnn_backward_tflops) or triton (FlashAttention's Triton kernel, "
             "llm-foundry's MPT with attn_impl: triton: the causal half on the GEMM curve, no faster than the "
             "profile's bf16 attention.triton_tflops, which the profile must give)"),
      choice("predict.pipeline_p2p", names_of<PipelineP2p>(),
             "pipeline sends kformer predict models: overlapped (kformer's: a stage computes while its sends are in "
             "flight), serialized (Megatron-LM's and DeepSpeed's pipelines of 2022, Megatron-Core's 1F1B: a stage's "
             "next computation waits for its sends, which their send calls queue on the compute stream) or "
             "prefetched (Megatron-Core's overlap_p2p_comm, on by default under interleaving: each send and receive "
             "a non-blocking call of its own, an action's input received from the end of the stage's previous "
             "action of its phase, so a forward's input arrives while the backward before it runs)"),
      choice("predict.tp_comm", names_of<Overlap>(), "serialized",
             "tensor-parallel collectives kformer predict models: serialized (kformer's: each all-gather, "
             "reduce-scatter or all-reduce between the GEMMs it feeds or follows) or overlapped (Megatron-Core's "
             "--tp-comm-overlap through Transformer Engine: with sequence parallelism an all-gather is pipelined with "
             "the GEMM that reads it, a reduce-scatter with the GEMM that writes it; each such pair costs the longer "
             "of the two)"),
      choice("predict.tp_input_grad", names_of<Overlap>(), "serialized",
             "a column-parallel layer's input-gradient collective (all-reduce, or reduce-scatter under sequence "
             "parallelism) as kformer predict models it: serialized (kformer's: after the layer's backward GEMMs) or "
             "overlapped (Megatron-LM's since 2021, LinearWithGradAccumulationAndAsyncCommunication: started after "
             "the input-gradient GEMM and run beside the weight-gradient GEMM, and under sequence parallelism the "
             "input's all-gather for the weight gradient beside the input-gradient GEMM)"),
      choice("predict.tp_precision", names_of<TpPrecision>(), "fp32",
             "the type kformer predict costs a bf16 run's tensor-parallel collectives of activations in: fp32 "
             "(kformer's: it sums the partial products in fp32) or activations (Megatron-LM's, DeepSpeed's, "
             "Megatron-Core's, PyTorch's: the bf16 tensors of a bf16 model, half the bytes); the loss statistics and "
             "parameter gradients stay fp32"),
      real("predict.attention_dropout", 0, 0, 0.999,
           "dropout probability on the attention probabilities that kformer predict costs with "
           "predict.attention=batched_gemm: above 0, a pass over the T*T probabilities writing them and a 1-byte "
           "mask, and one in the backward (Megatron-LM's --attention-dropout, 0.1 by default; kformer has no "
           "dropout; flash kernels drop inside the kernel)"),
      choice("predict.param_gather", names_of<Overlap>(), "serialized",
             "ZeRO-1/2's parameter all-gather after the optimizer step as kformer predict models it: serialized "
             "(kformer's: the step ends when it ends) or overlapped (Megatron-Core's --overlap-param-gather: it runs "
             "beside the next iteration's first forward, whose modules wait for their buckets)"),
      choice("predict.gather_copy", names_of<GatherCopy>(),
             "what follows each ZeRO-3 (FSDP) all-gather on the compute stream as kformer predict models it: none "
             "(kformer's: the bf16 unit is gathered into the buffer the GEMMs read) or copy_out (FSDP2's "
             "foreach_all_gather_copy_out: the gathered bytes copied into each parameter's own tensor, read and "
             "written once, before the unit's forward or backward runs)"),
      choice("predict.scatter_copy", names_of<ScatterCopy>(),
             "what precedes each ZeRO-3 (FSDP) unit's gradient reduce-scatter as kformer predict models it: none "
             "(kformer's: the unit's gradient buffer is reduce-scattered as it is) or copy_in (FSDP2's "
             "foreach_reduce_scatter_copy_in: the unit's unsharded gradients, in the parameters' type, copied into "
             "the reduce-scatter's input in the reduce type, after each micro-batch's backward of the unit)"),
      choice("predict.zero3_gather", names_of<Overlap>(), "serialized",
             "each ZeRO-3 (FSDP) unit's all-gather as kformer predict models it: serialized (kformer's ParamStore: "
             "a blocking call as the unit's forward or backward begins) or overlapped (FSDP2 and FSDP1: on a stream "
             "of their own, the next unit's gather runs while the current one computes; the rank waits only for "
             "what outlasts it)"),
      choice("predict.pipeline_messages", names_of<PipelineMessages>(),
             "how a pipeline message split over TP (no sequence parallelism) is handled around the backward as "
             "kformer predict models it: split (kformer's and Megatron-LM's: each TP rank sends its part of an "
             "activation or gradient, all-gathered on arrival), partitioned (DeepSpeed's pipeline engine from 0.5.4: "
             "the same, and the stage's output, kept as its part after the send, all-gathered back before its "
             "backward) or partitioned_whole_grads (DeepSpeed before 0.5.4: as partitioned, but every TP rank sends "
             "the whole gradient, which needs no gather)"),
      choice("predict.pipeline_calls", names_of<PipelineCalls>(),
             "how a pipeline rank's sends and receive between two of its computations run as kformer predict "
             "models them: grouped (kformer's and Megatron-LM's batched exchange: one group, waited for together) "
             "or one_by_one (DeepSpeed's pipeline engine: each a blocking call of its own, in its TrainSchedule's "
             "order: a forward step sends the gradient of the backward before it, then receives its activation; a "
             "backward step receives its gradient, then sends the activation of the forward before it); "
             "one_by_one needs parallel.schedule=1f1b, DeepSpeed's one schedule"),
      choice("predict.residual", names_of<ResidualStream>(),
             "the residual stream's type in a bf16 run as kformer predict costs its norms and residual adds: fp32 "
             "(kformer's: each norm reads fp32, each add reads and writes fp32), activations (PyTorch's bf16 "
             "models: bf16 throughout) or activations_dropout (Megatron-LM's: bf16 with its fused bias-dropout-add, "
             "hidden dropout 0.1, a 1-byte mask written forward and read backward)"),
      choice("predict.rmsnorm", names_of<Fusion>(),
             "how the costed software runs an RMSNorm as kformer predict models it: fused (one kernel each way: "
             "kformer's, torchtitan's fused_rmsnorm, Transformer Engine's) or eager (torchtitan's RMSNorm module, "
             "norm_type = \"rmsnorm\", as eager PyTorch runs it: the widening to fp32, pow, mean, rsqrt, the "
             "products, the narrowing and the weight each a kernel over the activations, and autograd's backward "
             "of each); torchtitan's configs choose it (a row sets it), ezpz's Llama has no other, so the pytorch-eager "
             "preset sets eager"),
      choice("predict.pointwise", names_of<Fusion>(),
             "how the costed software runs a Llama block's RoPE, GQA's repeated K and V heads and SwiGLU as kformer "
             "predict models them: fused (one kernel each way: kformer's, Transformer Engine's, torch.compile's) or "
             "eager (torchtitan's Llama model without torch.compile: RoPE as a complex product in fp32 with its "
             "widening and narrowing, repeat_kv's copies, silu and the product, and autograd's backward of each, "
             "each operator a kernel over the activations); the torchtitan preset sets eager (its train configs: "
             "compile = false), and pytorch-eager (ezpz's Llama is that model)"),
      choice("predict.loss", names_of<LossKernels>(),
             "how the costed software runs the loss over the logits as kformer predict models it: fused (kformer's: "
             "three passes under TP, one over whole rows at TP 1), vocab_parallel (Megatron-LM's and Megatron-DeepSpeed's _VocabParallelCrossEntropy over "
             "the logits widened to fp32: max, subtract, exp, sum and divide forward, a product backward, each a "
             "kernel; the megatron-lm-2022, megatron-core and deepspeed presets) or cross_entropy (PyTorch's F.cross_entropy over "
             "the widened logits: log_softmax and its backward; the torchtitan and pytorch-eager presets) or xentropy "
             "(flash-attn 1.0.9's fused cross-entropy over the logits in their own type: a forward kernel reading them, "
             "a backward kernel reading them and writing their gradient; the llm-foundry-2023 preset)"),
      choice("predict.logits", names_of<LogitsLayout>(),
             "where the costed software runs the loss under tensor parallelism: sharded (kformer's, Megatron-LM's "
             "vocab-parallel loss and torchtitan's loss_parallel: each TP rank over its share of the vocabulary) or "
             "gathered (ezpz's examples/fsdp_tp.py: its output layer's ColwiseParallel(output_layouts=Replicate()) "
             "all-gathers the logits over TP, in the run's precision, and every TP rank runs the loss over the whole "
             "vocabulary; the pytorch-eager preset)"),
      choice("predict.train_metrics", names_of<TrainMetrics>(),
             "what the costed software computes from each micro-batch's logits besides the loss, as kformer predict "
             "models it: none (kformer's) or composer_lm (Composer 0.16's trainer updates the model's training "
             "metrics after each micro-batch's backward, under autocast and without gradients; MPT's are "
             "LanguageCrossEntropy and LanguagePerplexity, each a CrossEntropyLoss(reduction='sum') over the "
             "logits: widened to fp32, log_softmax, nll_loss; the llm-foundry-2023 preset)"),
      choice("predict.memory", names_of<MemoryModel>(),
             "whose memory kformer predict's peak per rank and its fits verdict are: kformer (its own step's "
             "estimate at the layout) or composer_mpt (what Composer 0.16's FSDP1 holds for llm-foundry's MPT: "
             "16 bytes a parameter sharded, bf16 units gathered, the tensors MPT's blocks save or only their inputs "
             "under activation checkpointing, the logits Composer keeps until its training metrics widen them to "
             "fp32 after the backward; the llm-foundry-2023 preset) or megatron_lm (Megatron-LM of 2022: 18 bytes a "
             "parameter of the rank, 2 + 4 + 12/dp with the distributed optimizer, and Korthikanti et al.'s count of "
             "what a GPT layer keeps, sbh (34 + 5as/h) bytes a micro-batch cut by TP and sequence parallelism, over the "
             "micro-batches its schedules warm up; the megatron-lm-2022 preset); predict/software_memory.hpp"),
      choice("predict.grad_reduce", names_of<GradReduce>(),
             "data-parallel gradient reduction kformer predict models: overlapped (kformer's: each bucket as the "
             "last backward frees it, where the profile's network progresses on its own; PyTorch's DDP, which "
             "Megatron-LM's published runs took without a pipeline), serialized (Megatron-LM's own DDP, which they "
             "took with one, and DeepSpeed's pipeline engine: one reduction after the last backward) or delayed "
             "(Megatron-Core's --overlap-grad-reduce with its default delay_grad_reduce: the first pipeline stage's "
             "buckets as its last backward frees them, every other stage's after its last backward, in the "
             "pipeline's bubble; interleaved, each chunk's pipeline-rank backward steps after the chunk's last; "
             "overlapped without a pipeline)"),
      choice("predict.grad_accumulate", names_of<GradAccumulation>(),
             "how kformer predict adds each micro-batch's weight gradients to the iteration's: fused (kformer's and "
             "Megatron-LM's: the weight-gradient GEMM adds into the fp32 gradient), fp32_pass (DeepSpeed's "
             "BF16_Optimizer of 2022: after each micro-batch's backward its bf16 gradients are widened and added to "
             "fp32 ones, 18 bytes per parameter) or lp_pass (PyTorch's autograd adding into the bf16/fp16 gradient, "
             "DeepSpeed's pipeline of 2021: 6 bytes per parameter)"),
      choice("predict.bucket_pass", names_of<BucketPass>(),
             "what the data-parallel wrapper does to each fp32 gradient bucket before its reduction, once an "
             "iteration, as kformer predict models it: none (kformer's: the 1/N is in the loss gradient), scale "
             "(Megatron-LM's own DDP of 2022: the buffer divided by DP, 8 bytes per parameter) or nan_check_scale "
             "(Megatron-Core r0.8: the bucket's norm checked for NaN, 4 bytes per parameter, then multiplied by "
             "1/DP where DP > 1, 8 more); half those bytes with parallel.grad_reduce_dtype=bf16 (an fp16 run's buffer)"),
      choice("predict.embedding_grad", names_of<EmbeddingGrad>(),
             "how the token embedding's gradient is made each micro-batch as kformer predict models it: sparse "
             "(kformer's: the batch's rows added into it), dense (PyTorch's F.embedding backward, "
             "embedding_dense_backward: a zeroed gradient of the rank's whole table in the weights' type, every "
             "micro-batch; DeepSpeed, torchtitan, eager PyTorch) or dense_main_grad (that, then Megatron's gradient "
             "hook adding it into the fp32 main_grad: main_grad.add_(grad))"),
      choice("predict.host", names_of<HostCost>(),
             "the host's part in kformer predict's cost of each layer: kformer (C++ launches that run ahead of the "
             "device: the profile's launch_us per kernel), eager (eager PyTorch: a layer's pass takes at least the "
             "profile's eager_host time, the device waiting for a host slower than its kernels) or blocking "
             "(CUDA_LAUNCH_BLOCKING=1: the host waits for each kernel, so a pass takes its kernels' time plus the "
             "profile's eager_host blocking time); eager and blocking cost nothing more where the profile has no "
             "eager_host section (bench/eager_op_cost.py measures it)"),
      choice("predict.largest_micro_batch", {"false", "true"},
             "kformer predict also finds the largest train.micro_batch whose predicted peak per rank fits the device "
             "(as predict.memory counts it): each divisor of the sequences a data-parallel rank takes a step, largest "
             "first, the deck's other settings kept; the summary's 'largest fit' line and the report's "
             "summary.memory.largest_micro_batch (predict/largest_fit.hpp)"),
      choice("predict.breakdown", {"false", "true"},
             "kformer predict also predicts the step with each predict.* key that departs from kformer's value "
             "set back to it, alone, and reports what each costs (the report's predicted.key_costs and a line of "
             "the summary)"),
  };
}

std::size_t edit_distance(const std::string& a, const std::string& b) {
  // Optimal string alignment: a swap of two neighbours counts as one edit ("laeyrs").
  const std::size_t n = a.size(), m = b.size();
  std::vector<std::vector<std::size_t>> d(n + 1, std::vector<std::size_t>(m + 1));
  for (std::size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= n; ++i)
    for (std::size_t j = 1; j <= m; ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[n][m];
}

// The sections ("model", "comm", "comm.emulate"): every proper dotted prefix of a key.
const std::vector<std::string>& sections() {
  static const std::vector<std::string> out = [] {
    std::vector<std::string> v;
    for (const auto& k : schema())
      for (auto dot = k.name.find('.'); dot != std::string::npos; dot = k.name.find('.', dot + 1))
        if (std::find(v.begin(), v.end(), k.name.substr(0, dot)) == v.end()) v.push_back(k.name.substr(0, dot));
    return v;
  }();
  return out;
}

std::string trim(const std::string& s) {
  const char* space = " \t\r\n\v\f";
  const auto b = s.find_first_not_of(space);
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(space) - b + 1);
}

[[noreturn]] void bad(const KeySpec& spec, const std::string& text) {
  throw ConfigError(spec.name + "='" + printable(text) + "' is not valid: expected " + describe_valid(spec));
}

// Decimal digits only: no hex, octal, exponent or digit separators, so "0x10" and "1e3" are
// refused instead of read as something the user may not have meant.
std::int64_t parse_int(const KeySpec& spec, const std::string& text) {
  const std::string t = trim(text);
  const std::size_t first = !t.empty() && (t[0] == '-' || t[0] == '+') ? 1 : 0;
  if (first >= t.size() || t.find_first_not_of("0123456789", first) != std::string::npos) bad(spec, text);
  errno = 0;
  const long long v = std::strtoll(t.c_str(), nullptr, 10);
  if (errno == ERANGE) bad(spec, text);
  return v;
}

// Decimal notation only (digits, one point, an exponent): strtod alone would also take hex
// floats, "inf", "nan" and "infinity".
double parse_real(const KeySpec& spec, const std::string& text) {
  const std::string t = trim(text);
  std::size_t i = 0, digits = 0;
  auto skip_digits = [&] {
    std::size_t n = 0;
    while (i < t.size() && t[i] >= '0' && t[i] <= '9') ++i, ++n;
    return n;
  };
  if (i < t.size() && (t[i] == '-' || t[i] == '+')) ++i;
  digits += skip_digits();
  if (i < t.size() && t[i] == '.') ++i, digits += skip_digits();
  if (digits > 0 && i < t.size() && (t[i] == 'e' || t[i] == 'E')) {
    ++i;
    if (i < t.size() && (t[i] == '-' || t[i] == '+')) ++i;
    if (skip_digits() == 0) bad(spec, text);
  }
  if (digits == 0 || i != t.size()) bad(spec, text);
  errno = 0;
  const double v = std::strtod(t.c_str(), nullptr);
  if (errno == ERANGE || !std::isfinite(v)) bad(spec, text);  // beyond a double, or below its smallest
  return v == 0 ? 0.0 : v;                                    // no "-0" in the resolved deck
}

void check_range(const KeySpec& spec, double v, const std::string& text) {
  if (v < spec.min || v > spec.max) bad(spec, text);
}

// A bound as a user would write it: integers in full ("1048576", not "1.04858e+06").
std::string format_bound(double v) {
  std::ostringstream os;
  if (v == std::floor(v) && std::fabs(v) < 1e15) os << static_cast<long long>(v);
  else os << v;
  return os.str();
}

// Length of the UTF-8 sequence starting at s[i], or 0 when the bytes there are not UTF-8.
std::size_t utf8_length(const std::string& s, std::size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  std::size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k)
    if ((static_cast<unsigned char>(s[i + k]) >> 6) != 0x2) return 0;
  const auto c1 = static_cast<unsigned char>(n > 1 ? s[i + 1] : 0);
  if ((n == 2 && c < 0xc2) || (n == 3 && c == 0xe0 && c1 < 0xa0) || (n == 3 && c == 0xed && c1 >= 0xa0) ||
      (n == 4 && c == 0xf0 && c1 < 0x90) || (n == 4 && (c > 0xf4 || (c == 0xf4 && c1 >= 0x90))))
    return 0;  // overlong forms, UTF-16 surrogates, beyond U+10FFFF
  return n;
}

std::string hex_byte(unsigned char c) {
  const char* digits = "0123456789abcdef";
  return std::string("\\x") + digits[c >> 4] + digits[c & 0xf];
}

}  // namespace

const std::vector<KeySpec>& schema() {
  static const std::vector<KeySpec> s = make_schema();
  return s;
}

const KeySpec* find_key(const std::string& name) {
  for (const auto& k : schema())
    if (k.name == name) return &k;
  return nullptr;
}

std::string suggest_key(const std::string& name) {
  if (name.empty() || name.size() > 64) return "";  // no one mistypes 64 characters; keep it quick
  std::string best;
  std::size_t best_d = std::string::npos;
  for (const auto& k : schema()) {
    const std::size_t d = edit_distance(name, k.name);
    if (d < best_d) best_d = d, best = k.name;
  }
  for (const auto& sec : sections()) {
    const std::size_t d = edit_distance(name, sec);
    if (d < best_d) best_d = d, best = sec;
  }
  // Also match on the last component alone ("n_layers" -> "model.n_layers").
  for (const auto& k : schema()) {
    const std::string leaf = k.name.substr(k.name.rfind('.') + 1);
    if (leaf == name) return k.name;
  }
  return best_d <= std::max<std::size_t>(2, name.size() / 4) ? best : "";
}

bool is_section(const std::string& name) {
  return std::find(sections().begin(), sections().end(), name) != sections().end();
}

std::string printable(const std::string& text, std::size_t max_chars) {
  std::string out;
  std::size_t chars = 0;
  for (std::size_t i = 0; i < text.size(); ++chars) {
    if (chars == max_chars) return out + "...";
    const auto c = static_cast<unsigned char>(text[i]);
    const std::size_t n = utf8_length(text, i);
    if (n == 0 || c < 0x20 || c == 0x7f) {
      out += hex_byte(c);
      ++i;
    } else {
      out.append(text, i, n);
      i += n;
    }
  }
  return out;
}

std::size_t invalid_utf8_at(const std::string& text) {
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t n = utf8_length(text, i);
    if (n == 0) return i;
    i += n;
  }
  return std::string::npos;
}

std::string text_problem(const std::string& text) {
  for (std::size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    const std::size_t n = utf8_length(text, i);
    if (n == 0) return "a byte that is not UTF-8 (" + hex_byte(c) + ") at byte " + std::to_string(i + 1);
    if (c < 0x20 || c == 0x7f) return "a control character (" + hex_byte(c) + ") at byte " + std::to_string(i + 1);
    i += n;
  }
  return "";
}

Value parse_value(const KeySpec& spec, const std::string& text) {
  switch (spec.type) {
    case KeyType::integer: {
      const std::int64_t v = parse_int(spec, text);
      check_range(spec, static_cast<double>(v), text);
      return v;
    }
    case KeyType::real: {
      const double v = parse_real(spec, text);
      check_range(spec, v, text);
      return v;
    }
    case KeyType::text: {
      // Paths and names: a newline or stray byte here would become a file nobody can find, and
      // invalid UTF-8 would stop the JSON report from being written at the end of the run.
      const std::string problem = text_problem(text);
      if (!problem.empty())
        throw ConfigError(spec.name + "='" + printable(text) + "' contains " + problem +
                          ": write it as plain UTF-8 text on one line");
      return trim(text);
    }
    case KeyType::choice: {
      const std::string t = trim(text);
      if (std::find(spec.choices.begin(), spec.choices.end(), t) == spec.choices.end()) bad(spec, text);
      return t;
    }
    case KeyType::int_list: {
      std::string t = trim(text);
      if (!t.empty() && t.front() == '[' && t.back() == ']') t = t.substr(1, t.size() - 2);
      std::vector<std::int64_t> out;
      if (trim(t).empty()) return out;
      if (t.back() == ',') bad(spec, text);  // "3,3," is a list with a missing item
      std::stringstream ss(t);
      std::string item;
      while (std::getline(ss, item, ',')) {
        std::int64_t v = 0;
        try {
          v = parse_int(spec, item);
        } catch (const ConfigError&) {
          bad(spec, text);  // name the whole list, not the one item
        }
        check_range(spec, static_cast<double>(v), text);
        out.push_back(v);
      }
      return out;
    }
  }
  bad(spec, text);
}

std::string format_value(const Value& v) {
  std::ostringstream os;
  if (auto* i = std::get_if<std::int64_t>(&v)) os << *i;
  else if (auto* d = std::get_if<double>(&v)) os << *d;
  else if (auto* s = std::get_if<std::string>(&v)) os << *s;
  else {
    const auto& l = std::get<std::vector<std::int64_t>>(v);
    os << '[';
    for (std::size_t i = 0; i < l.size(); ++i) os << (i ? "," : "") << l[i];
    os << ']';
  }
  return os.str();
}

std::string describe_valid(const KeySpec& spec) {
  std::ostringstream os;
  auto range = [&](const char* what) {
    os << what;
    if (std::isfinite(spec.max)) os << " in [" << format_bound(spec.min) << ", " << format_bound(spec.max) << "]";
    else os << " >= " << format_bound(spec.min);
  };
  switch (spec.type) {
    case KeyType::integer: range("an integer"); break;
    case KeyType::real: range("a number"); break;
    case KeyType::text: os << "a string"; break;
    case KeyType::choice:
      os << "one of ";
      for (std::size_t i = 0; i < spec.choices.size(); ++i) os << (i ? ", " : "") << spec.choices[i];
      break;
    case KeyType::int_list: range("a comma-separated list of integers, each"); break;
  }
  return os.str();
}

}  // namespace kformer

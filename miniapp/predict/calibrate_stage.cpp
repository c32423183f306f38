// The whole-model check of calibrate (see calibrate_stage.hpp).
#include "predict/calibrate_stage.hpp"

#include <Kokkos_Timer.hpp>

#include "predict/chunk_work.hpp"
#include "predict/attention_auto.hpp"
#include "predict/kernel_costs.hpp"
#include "model/param_store.hpp"
#include "model/stage.hpp"
#include "platform/device_reduce.hpp"

namespace kformer::predict {

double measure_compute_scale(const RunSettings& cfg, kernels::GemmImpl gemm, const MachineProfile& p,
                             comm::Communicator* world) {
  const ModelShape s = model_shape(cfg.model, 1, false);
  const int B = cfg.train.micro_batch, T = cfg.train.seq_len;
  ParamStore params(model_params(s), 1, 0, nullptr,
                    resolve_numerics(cfg.train.precision, Precision::fp32, 0, 1, cfg.parallel.schedule));
  params.initialize(1);
  params.refresh_bf16();  // bf16: the weight copies the GEMMs read (a no-op in fp32)
  const ChunkSpec spec{0, 1, 0, s.n_layers};
  KernelChoice k{gemm, costed_attention(cfg, p), cfg.bf16()};
  Stage stage(s, B, T, k, params, nullptr, spec);
  std::vector<std::int32_t> tokens(std::size_t(B) * (T + 1));
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = std::int32_t((i * 7919 + 13) % std::size_t(s.vocab));
  const auto step = [&] {
    stage.input(0);
    stage.forward(0, tokens, 1.0f / float(B * T));
    stage.backward(0, {});
    stage.release(0);
  };
  step();  // warm-up: first touches of the activations
  Kokkos::Timer timer;
  int calls = 0;
  do step(), ++calls;
  while (calls < 3 || timer.seconds() < 0.2);
  Exec().fence();  // the stage queues its kernels without waiting (output.phase_timing off)
  const double measured = timer.seconds() * 1e6 / calls;

  // The modelled time of the same calls: the stage's step, described (train/step_work.hpp).
  WorkLog log;
  {
    const kernels::Describing describing(log);
    step();
  }
  double modelled = 0;
  for (const WorkEntry& e : log.entries)
    if (e.kind == WorkEntry::Kind::kernel) modelled += kernel_us(p, e.call);
  double scale = modelled > 0 ? measured / modelled : 1.0;
  // The slowest rank's ratio, each rank's whole model over its own kernels: the same figure on every
  // rank, so that every rank repeats alike (each times its own kernels, in every round of calibrate).
  if (world && world->size() > 1) {
    DeviceReduce slowest;
    scale = slowest.allreduce(*world, scale, comm::ReduceOp::max);
  }
  return scale;
}

}  // namespace kformer::predict

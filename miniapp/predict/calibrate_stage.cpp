// The whole-model check of calibrate (see calibrate_stage.hpp).
#include "calibrate_stage.hpp"

#include <Kokkos_Timer.hpp>

#include "chunk_work.hpp"
#include "param_store.hpp"
#include "stage.hpp"

namespace kformer::predict {

double measure_compute_scale(const Config& cfg, const MachineProfile& p) {
  Config c = cfg;
  c.set_i64("parallel.tp", 1);
  const ModelShape s = model_shape(c);
  const int B = cfg.i32("train.micro_batch"), T = cfg.i32("train.seq_len");
  ParamStore params(model_params(s), 1, 0);
  params.initialize(1);
  const ChunkSpec spec{0, 1, 0, s.n_layers};
  KernelChoice k{kernels::parse_gemm_impl(cfg.str("kernels.gemm")),
                 kernels::attention_kind_from_string(cfg.str("kernels.attention"))};
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

  MachineProfile unscaled = p;
  unscaled.compute_scale = 1;
  const ChunkWork w = chunk_work(unscaled, s, block_dims(s, B, T), spec, cfg.str("kernels.attention"), s.gpt);
  const double modelled = compute_us(w.forward) + compute_us(w.head_backward) + compute_us(w.backward);
  return modelled > 0 ? measured / modelled : 1.0;
}

}  // namespace kformer::predict

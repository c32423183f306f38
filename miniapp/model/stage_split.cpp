// A chunk's backward split into B and W for zb-h1 (see stage.hpp). The head's weight gradient
// stays in the last chunk's forward call (deferring it would keep the (N, V/tp) logits alive);
// the embedding's, a scatter of the input gradient into the table, is W. Under sequence
// parallelism W sums the norms' weight gradients over TP as the fused backward does (unit_done,
// on the last micro-batch) and gathers the embedding's input gradient whole.
#include <Kokkos_Timer.hpp>

#include "convert.hpp"
#include "embedding.hpp"
#include "platform/profiling_region.hpp"
#include "model/stage.hpp"

namespace kformer {
namespace kk = kernels;

void Stage::backward_input(int micro) {
  const ProfilingRegion region("kformer::backward_input");
  Kokkos::Timer timer;
  Exec exec;
  Slot& s = slot(micro);
  receive_grad(s);
  widen_input(s);  // x_in is the chunk's: other micro-batches' forwards used it since
  for (int i = c_.n_layers - 1; i >= 0; --i) {
    p_.require(c_.first_layer + i);
    blocks_[i].backward_input(i ? s.acts[i - 1].x_out : s.x_in, for_backward(i, s), scratch_, s.dx);
  }
  if (!c_.first() && k_.bf16) kk::convert(exec, s.grad16, message_part(s.dx));  // sent in bf16
  if (phase_timing_) kk::fence(exec, "kformer::backward_timing");
  backward_ms += timer.seconds() * 1e3;
}

void Stage::backward_weight(int micro, const std::function<void(int)>& on_unit_done) {
  const ProfilingRegion region("kformer::backward_weight");
  Kokkos::Timer timer;
  Exec exec;
  Slot& s = slot(micro);
  if (c_.last() && on_unit_done) {
    unit_done(s_.n_layers, on_unit_done);
    if (!c_.first() && s_.gpt) on_unit_done(-1);
  }
  for (int i = c_.n_layers - 1; i >= 0; --i) {
    blocks_[i].backward_weight(s.acts[i], scratch_);
    if (on_unit_done) unit_done(c_.first_layer + i, on_unit_done);
  }
  if (c_.first()) {
    const DV<float**> dx = whole_rows(s.dx);
    kk::embedding_backward(exec, p_.dw(tokens_), dx, s.index);
    if (s_.gpt) kk::position_embedding_backward(exec, p_.dw(positions_), dx, d_.T);
    if (on_unit_done) on_unit_done(-1);
  }
  if (phase_timing_) kk::fence(exec, "kformer::backward_timing");
  backward_ms += timer.seconds() * 1e3;
}

}  // namespace kformer

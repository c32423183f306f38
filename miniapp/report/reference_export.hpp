// The reference export (`output.export=FILE`): after the first iteration's backward, a one-rank
// run writes its parameters, their gradients and the iteration's tokens as safetensors, so that
// an independent implementation (scripts/reference/kformer_ref.py --export) can recompute the
// loss and every gradient from the very same weights and batch.
#pragma once

#include <string>

#include "io/data.hpp"
#include "model/param_store.hpp"

namespace kformer {

// Tensors: "<name>" (parameters, real rows only), "grad.<name>", "tokens" (I32, (B, T+1)).
void export_reference(const std::string& path, const ParamStore& params, const DataSource& data,
                      std::int64_t first_sample, int batch, int seq_len);

}  // namespace kformer

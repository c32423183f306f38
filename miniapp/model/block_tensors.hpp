// The tensors of one transformer block, named once: the leaf names model_spec.cpp gives them
// (after "layers.L.") and the index a Block keeps its handle to each under, found in the store by
// name when the block is built (block.hpp), so that a step looks up no name.
#pragma once

#include <array>
#include <cstddef>

namespace kformer {

enum class BlockTensor {
  ln1_w, ln1_b, attn_norm,            // the first norm: gpt's layernorm, llama's rmsnorm
  wq, wk, wv, wq_b, wk_b, wv_b,       // the QKV projection, packed in this order (gpt has biases)
  wo, wo_b,                           // the attention's output projection
  ln2_w, ln2_b, mlp_norm,             // the second norm
  fc, fc_b, proj, proj_b,             // gpt's MLP
  gate, up, down,                     // llama's SwiGLU MLP (gate and up packed)
  count
};

constexpr std::array<const char*, static_cast<std::size_t>(BlockTensor::count)> kBlockTensorLeaves = {
    "ln1.weight",     "ln1.bias",       "attn_norm.weight", "attn.wq.weight",  "attn.wk.weight",  "attn.wv.weight",
    "attn.wq.bias",   "attn.wk.bias",   "attn.wv.bias",     "attn.wo.weight",  "attn.wo.bias",    "ln2.weight",
    "ln2.bias",       "mlp_norm.weight", "mlp.fc.weight",   "mlp.fc.bias",     "mlp.proj.weight", "mlp.proj.bias",
    "mlp.gate.weight", "mlp.up.weight",  "mlp.down.weight"};

constexpr const char* leaf(BlockTensor t) { return kBlockTensorLeaves[static_cast<std::size_t>(t)]; }

}  // namespace kformer

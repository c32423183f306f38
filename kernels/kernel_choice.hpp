// The run-time choices between kernel implementations, apart from the kernels (no Kokkos): the
// attention variant (kernels.attention) and the GEMM implementation (kernels.gemm), so that the
// run's settings can name them without including the kernels.
#pragma once

#include <stdexcept>
#include <string>

namespace kformer::kernels {

// naive: scores and probabilities materialised, products in Kokkos loops; fused: tiled online
// softmax, nothing of size T*T kept (in fp32 on CUDA sm_80+, its products 3xTF32 on the tensor
// cores: attention_tc_forward.hpp); batched_gemm: naive's algorithm with its four products as
// batched vendor GEMMs (cuBLAS on the tensor cores in bf16, OpenBLAS on the host), as Megatron-LM
// runs attention without a flash kernel; vendor: cuDNN's flash attention (bf16, under CUDA, in
// builds with cuDNN), which keeps the row logsumexp as fused does.
enum class AttentionKind { naive, fused, batched_gemm, vendor };
constexpr int kAttentionKinds = 4;

// Whether the kind keeps the probabilities (B,H,T,T) from forward to backward.
constexpr bool keeps_probabilities(AttentionKind k) {
  return k == AttentionKind::naive || k == AttentionKind::batched_gemm;
}

// "naive", "fused", "batched_gemm" or "vendor"; throws naming the valid values otherwise.
inline AttentionKind attention_kind_from_string(const std::string& s) {
  if (s == "naive") return AttentionKind::naive;
  if (s == "fused") return AttentionKind::fused;
  if (s == "batched_gemm") return AttentionKind::batched_gemm;
  if (s == "vendor") return AttentionKind::vendor;
  throw std::invalid_argument("kernels.attention: '" + s + "' is not one of naive, fused, batched_gemm, vendor");
}

enum class GemmImpl { native, vendor };

// The build whose code a described step follows where kformer's builds take different kernels for
// the same call: this build's own, or the CUDA build's (cuBLAS and cuBLASLt write a bf16 GEMM's
// output themselves, with the bias and GELU, or the GELU's gradient, in their epilogue), which
// predict describes for kformer's own run on a GPU's profile (call_record.hpp's DescribingAs).
enum class CodePath { this_build, cuda };

inline GemmImpl parse_gemm_impl(const std::string& name) {
  if (name == "native") return GemmImpl::native;
  if (name == "vendor") return GemmImpl::vendor;
  throw std::invalid_argument("unknown GEMM implementation '" + name + "': use native or vendor");
}
inline const char* to_string(GemmImpl impl) { return impl == GemmImpl::native ? "native" : "vendor"; }

}  // namespace kformer::kernels

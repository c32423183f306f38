// The run-time choices between kernel implementations, apart from the kernels (no Kokkos): the
// attention variant (kernels.attention) and the GEMM implementation (kernels.gemm), so that the
// run's settings can name them without including the kernels.
#pragma once

#include <stdexcept>
#include <string>

namespace kformer::kernels {

enum class AttentionKind { naive, fused };

// "naive" or "fused"; throws naming the valid values otherwise.
inline AttentionKind attention_kind_from_string(const std::string& s) {
  if (s == "naive") return AttentionKind::naive;
  if (s == "fused") return AttentionKind::fused;
  throw std::invalid_argument("kernels.attention: '" + s + "' is not one of naive, fused");
}

enum class GemmImpl { native, vendor };

inline GemmImpl parse_gemm_impl(const std::string& name) {
  if (name == "native") return GemmImpl::native;
  if (name == "vendor") return GemmImpl::vendor;
  throw std::invalid_argument("unknown GEMM implementation '" + name + "': use native or vendor");
}
inline const char* to_string(GemmImpl impl) { return impl == GemmImpl::native ? "native" : "vendor"; }

}  // namespace kformer::kernels

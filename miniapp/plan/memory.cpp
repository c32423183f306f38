// Memory per rank (see memory.hpp).
#include "plan/memory.hpp"

#include <sys/resource.h>

#include <Kokkos_Core.hpp>
#include <atomic>
#include <sstream>

#include "platform/errors.hpp"
#if defined(KOKKOS_ENABLE_CUDA)
#include <cuda_runtime.h>
#endif

namespace kformer {
nlohmann::json MemoryEstimate::to_json() const {
  return {{"estimated_bytes", total()},
          {"precision", bf16 ? "bf16" : "fp32"},
          {"param_bytes", masters_sharded ? "bf16 copies + this rank's shard of the fp32 masters (2 + 4/dp per parameter)"
                          : bf16          ? "fp32 masters + bf16 copies (6 per parameter)"
                                          : "fp32 (4 per parameter)"},
          {"estimate_split_bytes",
           {{"params", params}, {"grads", grads}, {"optimizer", optimizer}, {"activations", activations},
            {"workspace", workspace}}},
          {"micro_batches_in_flight", micro_batches_in_flight},
          {"activation_bytes_estimated", activations_most}};
}

std::string describe(const MemoryEstimate& e) {
  std::ostringstream os;
  os.precision(3);
  const char* params_as = e.masters_sharded ? " as bf16 copies + fp32 master shards"
                          : e.bf16          ? " as fp32 masters + bf16 copies"
                                            : "";
  os << e.total() / 1e9 << " GB (params " << e.params / 1e9 << params_as
     << ", grads " << e.grads / 1e9 << ", optimizer "
     << e.optimizer / 1e9 << ", activations " << e.activations / 1e9 << ", workspace " << e.workspace / 1e9 << "; "
     << e.micro_batches_in_flight << " micro-batch(es) in flight)";
  return os.str();
}

std::atomic<long>& estimates_made() {
  static std::atomic<long> count{0};
  return count;
}

void check_estimate_fits(const RunSettings& s, const MemoryEstimate& e, double bytes, const std::string& what,
                         const std::string& other_fix) {
  if (s.memory_limit_gb > 0 || e.total() <= bytes) return;
  std::ostringstream msg;
  msg.precision(3);
  msg << "the memory estimate per rank, " << describe(e) << ", exceeds the " << bytes / 1e9 << " GB " << what
      << ": raise parallel.zero, parallel.tp or parallel.pp, lower train.micro_batch or model sizes, " << other_fix;
  throw ConfigError(msg.str());
}

double measured_peak_bytes() {
#if defined(KOKKOS_ENABLE_CUDA)
  std::size_t free_b = 0, total_b = 0;
  if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) return double(total_b - free_b);
#endif
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_maxrss) * 1024.0;  // kilobytes on Linux
}

}  // namespace kformer

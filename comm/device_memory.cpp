// Pointer queries and copies for device_memory.hpp; the CUDA runtime only under a CUDA Kokkos.
#include "device_memory.hpp"

#include <Kokkos_Macros.hpp>

#include <cstring>
#include <stdexcept>
#include <string>

#ifdef KOKKOS_ENABLE_CUDA
#include <cuda_runtime.h>
#endif

namespace kformer::comm {

#ifdef KOKKOS_ENABLE_CUDA

bool is_device_pointer(const void* p) {
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    cudaGetLastError();  // a plain host pointer may report an error on old runtimes: clear it
    return false;
  }
  return attr.type == cudaMemoryTypeDevice;
}

void copy_bytes(void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0 || dst == src) return;
  const cudaError_t rc = cudaMemcpy(dst, src, bytes, cudaMemcpyDefault);
  if (rc != cudaSuccess)
    throw std::runtime_error(std::string("comm: cudaMemcpy of ") + std::to_string(bytes) +
                             " bytes failed: " + cudaGetErrorString(rc) +
                             " (is the buffer a live allocation of this process?)");
}

#else

bool is_device_pointer(const void*) { return false; }

void copy_bytes(void* dst, const void* src, std::size_t bytes) {
  if (bytes > 0 && dst != src) std::memmove(dst, src, bytes);
}

#endif

}  // namespace kformer::comm

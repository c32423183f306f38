// Where a raw buffer lives, and a copy that works whichever side it is on. The MPI backend needs
// this to stage device buffers through the host when its MPI is not CUDA-aware, the self backend
// to copy device buffers, and the NCCL backend to refuse host buffers with a clear message.
// Without a CUDA Kokkos every pointer is a host pointer.
#pragma once

#include <cstddef>

namespace kformer::comm {

// True for memory that only the GPU should touch (cudaMalloc'ed; not managed or pinned host).
bool is_device_pointer(const void* p);
// Like memcpy, between any two of host and device memory (cudaMemcpyDefault under CUDA).
void copy_bytes(void* dst, const void* src, std::size_t bytes);

}  // namespace kformer::comm

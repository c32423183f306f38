// What the two GPU programs of bench/contention share: the check that a GPU is there, CUDA and cuBLAS
// status checks that throw with the call's name, and the streaming copy over every SM that stands for
// a step's memory-bound kernels.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <iostream>
#include <stdexcept>
#include <string>

namespace kformer_bench {

// False, with one line naming `program`, where no CUDA device is visible.
inline bool have_gpu(const char* program) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0) return true;
  std::cerr << program << ": no CUDA device here: it measures a GPU (run it on one)\n";
  return false;
}

inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}
inline void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) throw std::runtime_error(std::string(what) + ": cuBLAS status " + std::to_string(int(s)));
}

// dst = src, 16 bytes a thread, a grid-stride loop (launch 4 blocks a SM of 256 threads).
__global__ void stream_copy(const int4* src, int4* dst, long n) {
  for (long i = blockIdx.x * long(blockDim.x) + threadIdx.x; i < n; i += long(gridDim.x) * blockDim.x) dst[i] = src[i];
}

}  // namespace kformer_bench

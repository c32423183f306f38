// kformer-sustained: a bf16 GEMM's rate over a long run, alone and between streaming kernels, on
// one GPU (see CMakeLists.txt).
//
//   kformer-sustained [--json FILE] [--seconds S]      (default 30; half alone, half interleaved)
//
// A GEMM benchmark times a shape for a second or less, alone on a cold-started GPU; a training step
// runs its GEMMs for minutes, between streaming kernels that sweep HBM and the L2 cache, under the
// power of the whole step. Issue 37's published rows come out about a tenth fast on both the A100
// and the H100 profiles once their GEMM curve is measured in the first way (docs/predict.md, "The
// H100's bf16 GEMM curve, measured"). This program measures the difference on the GPU it runs on:
//   alone        the Llama 3 8B FFN's up projection (8192 x 14336 x 4096, bf16 in and out, fp32
//                compute) back to back, timed in windows of 64 GEMMs (about 0.1 s);
//   interleaved  the same GEMM with a 1 GiB streaming copy (512 MiB each way) after each one, only
//                the GEMMs timed (an event pair around each), in the same windows.
// Each window's TFLOP/s goes to the JSON; the summary sets the last third of each phase against the
// early windows alone (the second to the sixth, a benchmark's view once warm: on the H200 of session
// 50 the first window, 339 TFLOP/s against 774-799 after it, was the clocks and cuBLAS warming up, and
// is kept apart). Clocks and power come from nvidia-smi beside it (scripts/gpu_session.sh).
// Exit 2 without a GPU, 1 when the run failed.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cuda_bench.hpp"

namespace {

using kformer_bench::check;
using kformer_bench::have_gpu;
using kformer_bench::stream_copy;

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::string json_path;
  double seconds = 30;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--json" && i + 1 < argc) json_path = argv[++i];
    else if (a == "--seconds" && i + 1 < argc) seconds = std::max(2.0, std::atof(argv[++i]));
    else {
      std::cerr << "kformer-sustained: unknown argument '" << a << "': use [--json FILE] [--seconds S]\n";
      return 2;
    }
  }
  if (!have_gpu("kformer-sustained")) return 2;
  try {
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, 0), "device properties");
    cudaStream_t s{};
    check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
    cublasHandle_t blas{};
    check(cublasCreate(&blas), "cuBLAS handle"), check(cublasSetStream(blas, s), "cuBLAS stream");
    const int m = 8192, n = 14336, k = 4096;
    __nv_bfloat16 *x, *w, *y;
    check(cudaMalloc(&x, sizeof(__nv_bfloat16) * m * k), "GEMM buffers");
    check(cudaMalloc(&w, sizeof(__nv_bfloat16) * std::size_t(n) * k), "GEMM buffers");
    check(cudaMalloc(&y, sizeof(__nv_bfloat16) * std::size_t(m) * n), "GEMM buffers");
    check(cudaMemset(x, 0, sizeof(__nv_bfloat16) * m * k), "fill"), check(cudaMemset(w, 0, sizeof(__nv_bfloat16) * std::size_t(n) * k), "fill");
    const long copy_n = 512l << 20 >> 4;
    int4 *ca, *cb;
    check(cudaMalloc(&ca, copy_n * sizeof(int4)), "copy buffer"), check(cudaMalloc(&cb, copy_n * sizeof(int4)), "copy buffer");
    check(cudaMemset(ca, 1, copy_n * sizeof(int4)), "fill");
    const float one = 1, zero = 0;
    const auto gemm = [&] {  // row-major y = x w^T as column-major y^T = w x^T
      check(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &one, w, CUDA_R_16BF, k, x, CUDA_R_16BF, k, &zero, y,
                         CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            "cublasGemmEx");
    };
    const double flops = 2.0 * m * n * k;
    const int per_window = 64;  // GEMMs a window: 0.96 TFLOP each, about 0.08 s on an H100, 0.25 s on an A100
    std::vector<cudaEvent_t> ev(2 * per_window);
    for (auto& e : ev) check(cudaEventCreate(&e), "event");

    nlohmann::json windows = nlohmann::json::array();
    std::vector<double> alone, interleaved;
    const auto start = std::chrono::steady_clock::now();
    const auto since = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
    for (const std::string phase : {"alone", "interleaved"}) {
      const double until = since() + seconds / 2;
      while (since() < until) {
        for (int i = 0; i < per_window; ++i) {
          check(cudaEventRecord(ev[2 * i], s), "event record");
          gemm();
          check(cudaEventRecord(ev[2 * i + 1], s), "event record");
          if (phase == "interleaved") {
            stream_copy<<<4 * prop.multiProcessorCount, 256, 0, s>>>(ca, cb, copy_n);
            check(cudaGetLastError(), "copy launch");
          }
        }
        check(cudaStreamSynchronize(s), "a window");
        double ms = 0;
        for (int i = 0; i < per_window; ++i) {
          float one_ms = 0;
          check(cudaEventElapsedTime(&one_ms, ev[2 * i], ev[2 * i + 1]), "elapsed time");
          ms += one_ms;
        }
        const double tflops = per_window * flops / (ms * 1e9);
        (phase == "alone" ? alone : interleaved).push_back(tflops);
        windows.push_back({{"phase", phase}, {"t_s", since()}, {"tflops", tflops}});
      }
    }
    const auto last_third = [](const std::vector<double>& v) {
      return median(std::vector<double>(v.begin() + long(v.size() * 2 / 3), v.end()));
    };
    const double first = alone.front(), a = last_third(alone), b = last_third(interleaved);
    // windows 2-6 alone (as many as ran, the first when it alone did)
    const double early = alone.size() > 1
                             ? median(std::vector<double>(alone.begin() + 1, alone.begin() + long(std::min<std::size_t>(alone.size(), 6))))
                             : first;
    std::printf("kformer-sustained: %s, %d x %d x %d bf16: first window %.1f TFLOP/s, windows 2-6 %.1f; alone, last third "
                "%.1f (x%.3f of windows 2-6); between 1 GiB copies, last third %.1f (x%.3f of alone)\n",
                prop.name, m, n, k, first, early, a, a / early, b, b / a);
    const nlohmann::json out = {{"device", prop.name}, {"sms", prop.multiProcessorCount}, {"shape", {m, n, k}},
                                {"seconds", seconds}, {"gemms_per_window", per_window}, {"windows", windows},
                                {"summary", {{"first_window_tflops", first}, {"early_tflops", early},
                                             {"alone_last_third_tflops", a}, {"interleaved_last_third_tflops", b},
                                             {"alone_over_early", a / early}, {"interleaved_over_early", b / early},
                                             {"alone_over_first", a / first}, {"interleaved_over_alone", b / a}}}};
    if (!json_path.empty()) std::ofstream(json_path) << out.dump(2) << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "kformer-sustained: " << e.what() << "\n";
    return 1;
  }
}

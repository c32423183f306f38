// kformer-sm-share: a collective's cost to the compute beside it, on one GPU (see CMakeLists.txt).
//
//   kformer-sm-share [--json FILE] [--iters N]
//
// A holder kernel takes K SMs as an NCCL collective does (640 threads a block, as NCCL launches,
// and nearly all of an SM's shared memory, so one block a SM and no compute block beside it:
// "NCCL CTAs won't share an SM with compute kernels", NVIDIA/nccl#689), waits until all K blocks
// run, and copies between its buffers at a target rate of HBM traffic (reads plus writes), throttled
// on the GPU's global timer, until told to stop. Beside it, on another stream: bf16 cuBLAS GEMMs at
// the published rows' shapes and a streaming copy over every SM, each timed with CUDA events and set
// against the same kernel alone, and the copy again with its grid sized to the SMs left (kernel
// `copy_sized`). A case's `sm_share_ratio` is what predict charges (SMs / (SMs - K));
// `ratio` what was measured. Each GEMM also runs through cuBLASLt told the SMs left to it
// (CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET = SMs - K, as Transformer Engine sets for GEMMs it overlaps
// with communication), kernel `gemm_sm_target`, against the same cuBLASLt GEMM alone untold. On an
// H200 (session 50) the untold GEMMs ran 2.4-16x slower beside 16-32 held SMs where the share is
// 1.14-1.32x, and the streaming copy too; the holder's polling of host-mapped memory is the suspect
// (see hold()), which the holders now leave to one control case.
// Exit 2 without a GPU, 1 when a case could not run.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "cuda_bench.hpp"

namespace {

constexpr int kHolderThreads = 640, kMaxHeld = 64;

using kformer_bench::check;
using kformer_bench::have_gpu;
using kformer_bench::stream_copy;

__device__ unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// One block a SM (the dynamic shared memory it asks for sees to it), copying its slice of src into
// dst 16 bytes a thread, `bytes_per_ns` of HBM traffic a block (0: none, it only holds the SM), until
// *stop says stop. Each block sets running[its index] (host-mapped) once running, and leaves its
// traffic and time in moved_bytes and held_ns. `stop` is device memory that the host writes with a
// copy on a stream of its own, so that the poll is an L2 read; session 50 polled a host-mapped flag
// (a PCIe read, about every microsecond a block when idle), and the GEMMs beside it slowed more
// beside idle blocks than beside copying ones, which poll every 8 us or so (2.6x against 1.5x beside
// 16; 4.5x and 8.5x beside 24 and 32 idle ones, where the share is 1.22x and 1.32x): what holding SMs
// cannot explain and the polling rate might. The holder {16, 0, host_poll} repeats that polling, so
// that one run sets the two side by side.
__global__ void __launch_bounds__(kHolderThreads)
    hold(const int4* src, int4* dst, long per_block, double bytes_per_ns, volatile int* stop, volatile int* running,
         double* moved_bytes, double* held_ns) {
  extern __shared__ int4 reserved[];
  __shared__ int halt;
  if (threadIdx.x == 0) {
    reserved[0] = make_int4(0, 0, 0, 0);
    running[blockIdx.x] = 1;
    __threadfence_system();
  }
  const int4* s = src + blockIdx.x * per_block;
  int4* d = dst + blockIdx.x * per_block;
  const unsigned long long t0 = now_ns();
  double moved = 0;
  long i = threadIdx.x;
  for (;;) {
    if (bytes_per_ns > 0) {
      for (int r = 0; r < 8; ++r) {
        d[i] = s[i];
        i += kHolderThreads;
        if (i >= per_block) i = threadIdx.x;
      }
      moved += 2.0 * 8 * kHolderThreads * sizeof(int4);  // read and written
      while (double(now_ns() - t0) * bytes_per_ns < moved) __nanosleep(200);  // one chunk's time at most
    } else {
      __nanosleep(1000);
    }
    if (threadIdx.x == 0) halt = *stop;
    __syncthreads();
    if (halt) break;
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    moved_bytes[blockIdx.x] = bytes_per_ns > 0 ? moved * 1.0 : 0.0;
    held_ns[blockIdx.x] = double(now_ns() - t0);
  }
}

struct Gpu {
  int sms = 0, smem_optin = 0, smem_sm = 0;
  std::string name;
  cudaStream_t work{}, side{};
  cublasHandle_t blas{};
  cudaStream_t ctl{};      // the host's writes of the stop flag
  int* flags = nullptr;  // host-mapped: [0] stop (the host_poll holder's), [1 + b] holder block b is running
  int* flags_dev = nullptr;
  int* stop_host = nullptr;  // pinned: the values copied into stop_dev
  int* stop_dev = nullptr;   // device memory: the stop flag the other holders poll
};

struct Holder {
  int blocks = 0;
  double target_gbps = 0;  // HBM traffic, reads and writes, over all blocks
  bool host_poll = false;  // poll the host-mapped flag, as session 50's holder did
};

// Sets the device-memory stop flag to v, and the host-mapped one, and waits for the copy.
void set_stop(Gpu& g, int v) {
  reinterpret_cast<volatile int*>(g.flags)[0] = v;
  *g.stop_host = v;
  check(cudaMemcpyAsync(g.stop_dev, g.stop_host, sizeof(int), cudaMemcpyHostToDevice, g.ctl), "stop flag");
  check(cudaStreamSynchronize(g.ctl), "stop flag");
}

// Runs `kernel` (enqueued on g.work) `iters` times beside a holder, returns (us a call, measured
// traffic GB/s).
template <class F>
std::pair<double, double> timed(Gpu& g, const Holder& h, int iters, F&& kernel, int4* a, int4* b, long per_block,
                                double* moved, double* held) {
  if (h.blocks > 0) {
    for (int i = 1; i <= kMaxHeld; ++i) reinterpret_cast<volatile int*>(g.flags)[i] = 0;
    set_stop(g, 0);
    const int smem = std::min(g.smem_optin, g.smem_sm - 2048);
    check(cudaFuncSetAttribute(hold, cudaFuncAttributeMaxDynamicSharedMemorySize, smem), "shared memory for the holder");
    hold<<<h.blocks, kHolderThreads, smem, g.side>>>(a, b, per_block, h.target_gbps / h.blocks,
                                                      h.host_poll ? g.flags_dev : g.stop_dev, g.flags_dev + 1, moved,
                                                      held);
    check(cudaGetLastError(), "holder launch");
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    const auto running = [&] {
      int n = 0;
      for (int i = 1; i <= h.blocks; ++i) n += reinterpret_cast<volatile int*>(g.flags)[i];
      return n;
    };
    while (running() < h.blocks) {
      if (std::chrono::steady_clock::now() > give_up)
        throw std::runtime_error("the holder's " + std::to_string(h.blocks) + " blocks did not all become resident");
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  cudaEvent_t e0, e1;
  check(cudaEventCreate(&e0), "event"), check(cudaEventCreate(&e1), "event");
  check(cudaEventRecord(e0, g.work), "event record");
  for (int i = 0; i < iters; ++i) kernel();
  check(cudaEventRecord(e1, g.work), "event record");
  check(cudaEventSynchronize(e1), "the timed kernels");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, e0, e1), "elapsed time");
  cudaEventDestroy(e0), cudaEventDestroy(e1);
  double gbps = 0;
  if (h.blocks > 0) {
    set_stop(g, 1);
    check(cudaStreamSynchronize(g.side), "the holder");
    std::vector<double> m(h.blocks), t(h.blocks);
    check(cudaMemcpy(m.data(), moved, h.blocks * sizeof(double), cudaMemcpyDeviceToHost), "holder figures");
    check(cudaMemcpy(t.data(), held, h.blocks * sizeof(double), cudaMemcpyDeviceToHost), "holder figures");
    for (int i = 0; i < h.blocks; ++i) gbps += m[i] / t[i];  // bytes per ns = GB/s
  }
  return {1e3 * ms / iters, gbps};
}

// x (n values) filled with bf16 values in [-1, 1) from a hash of the index: GEMMs are never timed
// on zeros, which an H200 ran faster (device/METHOD.md).
__global__ void fill_bf16(__nv_bfloat16* x, std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x) {
    unsigned h = unsigned(i) * 2654435761u ^ unsigned(i >> 32) * 40503u;
    h ^= h >> 15, h *= 2246822519u, h ^= h >> 13;
    x[i] = __float2bfloat16(float(h & 0xffff) / 32768.f - 1.f);
  }
}

// y(m,n) = x(m,k) w(n,k)^T in bf16 through cuBLASLt (column-major y^T = w x^T, as cublasGemmEx above),
// its algorithm chosen for `sm_target` SMs (0: the device's count).
struct LtGemm {
  cublasLtHandle_t lt{};
  cublasLtMatmulDesc_t desc{};
  cublasLtMatrixLayout_t a{}, b{}, c{};
  cublasLtMatmulAlgo_t algo{};
  void* ws = nullptr;
  std::size_t ws_bytes = 32u << 20;
  LtGemm(cublasLtHandle_t handle, int m, int n, int k, int sm_target) : lt(handle) {
    check(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cuBLASLt matmul descriptor");
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    check(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), "transa");
    check(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), "transb");
    const std::int32_t target = sm_target;
    if (target > 0) check(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &target, sizeof target), "SM count target");
    check(cublasLtMatrixLayoutCreate(&a, CUDA_R_16BF, k, n, k), "layout of w");  // stored k x n, used transposed
    check(cublasLtMatrixLayoutCreate(&b, CUDA_R_16BF, k, m, k), "layout of x");
    check(cublasLtMatrixLayoutCreate(&c, CUDA_R_16BF, n, m, n), "layout of y");
    cublasLtMatmulPreference_t pref{};
    check(cublasLtMatmulPreferenceCreate(&pref), "preference");
    check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof ws_bytes), "workspace");
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    check(cublasLtMatmulAlgoGetHeuristic(lt, desc, a, b, c, c, pref, 1, &result, &found), "heuristic");
    cublasLtMatmulPreferenceDestroy(pref);
    if (found < 1) throw std::runtime_error("cuBLASLt has no algorithm for this GEMM");
    algo = result.algo;
    check(cudaMalloc(&ws, ws_bytes), "cuBLASLt workspace");
  }
  void run(const __nv_bfloat16* w, const __nv_bfloat16* x, __nv_bfloat16* y, cudaStream_t s) const {
    const float one = 1, zero = 0;
    check(cublasLtMatmul(lt, desc, &one, w, a, x, b, &zero, y, c, y, c, &algo, ws, ws_bytes, s), "cublasLtMatmul");
  }
  ~LtGemm() {
    cudaFree(ws);
    cublasLtMatrixLayoutDestroy(a), cublasLtMatrixLayoutDestroy(b), cublasLtMatrixLayoutDestroy(c);
    cublasLtMatmulDescDestroy(desc);
  }
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;
};

}  // namespace

int main(int argc, char** argv) {
  std::string json_path;
  int iters = 20;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--json" && i + 1 < argc) json_path = argv[++i];
    else if (a == "--iters" && i + 1 < argc) iters = std::max(1, std::atoi(argv[++i]));
    else {
      std::cerr << "kformer-sm-share: unknown argument '" << a << "': use [--json FILE] [--iters N]\n";
      return 2;
    }
  }
  if (!have_gpu("kformer-sm-share")) return 2;
  try {
    Gpu g;
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, 0), "device properties");
    g.name = prop.name, g.sms = prop.multiProcessorCount;
    g.smem_optin = int(prop.sharedMemPerBlockOptin), g.smem_sm = int(prop.sharedMemPerMultiprocessor);
    check(cudaStreamCreateWithFlags(&g.work, cudaStreamNonBlocking), "stream");
    check(cudaStreamCreateWithFlags(&g.side, cudaStreamNonBlocking), "stream");
    check(cublasCreate(&g.blas), "cuBLAS handle");
    check(cublasSetStream(g.blas, g.work), "cuBLAS stream");
    check(cudaHostAlloc(reinterpret_cast<void**>(&g.flags), (kMaxHeld + 1) * sizeof(int), cudaHostAllocMapped), "mapped flags");
    check(cudaHostGetDevicePointer(reinterpret_cast<void**>(&g.flags_dev), g.flags, 0), "mapped flags");
    check(cudaStreamCreateWithFlags(&g.ctl, cudaStreamNonBlocking), "stream");
    check(cudaHostAlloc(reinterpret_cast<void**>(&g.stop_host), sizeof(int), cudaHostAllocDefault), "pinned stop flag");
    check(cudaMalloc(&g.stop_dev, sizeof(int)), "stop flag");

    // The holder's buffers: 4 MiB a block, at most kMaxHeld blocks; the copy's: 512 MiB each way.
    const long per_block = 4l << 20 >> 4, hold_n = per_block * kMaxHeld;
    const long copy_n = 512l << 20 >> 4;
    int4 *ha, *hb, *ca, *cb;
    double *moved, *held;
    check(cudaMalloc(&ha, hold_n * sizeof(int4)), "holder buffer"), check(cudaMalloc(&hb, hold_n * sizeof(int4)), "holder buffer");
    check(cudaMalloc(&ca, copy_n * sizeof(int4)), "copy buffer"), check(cudaMalloc(&cb, copy_n * sizeof(int4)), "copy buffer");
    check(cudaMalloc(&moved, kMaxHeld * sizeof(double)), "figures"), check(cudaMalloc(&held, kMaxHeld * sizeof(double)), "figures");
    check(cudaMemset(ha, 1, hold_n * sizeof(int4)), "fill"), check(cudaMemset(ca, 1, copy_n * sizeof(int4)), "fill");

    // GEMMs of the published rows (Llama 3 8B at sequence 8192: attention's output, the FFN's up
    // projection; GPT 22B's at TP 8: its QKV at 2 x 2048 tokens), y(m,n) = x(m,k) w(n,k)^T in bf16.
    struct Shape { int m, n, k; };
    const std::vector<Shape> shapes = {{8192, 4096, 4096}, {8192, 14336, 4096}, {4096, 2304, 6144}};
    std::size_t most = 0;
    for (const auto& s : shapes) most = std::max(most, std::size_t(s.m) * s.k + std::size_t(s.n) * s.k + std::size_t(s.m) * s.n);
    __nv_bfloat16* gm;
    check(cudaMalloc(&gm, most * sizeof(__nv_bfloat16)), "GEMM buffers");
    fill_bf16<<<4 * g.sms, 256>>>(gm, most);
    check(cudaGetLastError(), "fill launch");
    check(cudaDeviceSynchronize(), "fill");
    const float one = 1, zero = 0;
    cublasLtHandle_t lt{};
    if (cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS) throw std::runtime_error("cuBLASLt handle");

    const std::vector<Holder> holders = {{0, 0},     {16, 0},   {24, 0},   {32, 0},         {16, 150},
                                         {24, 150},  {16, 900}, {24, 900}, {16, 0, true}};
    nlohmann::json cases = nlohmann::json::array();
    // The JSON rewritten after each case, so that a run its time budget stops keeps what it measured.
    const auto save = [&] {
      const nlohmann::json out = {{"device", g.name}, {"sms", g.sms}, {"holder_threads", kHolderThreads},
                                  {"iters", iters}, {"cases", cases}};
      if (!json_path.empty()) std::ofstream(json_path) << out.dump(2) << "\n";
    };
    const auto report = [&](const std::string& kernel, const nlohmann::json& shape, const Holder& h, double alone,
                            std::pair<double, double> beside) {
      const double ratio = beside.first / alone, model = double(g.sms) / (g.sms - h.blocks);
      cases.push_back({{"kernel", kernel}, {"shape", shape}, {"held_sms", h.blocks}, {"traffic_target_gbps", h.target_gbps},
                       {"traffic_gbps", beside.second}, {"alone_us", alone}, {"beside_us", beside.first},
                       {"ratio", ratio}, {"sm_share_ratio", model}, {"poll", h.host_poll ? "host" : "device"}});
      std::printf("%-6s %-18s held %2d SMs (%s poll), HBM traffic %6.1f GB/s (target %4.0f): %9.1f us alone, %9.1f beside, x%.3f (SM share x%.3f)\n",
                  kernel.c_str(), shape.dump().c_str(), h.blocks, h.host_poll ? "host" : "device", beside.second,
                  h.target_gbps, alone, beside.first, ratio, model);
      std::fflush(stdout);
      save();
    };
    for (const Shape& s : shapes) {
      __nv_bfloat16 *x = gm, *w = gm + std::size_t(s.m) * s.k, *y = w + std::size_t(s.n) * s.k;
      const auto gemm = [&] {
        // Row-major y = x w^T as column-major y^T = w x^T (kokkos-kernels' swap).
        check(cublasGemmEx(g.blas, CUBLAS_OP_T, CUBLAS_OP_N, s.n, s.m, s.k, &one, w, CUDA_R_16BF, s.k, x, CUDA_R_16BF, s.k,
                           &zero, y, CUDA_R_16BF, s.n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
              "cublasGemmEx");
      };
      timed(g, {0, 0}, 3, gemm, ha, hb, per_block, moved, held);  // warm-up
      const double alone = timed(g, {0, 0}, iters, gemm, ha, hb, per_block, moved, held).first;
      for (const Holder& h : holders)
        if (h.blocks > 0) report("gemm", {s.m, s.n, s.k}, h, alone, timed(g, h, iters, gemm, ha, hb, per_block, moved, held));
      // The same GEMM through cuBLASLt, alone untold, then beside each holder told the SMs left.
      const LtGemm untold(lt, s.m, s.n, s.k, 0);
      const auto lt_gemm = [&](const LtGemm& l) { return [&] { l.run(w, x, y, g.work); }; };
      timed(g, {0, 0}, 3, lt_gemm(untold), ha, hb, per_block, moved, held);
      const double lt_alone = timed(g, {0, 0}, iters, lt_gemm(untold), ha, hb, per_block, moved, held).first;
      for (const Holder& h : holders) {
        if (h.blocks == 0) continue;
        const LtGemm told(lt, s.m, s.n, s.k, g.sms - h.blocks);
        timed(g, {0, 0}, 1, lt_gemm(told), ha, hb, per_block, moved, held);  // its first call alone
        report("gemm_sm_target", {s.m, s.n, s.k}, h, lt_alone, timed(g, h, iters, lt_gemm(told), ha, hb, per_block, moved, held));
      }
    }
    cublasLtDestroy(lt);
    const auto copy = [&] {
      stream_copy<<<4 * g.sms, 256, 0, g.work>>>(ca, cb, copy_n);
      check(cudaGetLastError(), "copy launch");
    };
    timed(g, {0, 0}, 3, copy, ha, hb, per_block, moved, held);
    const double alone = timed(g, {0, 0}, iters, copy, ha, hb, per_block, moved, held).first;
    for (const Holder& h : holders)
      if (h.blocks > 0) report("copy", {copy_n * 16}, h, alone, timed(g, h, iters, copy, ha, hb, per_block, moved, held));
    // The same copy with its grid sized to the SMs the holder leaves (4 blocks each), against the
    // full-grid copy alone: a grid over every SM leaves the blocks that find no room for a second
    // wave (at most 2x); sized to the free SMs it has none, so what remains is the holder's own cost.
    for (const Holder& h : holders)
      if (h.blocks > 0) {
        const auto sized = [&] {
          stream_copy<<<4 * (g.sms - h.blocks), 256, 0, g.work>>>(ca, cb, copy_n);
          check(cudaGetLastError(), "copy launch");
        };
        report("copy_sized", {copy_n * 16}, h, alone, timed(g, h, iters, sized, ha, hb, per_block, moved, held));
      }
    std::printf("copy alone: %.1f GB/s (512 MiB each way)\n", 2.0 * copy_n * 16 / (alone * 1e3));

    save();
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "kformer-sm-share: " << e.what() << "\n";
    return 1;
  }
}

// cuDNN's flash attention behind kernels.attention=vendor (see attention_vendor.hpp): the SDPA
// forward and backward graphs of cuDNN 9, built with the header-only cudnn-frontend. The only file
// that includes cudnn_frontend.h, which costs about 80 s of nvcc: keep it the only one.
//
// cuDNN (and the NVRTC its frontend calls) is opened at run time, with the frontend's dynamic
// loading (NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING, kernels/CMakeLists.txt), not linked: a machine
// without libcudnn.so.9 on its library path still runs every other kernel, `auto` leaves `vendor`
// out there, and `vendor` set in the deck says what is missing.
#include "attention_vendor.hpp"

#include <stdexcept>
#include <string>

#if defined(KOKKOS_ENABLE_CUDA) && KFORMER_HAVE_CUDNN
#include <cudnn_frontend.h>
#include <dlfcn.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <unordered_map>

#include "kept_buffer.hpp"
#endif

namespace kformer::kernels::detail {

#if defined(KOKKOS_ENABLE_CUDA)
#if KFORMER_HAVE_CUDNN
namespace {

namespace fe = cudnn_frontend;
using Graph = fe::graph::Graph;
using Tensor = std::shared_ptr<fe::graph::Tensor_attributes>;

std::string describe(bool backward, const SdpaShape& s) {
  return std::string(backward ? "backward" : "forward") + " B=" + std::to_string(s.B) + " T=" + std::to_string(s.T) +
         " H=" + std::to_string(s.H) + " KV=" + std::to_string(s.KV) + " hd=" + std::to_string(s.hd);
}

void check(fe::error_t e, const char* step, bool backward, const SdpaShape& s) {
  if (e.is_good()) return;
  throw std::runtime_error("kernels.attention=vendor: cuDNN's attention " + describe(backward, s) + ": " + step +
                           " failed: " + e.get_message() + " (kernels.attention=fused runs every shape)");
}

// libcudnn.so.9 opened once (the frontend's calls go through the handle it keeps); "" when it
// loaded, else why not.
const std::string& cudnn_load_error() {
  static const std::string error = [] {
    dlerror();
    void* h = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
      const char* e = dlerror();
      return std::string(e ? e : "dlopen failed");
    }
    fe::cudnn_dlhandle = h;
    return std::string();
  }();
  return error;
}

// One handle per process, deliberately never destroyed (as cuBLAS's in gemm_vendor.cpp): a static
// destructor would run after the CUDA runtime has shut down. Set to exec's stream for each call.
cudnnHandle_t cudnn_handle(const Kokkos::Cuda& exec) {
  if (!cudnn_load_error().empty())
    throw std::runtime_error("kernels.attention=vendor: cannot open cuDNN (" + cudnn_load_error() +
                             "): put the directory of libcudnn.so.9 (cuDNN 9, e.g. PyTorch's nvidia/cudnn/lib) on "
                             "LD_LIBRARY_PATH, or use kernels.attention=auto");
  static cudnnHandle_t handle = [] {
    cudnnHandle_t h = nullptr;
    const cudnnStatus_t st = fe::detail::create_handle(&h);
    if (st != CUDNN_STATUS_SUCCESS)
      throw std::runtime_error(std::string("kernels.attention=vendor: cudnnCreate failed (") +
                               fe::detail::get_error_string(st) + "): is a GPU visible?");
    return h;
  }();
  const cudnnStatus_t st = fe::detail::set_stream(handle, exec.cuda_stream());
  if (st != CUDNN_STATUS_SUCCESS)
    throw std::runtime_error(std::string("kernels.attention=vendor: cudnnSetStream failed: ") +
                             fe::detail::get_error_string(st));
  return handle;
}

// The tensors' ids in the variant packs.
enum Uid : std::int64_t { kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV };

// Heads [h0, h0 + n) of the packed qkv (B,T,W) or of dqkv, as cuDNN's (B, heads, T, hd): the
// pointer handed over at execution starts at head h0, so only the strides are described here.
fe::graph::Tensor_attributes packed_heads(const char* name, Uid uid, const SdpaShape& s, int n) {
  const std::int64_t W = std::int64_t(s.H + 2 * s.KV) * s.hd;
  return fe::graph::Tensor_attributes()
      .set_name(name)
      .set_uid(uid)
      .set_dim({s.B, n, s.T, s.hd})
      .set_stride({s.T * W, s.hd, W, 1});
}
// out (B,T,H*hd) and dout: the heads side by side.
fe::graph::Tensor_attributes heads_side_by_side(const char* name, Uid uid, const SdpaShape& s) {
  const std::int64_t W = std::int64_t(s.H) * s.hd;
  return fe::graph::Tensor_attributes()
      .set_name(name)
      .set_uid(uid)
      .set_dim({s.B, s.H, s.T, s.hd})
      .set_stride({s.T * W, s.hd, W, 1});
}
// The row logsumexp, AttentionState::lse (B,H,T), in fp32.
void as_stats(fe::graph::Tensor_attributes& t, const SdpaShape& s) {
  t.set_uid(kStats)
      .set_data_type(fe::DataType_t::FLOAT)
      .set_dim({s.B, s.H, s.T, 1})
      .set_stride({std::int64_t(s.H) * s.T, s.T, 1, 1});
}

std::shared_ptr<Graph> new_graph() {
  auto g = std::make_shared<Graph>();
  // bf16 in and out; scores, softmax and every sum in fp32, as kformer's own kernels do.
  g->set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  return g;
}

// Causal with the diagonal at the top left: query t sees keys 0..t (the sequences are whole).
template <class Attributes>
Attributes causal(Attributes a, const SdpaShape& s) {
  return a.set_attn_scale(1.0f / std::sqrt(float(s.hd)))
      .set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT)
      .set_diagonal_band_right_bound(0);
}

std::shared_ptr<Graph> forward_graph(const SdpaShape& s) {
  auto g = new_graph();
  const Tensor q = g->tensor(packed_heads("Q", kQ, s, s.H));
  const Tensor k = g->tensor(packed_heads("K", kK, s, s.KV));
  const Tensor v = g->tensor(packed_heads("V", kV, s, s.KV));
  const auto options = causal(fe::graph::SDPA_attributes().set_name("attention"), s).set_generate_stats(true);
  auto [o, stats] = g->sdpa(q, k, v, options);
  const auto layout = heads_side_by_side("O", kO, s);
  o->set_output(true).set_name("O").set_uid(kO).set_dim(layout.get_dim()).set_stride(layout.get_stride());
  stats->set_output(true);
  as_stats(*stats, s);
  return g;
}

std::shared_ptr<Graph> backward_graph(const SdpaShape& s) {
  auto g = new_graph();
  const Tensor q = g->tensor(packed_heads("Q", kQ, s, s.H));
  const Tensor k = g->tensor(packed_heads("K", kK, s, s.KV));
  const Tensor v = g->tensor(packed_heads("V", kV, s, s.KV));
  const Tensor o = g->tensor(heads_side_by_side("O", kO, s));
  const Tensor dout = g->tensor(heads_side_by_side("dO", kDO, s));
  auto stats_attr = fe::graph::Tensor_attributes().set_name("stats");
  as_stats(stats_attr, s);
  const Tensor stats = g->tensor(stats_attr);
  // The default (non-deterministic) algorithm: the deterministic one on Hopper keeps a (B,H,T,T)
  // workspace, the memory flash attention exists to avoid.
  const auto options = causal(fe::graph::SDPA_backward_attributes().set_name("attention_backward"), s);
  auto [dq, dk, dv] = g->sdpa_backward(q, k, v, o, dout, stats, options);
  const auto place = [&](const Tensor& t, const char* name, Uid uid, int heads) {
    const auto layout = packed_heads(name, uid, s, heads);
    t->set_output(true).set_name(name).set_uid(uid).set_dim(layout.get_dim()).set_stride(layout.get_stride());
  };
  place(dq, "dQ", kDQ, s.H);
  place(dk, "dK", kDK, s.KV);
  place(dv, "dV", kDV, s.KV);
  return g;
}

struct Built {
  std::shared_ptr<Graph> graph;
  std::int64_t workspace = 0;
};

// The graph for one direction and shape, built on first use: heuristics mode A, then the fallback
// list; the first plan that builds is kept.
Built build(bool backward, const SdpaShape& s, cudnnHandle_t handle) {
  Built b;
  b.graph = backward ? backward_graph(s) : forward_graph(s);
  check(b.graph->validate(), "validate", backward, s);
  check(b.graph->build_operation_graph(handle), "build_operation_graph", backward, s);
  check(b.graph->create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK}), "create_execution_plans",
        backward, s);
  check(b.graph->check_support(), "check_support", backward, s);
  check(b.graph->build_plans(fe::BuildPlanPolicy_t::HEURISTICS_CHOICE), "build_plans", backward, s);
  check(b.graph->get_workspace_size(b.workspace), "get_workspace_size", backward, s);
  return b;
}

struct WorkspaceTag {};

// Builds (once per direction and shape) and runs the graph on exec's stream with the buffers of
// `pack`. One lock around it all: the cache, the handle's stream and the workspace are shared.
void run(const Kokkos::Cuda& exec, bool backward, const SdpaShape& s, std::unordered_map<std::int64_t, void*>& pack) {
  using Key = std::tuple<bool, int, int, int, int, int>;
  static std::mutex mutex;
  // Never destroyed, like the handle: the graphs' cuDNN descriptors must not be freed after
  // the CUDA runtime has shut down.
  static auto* graphs = new std::map<Key, Built>();
  static std::int64_t largest_workspace = 0;
  std::lock_guard<std::mutex> lock(mutex);
  const cudnnHandle_t handle = cudnn_handle(exec);
  const Key key{backward, s.B, s.T, s.H, s.KV, s.hd};
  auto it = graphs->find(key);
  if (it == graphs->end()) {
    it = graphs->emplace(key, build(backward, s, handle)).first;
    if (it->second.workspace > largest_workspace) largest_workspace = it->second.workspace;
  }
  // The largest any graph needs, kept from call to call (kept_buffer.hpp): it grows in the first
  // steps only, and calls on one stream run in order, so reusing it while a kernel reads it is safe.
  const auto workspace = kept_buffer<WorkspaceTag, unsigned char, Kokkos::CudaSpace>(
      std::size_t(largest_workspace > 0 ? largest_workspace : 1), "kformer::cudnn_workspace");
  check(it->second.graph->execute(handle, pack, workspace.data()), "execute", backward, s);
}

// bf16 is 16 raw bits, the layout of __nv_bfloat16: the pointers go as they are. cuDNN's variant
// pack takes void* for inputs too.
void* ptr(const void* p) { return const_cast<void*>(p); }

}  // namespace

bool cudnn_attention_loads(std::string* why) {
  if (why) *why = cudnn_load_error();
  return cudnn_load_error().empty();
}

void cudnn_attention_forward(const Kokkos::Cuda& exec, const SdpaShape& s, const bf16* qkv, bf16* out, float* lse) {
  std::unordered_map<std::int64_t, void*> pack = {{kQ, ptr(qkv)},
                                                  {kK, ptr(qkv + std::size_t(s.H) * s.hd)},
                                                  {kV, ptr(qkv + std::size_t(s.H + s.KV) * s.hd)},
                                                  {kO, out},
                                                  {kStats, lse}};
  run(exec, false, s, pack);
}

void cudnn_attention_backward(const Kokkos::Cuda& exec, const SdpaShape& s, const bf16* qkv, const bf16* out,
                              const bf16* dout, const float* lse, bf16* dqkv) {
  const std::size_t k0 = std::size_t(s.H) * s.hd, v0 = std::size_t(s.H + s.KV) * s.hd;
  std::unordered_map<std::int64_t, void*> pack = {
      {kQ, ptr(qkv)},     {kK, ptr(qkv + k0)},  {kV, ptr(qkv + v0)},  {kO, ptr(out)},     {kDO, ptr(dout)},
      {kStats, ptr(lse)}, {kDQ, ptr(dqkv)},     {kDK, ptr(dqkv + k0)}, {kDV, ptr(dqkv + v0)}};
  run(exec, true, s, pack);
}

#else  // no cuDNN in this build: the entry points say how to get it

bool cudnn_attention_loads(std::string* why) {
  if (why) *why = "this kformer was built without cuDNN";
  return false;
}

namespace {
[[noreturn]] void no_cudnn() {
  throw std::runtime_error(
      "kernels.attention=vendor needs cuDNN, but this kformer was built without it: install cuDNN 9 beside CUDA, "
      "unpack cudnn-frontend with scripts/setup.sh --cuda and reconfigure with -DKFORMER_ENABLE_CUDNN=ON, or use "
      "kernels.attention=auto");
}
}  // namespace

void cudnn_attention_forward(const Kokkos::Cuda& exec, const SdpaShape& s, const bf16* qkv, bf16* out, float* lse) {
  (void)exec, (void)s, (void)qkv, (void)out, (void)lse;
  no_cudnn();
}

void cudnn_attention_backward(const Kokkos::Cuda& exec, const SdpaShape& s, const bf16* qkv, const bf16* out,
                              const bf16* dout, const float* lse, bf16* dqkv) {
  (void)exec, (void)s, (void)qkv, (void)out, (void)dout, (void)lse, (void)dqkv;
  no_cudnn();
}

#endif
#endif

}  // namespace kformer::kernels::detail

#if defined(KOKKOS_ENABLE_CUDA) && KFORMER_HAVE_CUDNN
// The frontend's dynamic loading reads its cuDNN library through this handle (set by
// cudnn_load_error above); the frontend declares it and leaves its definition to one file.
namespace cudnn_frontend {
void* cudnn_dlhandle = nullptr;
}  // namespace cudnn_frontend
#endif

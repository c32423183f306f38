// oneDNN's bf16 matmul, one cached primitive per kind of call (see gemm_dnnl.hpp).
#include "gemm_dnnl.hpp"

#include "kformer_config.hpp"

#if KFORMER_HAVE_DNNL
#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <unordered_map>
#endif

namespace kformer::kernels::detail {

#if KFORMER_HAVE_DNNL
namespace {

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

// Every field of a DnnlGemm that the primitive depends on (all of them), as bytes to compare.
struct Key {
  long long v[16];
  bool operator<(const Key& o) const { return std::memcmp(v, o.v, sizeof v) < 0; }
};
Key key_of(const DnnlGemm& g) {
  std::uint32_t alpha = 0, beta = 0;
  std::memcpy(&alpha, &g.alpha, sizeof alpha), std::memcpy(&beta, &g.beta, sizeof beta);
  return {{g.trans_a, g.trans_b, g.M, g.N, g.K, g.count, g.lda, g.ldb, g.ldc, g.stride_a, g.stride_b, g.stride_c, alpha,
           beta, g.c_bf16, g.bias}};
}

struct Entry {
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul prim;
};

// The primitive for g, or nullptr where oneDNN has none on this CPU (dnnl_unimplemented) or only
// its reference kernel, in either form of alpha.
std::shared_ptr<const Entry> build(const DnnlGemm& g) {
  using dt = dnnl::memory::data_type;
  using dims = dnnl::memory::dims;
  // op(A)(m, k) = a[m * lda + k] or a[k * lda + m]; op(B)(k, n) = b[k * ldb + n] or b[n * ldb + k].
  const dims sa = g.trans_a ? dims{1, g.lda} : dims{g.lda, 1}, sb = g.trans_b ? dims{1, g.ldb} : dims{g.ldb, 1};
  const bool batch = g.count > 1;
  const auto md = [&](long long rows, long long cols, dt type, const dims& strides, long long stride) {
    return batch ? dnnl::memory::desc(dims{g.count, rows, cols}, type, dims{stride, strides[0], strides[1]})
                 : dnnl::memory::desc(dims{rows, cols}, type, strides);
  };
  const dnnl::memory::desc a_md = md(g.M, g.K, dt::bf16, sa, g.stride_a);
  const dnnl::memory::desc b_md = md(g.K, g.N, dt::bf16, sb, g.stride_b);
  const dnnl::memory::desc c_md = md(g.M, g.N, g.c_bf16 ? dt::bf16 : dt::f32, {g.ldc, 1}, g.stride_c);
  const dnnl::matmul::desc d = g.bias ? dnnl::matmul::desc(a_md, b_md, md(1, g.N, dt::f32, {g.N, 1}, 0), c_md)
                                      : dnnl::matmul::desc(a_md, b_md, c_md);
  // alpha as a linear post-op of the sums where nothing else follows (oneDNN 2.6's output scale
  // is the slow pass), else as the output scale with beta C added after it (a linear post-op
  // before the sum leaves oneDNN only its reference kernel). beta == 0 never reads C (it may hold
  // NaN).
  for (const bool linear : {true, false}) {
    if (linear && (g.alpha == 1.0f || g.beta != 0.0f)) continue;
    dnnl::primitive_attr attr;
    dnnl::post_ops po;
    if (linear) po.append_eltwise(1.0f, dnnl::algorithm::eltwise_linear, g.alpha, 0.0f);
    if (!linear && g.alpha != 1.0f) attr.set_output_scales(0, {g.alpha});
    if (g.beta != 0.0f) po.append_sum(g.beta);
    attr.set_post_ops(po);
    try {
      const dnnl::matmul::primitive_desc pd(d, attr, engine());
      // oneDNN's reference kernel (plain loops, for checking its others) is far slower than CBLAS
      // on widened copies: where it is all oneDNN has, take the CBLAS path.
      if (std::strncmp(pd.impl_info_str(), "ref", 3) != 0)
        return std::make_shared<const Entry>(Entry{pd, dnnl::matmul(pd)});
    } catch (const dnnl::error& e) {
      if (e.status != dnnl_unimplemented) throw;
    }
  }
  return nullptr;
}

// The cache: a handful of kinds per model (the linear layers' shapes, the attention's products).
std::shared_ptr<const Entry> primitive(const DnnlGemm& g) {
  static std::mutex mutex;
  static std::map<Key, std::shared_ptr<const Entry>> cache;
  const Key k = key_of(g);
  std::lock_guard<std::mutex> lock(mutex);
  const auto it = cache.find(k);
  if (it != cache.end()) return it->second;
  return cache.emplace(k, build(g)).first->second;
}

}  // namespace

bool dnnl_gemm(const DnnlGemm& g, const bf16* a, const bf16* b, const float* bias, void* c) {
  if (g.bias && g.alpha != 1.0f) throw std::logic_error("dnnl_gemm: a bias is taken with alpha == 1 only");
  const auto p = primitive(g);
  if (!p) return false;
  const dnnl::matmul::primitive_desc& pd = p->pd;
  dnnl::engine& e = engine();
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, dnnl::memory(pd.src_desc(), e, const_cast<bf16*>(a))},
      {DNNL_ARG_WEIGHTS, dnnl::memory(pd.weights_desc(), e, const_cast<bf16*>(b))},
      {DNNL_ARG_DST, dnnl::memory(pd.dst_desc(), e, c)}};
  if (g.bias) args.emplace(DNNL_ARG_BIAS, dnnl::memory(pd.bias_desc(), e, const_cast<float*>(bias)));
  dnnl::stream stream(e);
  p->prim.execute(stream, args);
  stream.wait();
  return true;
}

bool dnnl_gemm_runs(bool c_bf16, bool bias) {
  DnnlGemm g;
  g.M = g.N = g.K = g.lda = g.ldb = g.ldc = 2;
  g.c_bf16 = c_bf16, g.bias = bias;
  return primitive(g) != nullptr;
}

#else

bool dnnl_gemm(const DnnlGemm&, const bf16*, const bf16*, const float*, void*) { return false; }
bool dnnl_gemm_runs(bool, bool) { return false; }

#endif

}  // namespace kformer::kernels::detail

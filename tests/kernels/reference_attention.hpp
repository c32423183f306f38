// float64 host reference of causal grouped-query attention on the packed layout of
// kernels/attention/attention_common.hpp: qkv (B,T,(H+2KV)*hd) -> out (B,T,H*hd), written from the
// textbook formulas (softmax(q k^T / sqrt(hd)) v with a causal mask), not from the kernels.
#pragma once

#include <cmath>
#include <vector>

namespace ktest::ref {

struct AttnShape {
  int B, T, H, KV, hd;
  int W() const { return (H + 2 * KV) * hd; }
  std::size_t at(int b, int t, int col) const { return (std::size_t(b) * T + t) * W() + col; }
  std::size_t out_at(int b, int t, int h) const { return (std::size_t(b) * T + t) * H * hd + std::size_t(h) * hd; }
  int q(int h) const { return h * hd; }
  int k(int h) const { return (H + h / (H / KV)) * hd; }  // kv head of query head h
  int v(int h) const { return (H + KV + h / (H / KV)) * hd; }
};

// Probabilities p[t2], t2 <= t, of query head h at position t.
inline std::vector<double> attention_probs(const std::vector<double>& qkv, const AttnShape& s, int b, int h, int t) {
  const double scale = 1 / std::sqrt(double(s.hd));
  std::vector<double> p(t + 1);
  double mx = -1e300, sum = 0;
  for (int t2 = 0; t2 <= t; ++t2) {
    double dot = 0;
    for (int d = 0; d < s.hd; ++d) dot += qkv[s.at(b, t, s.q(h) + d)] * qkv[s.at(b, t2, s.k(h) + d)];
    p[t2] = dot * scale;
    mx = std::max(mx, p[t2]);
  }
  for (double& e : p) sum += (e = std::exp(e - mx));
  for (double& e : p) e /= sum;
  return p;
}

inline std::vector<double> attention_forward(const std::vector<double>& qkv, const AttnShape& s) {
  std::vector<double> out(std::size_t(s.B) * s.T * s.H * s.hd, 0.0);
  for (int b = 0; b < s.B; ++b)
    for (int h = 0; h < s.H; ++h)
      for (int t = 0; t < s.T; ++t) {
        const auto p = attention_probs(qkv, s, b, h, t);
        for (int t2 = 0; t2 <= t; ++t2)
          for (int d = 0; d < s.hd; ++d) out[s.out_at(b, t, h) + d] += p[t2] * qkv[s.at(b, t2, s.v(h) + d)];
      }
  return out;
}

// dqkv for the upstream gradient dout (B,T,H*hd).
inline std::vector<double> attention_backward(const std::vector<double>& qkv, const std::vector<double>& dout,
                                              const AttnShape& s) {
  const double scale = 1 / std::sqrt(double(s.hd));
  std::vector<double> dqkv(qkv.size(), 0.0);
  for (int b = 0; b < s.B; ++b)
    for (int h = 0; h < s.H; ++h)
      for (int t = 0; t < s.T; ++t) {
        const auto p = attention_probs(qkv, s, b, h, t);
        std::vector<double> dp(t + 1, 0.0);
        double pdp = 0;
        for (int t2 = 0; t2 <= t; ++t2) {
          for (int d = 0; d < s.hd; ++d) dp[t2] += dout[s.out_at(b, t, h) + d] * qkv[s.at(b, t2, s.v(h) + d)];
          pdp += p[t2] * dp[t2];
        }
        for (int t2 = 0; t2 <= t; ++t2) {
          const double ds = p[t2] * (dp[t2] - pdp) * scale;
          for (int d = 0; d < s.hd; ++d) {
            dqkv[s.at(b, t, s.q(h) + d)] += ds * qkv[s.at(b, t2, s.k(h) + d)];
            dqkv[s.at(b, t2, s.k(h) + d)] += ds * qkv[s.at(b, t, s.q(h) + d)];
            dqkv[s.at(b, t2, s.v(h) + d)] += p[t2] * dout[s.out_at(b, t, h) + d];
          }
        }
      }
  return dqkv;
}

}  // namespace ktest::ref

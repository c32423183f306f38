// float64 host references for the norms, activations and RoPE kernel tests, written from the
// formulas (not from the kernels), row-major like the kernels' views.
#pragma once

#include <cmath>
#include <vector>

namespace ktest::ref {

using Vec = std::vector<double>;

struct Norm {
  Vec out, mean, rstd;
};

// LayerNorm (centered, bias may be empty) or RMSNorm (not centered, no bias) of x (N,C).
inline Norm norm_forward(const Vec& x, const Vec& w, const Vec& b, int N, int C, double eps, bool centered) {
  Norm r{Vec(x.size()), Vec(N), Vec(N)};
  for (int n = 0; n < N; ++n) {
    double mu = 0, var = 0;
    if (centered) {
      for (int c = 0; c < C; ++c) mu += x[n * C + c];
      mu /= C;
    }
    for (int c = 0; c < C; ++c) var += (x[n * C + c] - mu) * (x[n * C + c] - mu);
    const double rs = 1 / std::sqrt(var / C + eps);
    for (int c = 0; c < C; ++c) r.out[n * C + c] = (x[n * C + c] - mu) * rs * w[c] + (b.empty() ? 0.0 : b[c]);
    r.mean[n] = mu;
    r.rstd[n] = rs;
  }
  return r;
}

// dx (N,C), dw (C), db (C) of the norm above for the upstream gradient dy (N,C).
inline void norm_backward(const Vec& dy, const Vec& x, const Vec& w, int N, int C, double eps, bool centered,
                          Vec& dx, Vec& dw, Vec& db) {
  const Norm f = norm_forward(x, w, Vec(), N, C, eps, centered);
  dx.assign(x.size(), 0);
  dw.assign(C, 0);
  db.assign(C, 0);
  for (int n = 0; n < N; ++n) {
    double mg = 0, mgx = 0;
    for (int c = 0; c < C; ++c) {
      const double g = dy[n * C + c] * w[c], xh = (x[n * C + c] - f.mean[n]) * f.rstd[n];
      mg += g / C;
      mgx += g * xh / C;
      dw[c] += dy[n * C + c] * xh;
      db[c] += dy[n * C + c];
    }
    for (int c = 0; c < C; ++c) {
      const double xh = (x[n * C + c] - f.mean[n]) * f.rstd[n];
      dx[n * C + c] = f.rstd[n] * (dy[n * C + c] * w[c] - (centered ? mg : 0.0) - xh * mgx);
    }
  }
}

inline double gelu(double x) {
  const double k = std::sqrt(2 / M_PI);
  return 0.5 * x * (1 + std::tanh(k * (x + 0.044715 * x * x * x)));
}
inline double gelu_grad(double x) {
  const double k = std::sqrt(2 / M_PI), t = std::tanh(k * (x + 0.044715 * x * x * x));
  return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x);
}

inline double sigmoid(double a) { return 1 / (1 + std::exp(-a)); }

// SwiGLU of inp (N,2F) = [gate | up] -> (N,F).
inline Vec swiglu_forward(const Vec& inp, int N, int F) {
  Vec out(std::size_t(N) * F);
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < F; ++c) {
      const double a = inp[n * 2 * F + c];
      out[n * F + c] = a * sigmoid(a) * inp[n * 2 * F + F + c];
    }
  return out;
}
inline Vec swiglu_backward(const Vec& inp, const Vec& dout, int N, int F) {
  Vec d(inp.size());
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < F; ++c) {
      const double a = inp[n * 2 * F + c], u = inp[n * 2 * F + F + c], g = dout[n * F + c], s = sigmoid(a);
      d[n * 2 * F + c] = g * u * (s + a * s * (1 - s));
      d[n * 2 * F + F + c] = g * a * s;
    }
  return d;
}

// RoPE (rotate_half pairs (i, i + hd/2)) on the first `nrot` heads of x (B*T rows, W wide);
// sign -1 applies the inverse rotation (the backward).
inline Vec rope(const Vec& x, int B, int T, int W, int nrot, int hd, int pos0, double theta, double sign) {
  Vec y = x;
  const int half = hd / 2;
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t)
      for (int h = 0; h < nrot; ++h)
        for (int i = 0; i < half; ++i) {
          const double ang = (pos0 + t) * std::pow(theta, -2.0 * i / hd);
          const double c = std::cos(ang), s = sign * std::sin(ang);
          const std::size_t j = (std::size_t(b) * T + t) * W + h * hd + i;
          y[j] = x[j] * c - x[j + half] * s;
          y[j + half] = x[j + half] * c + x[j] * s;
        }
  return y;
}

}  // namespace ktest::ref

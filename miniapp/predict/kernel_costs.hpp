// The time of one kernel call on a machine profile, per family: GEMMs (a measured shape, else the
// profile's efficiency curve), causal attention (a measured shape, else FLOPs over its rate) and
// memory-bound kernels (the bytes each moves over its family's bandwidth). The byte counts are
// what calibrate divides by when it measures a family, so a family measured at a deck's shapes
// predicts those shapes exactly. Shapes as in block.hpp: N = B*T tokens, C = d_model.
#pragma once

#include <string>

#include "predict/machine_profile.hpp"

namespace kformer::predict {

// y(m,n) = x(m,k) w(n,k)^T, 2mnk FLOPs; backward: dx and dW, twice that.
double gemm_us(const MachineProfile& p, int m, int n, int k, bool backward);
// Causal attention of b sequences of t tokens, h query heads (kv shared), head size hd.
double attention_us(const MachineProfile& p, const std::string& kind, int b, int t, int h, int kv, int hd,
                    bool backward);
double attention_flops(int b, int t, int h, int hd, bool backward);
// A memory-bound kernel of `family` moving `bytes`.
double memory_us(const MachineProfile& p, const std::string& family, double bytes);

// Bytes moved (fp32) by the memory-bound kernels, forward and backward.
namespace bytes {
double norm(double N, double C, bool backward);        // read x (and dy), write y (dx)
double activation(double N, double F, bool gpt, bool backward);  // gelu on (N,F); swiglu (N,2F)->(N,F)
double residual(double N, double C);                   // out = a + b
double rope(double N, double width);                   // width = (H+KV)*hd rotated in place
double embedding(double N, double C);                  // a row gather (forward) or scatter-add (backward)
double cross_entropy(double N, double V, bool backward);  // max and sums (forward), finish (backward)
double adamw(double elements);                         // p, g, m, v read; p, m, v written
}  // namespace bytes

}  // namespace kformer::predict

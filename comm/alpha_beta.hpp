// Hockney's alpha-beta model of a message: time = alpha + bytes / beta. The emulation decorator
// uses it to slow calls down to a chosen network, the benchmark fits it to measured times, and
// the trainer uses the fit to predict communication time. Bytes are bus bytes, counted as
// nccl-tests counts them, so one (alpha, beta) describes every collective and the fitted beta is
// directly comparable with the reported busbw. Pure functions: no communication, no clock.
#pragma once

#include <cstddef>
#include <vector>

#include "communicator.hpp"

namespace kformer::comm {

// comm.emulate.latency_us and comm.emulate.bandwidth_gbps (Gbit/s; 0 = unlimited).
struct NetworkModel {
  double latency_us = 0.0;
  double bandwidth_gbps = 0.0;
  bool enabled() const { return latency_us > 0.0 || bandwidth_gbps > 0.0; }
};

// Throws std::runtime_error naming the deck key when a value is negative or not finite.
void check_network_model(const NetworkModel& m);

// nccl-tests' busbw factor on n ranks: allreduce 2(n-1)/n; reduce_scatter, allgather (n-1)/n;
// broadcast and point-to-point 1.
double bus_factor(OpKind kind, int n);

// Modelled time of one call on a group of n ranks; `bytes` is nccl-tests' size (op_bytes()). A
// one-rank group sends nothing and costs nothing.
double modelled_time_us(const NetworkModel& m, OpKind kind, std::size_t bytes, int n);
double modelled_time_us(const NetworkModel& m, const Op& op, int n);
// A batch of sends and receives shares one latency and the link runs both ways at once: the
// larger of the bytes sent and the bytes received counts.
double modelled_group_time_us(const NetworkModel& m, const std::vector<Op>& ops, int n);
// A barrier is one round of empty messages.
double modelled_barrier_us(const NetworkModel& m, int n);

// alpha (us) and beta (GB/s, 1e9 bytes/s) fitted to (bytes, time_us) samples.
struct HockneyFit {
  double alpha_us = 0.0;
  double beta_gbytes_per_s = 0.0;  // +inf when time does not grow with bytes
  std::size_t points = 0;
  double predict_us(double bytes) const;
};

// Least squares on relative residuals (each point weighted by 1/time^2): plain least squares
// over 8 B .. 256 MiB would let the largest messages decide alpha as well, and alpha comes out
// negative as soon as they are a little noisy. Needs >= 2 distinct sizes (else throws).
HockneyFit fit_hockney(const std::vector<double>& bytes, const std::vector<double>& time_us);

}  // namespace kformer::comm

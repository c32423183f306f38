// The alpha-beta model and its least-squares fit (see alpha_beta.hpp).
#include "alpha_beta.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace kformer::comm {

void check_network_model(const NetworkModel& m) {
  if (!std::isfinite(m.latency_us) || m.latency_us < 0.0)
    throw std::runtime_error("comm.emulate.latency_us=" + std::to_string(m.latency_us) +
                                ": must be a finite number >= 0 (0 adds no latency)");
  if (!std::isfinite(m.bandwidth_gbps) || m.bandwidth_gbps < 0.0)
    throw std::runtime_error("comm.emulate.bandwidth_gbps=" + std::to_string(m.bandwidth_gbps) +
                                ": must be a finite number >= 0 in Gbit/s (0 = unlimited)");
}

double bus_factor(OpKind kind, int n) {
  if (n < 1) return 0.0;
  switch (kind) {
    case OpKind::allreduce: return 2.0 * (n - 1) / n;
    case OpKind::reduce_scatter:
    case OpKind::allgather: return double(n - 1) / n;
    case OpKind::broadcast:
    case OpKind::send:
    case OpKind::recv: return 1.0;
  }
  return 1.0;
}

namespace {

// Gbit/s -> bytes per microsecond: 1 Gbit/s = 1e9 / 8 bytes/s = 125 bytes/us.
double wire_us(const NetworkModel& m, double bus_bytes) {
  return m.bandwidth_gbps > 0.0 ? bus_bytes / (m.bandwidth_gbps * 125.0) : 0.0;
}

}  // namespace

double modelled_time_us(const NetworkModel& m, OpKind kind, std::size_t bytes, int n) {
  if (n <= 1) return 0.0;
  return m.latency_us + wire_us(m, bus_factor(kind, n) * static_cast<double>(bytes));
}

double modelled_time_us(const NetworkModel& m, const Op& op, int n) {
  return modelled_time_us(m, op.kind, op_bytes(op, n), n);
}

double modelled_group_time_us(const NetworkModel& m, const std::vector<Op>& ops, int n) {
  if (n <= 1 || ops.empty()) return 0.0;
  double sent = 0.0, received = 0.0;
  for (const Op& op : ops) (op.kind == OpKind::send ? sent : received) += double(op_bytes(op, n));
  return m.latency_us + wire_us(m, std::max(sent, received));
}

double modelled_barrier_us(const NetworkModel& m, int n) { return n <= 1 ? 0.0 : m.latency_us; }

double HockneyFit::predict_us(double bytes) const {
  return alpha_us + (std::isinf(beta_gbytes_per_s) ? 0.0 : bytes / (beta_gbytes_per_s * 1e3));
}

HockneyFit fit_hockney(const std::vector<double>& bytes, const std::vector<double>& time_us) {
  if (bytes.size() != time_us.size())
    throw std::invalid_argument("fit_hockney: " + std::to_string(bytes.size()) + " sizes but " +
                                std::to_string(time_us.size()) + " times: pass one time per size");
  double s = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  std::size_t used = 0;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (!(time_us[i] > 0.0)) continue;  // a zero time carries no information about the rate
    const double w = 1.0 / (time_us[i] * time_us[i]);
    ++used;
    s += w;
    sx += w * bytes[i];
    sy += w * time_us[i];
    sxx += w * bytes[i] * bytes[i];
    sxy += w * bytes[i] * time_us[i];
  }
  const double det = s * sxx - sx * sx;
  if (!(det > 0.0) || !(det > 1e-12 * s * sxx))
    throw std::invalid_argument("fit_hockney: needs positive times at two or more distinct sizes; "
                                "widen the size range (-b/-e)");
  const double slope = (s * sxy - sx * sy) / det;  // us per byte
  HockneyFit f;
  f.alpha_us = (sy - slope * sx) / s;
  f.beta_gbytes_per_s = slope > 0.0 ? 1.0 / (slope * 1e3) : std::numeric_limits<double>::infinity();
  f.points = used;
  return f;
}

}  // namespace kformer::comm

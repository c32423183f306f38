// Communication costs of a predicted run (see network_cost.hpp).
#include "predict/network_cost.hpp"

#include <algorithm>

namespace kformer::predict {

double NetworkCost::real_us(comm::OpKind kind, double bytes, GroupShape g) const {
  if (g.size <= 1) return 0.0;
  const LinkCost c = (intra_node(g) ? p_.intra_node : p_.inter_node).cost(kind, g.size);
  const double bus = comm::bus_factor(kind, g.size) * bytes;
  return c.latency_us + (c.bandwidth_gbps > 0 ? bus / (c.bandwidth_gbps * 125.0) : 0.0);  // 1 Gbit/s = 125 B/us
}

double NetworkCost::emulated_us(comm::OpKind kind, double bytes, int n) const {
  if (!emulate_.enabled()) return 0.0;
  return comm::modelled_time_us(emulate_, kind, static_cast<std::size_t>(bytes), n);
}

double NetworkCost::emulated_group_us(double sent, double received) const {
  if (!emulate_.enabled()) return 0.0;
  const double wire = emulate_.bandwidth_gbps > 0 ? std::max(sent, received) / (emulate_.bandwidth_gbps * 125.0) : 0.0;
  return emulate_.latency_us + wire;
}

}  // namespace kformer::predict

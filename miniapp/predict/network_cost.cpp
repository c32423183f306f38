// Communication costs of a predicted run (see network_cost.hpp).
#include "predict/network_cost.hpp"

#include <algorithm>

#include "predict/nccl_ring.hpp"

namespace kformer::predict {

int NetworkCost::members_per_node(GroupShape g) const {
  if (g.stride >= p_.devices_per_node) return 1;
  return std::max(1, std::min(g.size, p_.devices_per_node / std::max(1, g.stride)));
}

double NetworkCost::real_us(comm::OpKind kind, double bytes, GroupShape g, bool nonblocking) const {
  if (g.size <= 1) return 0.0;
  const bool inside = intra_node(g);
  const LinkCost c = (inside ? p_.intra_node : p_.inter_node).cost(kind, g.size, nonblocking);
  double gbps = c.bandwidth_gbps;
  const int r = inside ? g.size : members_per_node(g);  // the group's members on one node
  if (!inside && p_.nics_per_node > 0 && gbps > 0) {
    gbps *= double(p_.nics_per_node) * r / p_.devices_per_node;  // this group's share of the node's NICs
    const LinkCost nvlink = p_.intra_node.cost(kind, r);
    if (r > 1 && nvlink.bandwidth_gbps > 0) gbps = std::min(gbps, nvlink.bandwidth_gbps);
  }
  const double bus = comm::bus_factor(kind, g.size) * bytes;
  // NCCL's rings (one_stream: NCCL runs this profile's collectives) add a hop's latency a step to a
  // figure for any group size; one measured on a group of its own size (calibrate's) has its hops in it.
  const bool ring = kind == comm::OpKind::allgather || kind == comm::OpKind::reduce_scatter;
  if (p_.one_stream && ring && c.ranks == 0 && gbps > 0)
    return nccl_ring_us(c.latency_us, g.size, (g.size + r - 1) / r, bus, gbps);
  return c.latency_us + (gbps > 0 ? bus / (gbps * 125.0) : 0.0);  // 1 Gbit/s = 125 B/us
}

double NetworkCost::compute_share_lost(GroupShape g) const {
  return g.size > 1 ? held_share(intra_node(g) ? p_.collective_sms_intra : p_.collective_sms_inter) : 0.0;
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

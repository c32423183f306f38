// A ring all-gather or reduce-scatter as NCCL's own tuning model times it (src/graph/tuning.cc,
// ncclTopoTuneModel, of NCCL 2.18): a ring over N ranks on M nodes takes N-1 steps, M-1 of them
// through the network, and each step adds its hop's latency, so the latency grows with the group
// where the profile's one figure a link class does not. NCCL times each protocol and runs the one
// whose latency plus bus bytes over its bandwidth is least:
//   LL      hops 0.47 us on NVLink (x1.8 when the ring crosses nodes), 2.7 us across the network;
//           a quarter of the bus bandwidth across nodes, a third inside one
//   LL128   1.9 us and 4.0 us; 0.92 of the bus bandwidth
//   Simple  3.4 us and 9.6 us; the whole bus bandwidth
// (hwLat's NVLink and NET rows for the ring, and the refinements to busBw that follow them.) NCCL's
// base latency a call is the profile's latency_us here, which stands for it and the launch.
// All-reduce is left out: at scale NCCL takes a tree for it, whose latency grows with log2 of the
// nodes, not with the ranks.
#pragma once

namespace kformer::predict {

// The time of a ring all-gather or reduce-scatter over `ranks` ranks on `nodes` nodes, moving
// `bus_bytes` (nccl-tests' bus bytes) at `bus_gbps` Gbit/s, after `base_us` of latency.
inline double nccl_ring_us(double base_us, int ranks, int nodes, double bus_bytes, double bus_gbps) {
  struct Protocol {
    double nvlink_hop_us, net_hop_us, bandwidth_share;
  };
  const bool across = nodes > 1;
  const Protocol protocols[] = {{0.47 * (across ? 1.8 : 1.0), 2.7, across ? 0.25 : 1.0 / 3.0},
                                {1.9, 4.0, 0.92},
                                {3.4, 9.6, 1.0}};
  const double net_steps = nodes - 1, nvlink_steps = ranks - 1 - net_steps;
  double best = -1;
  for (const Protocol& p : protocols) {
    const double us = base_us + nvlink_steps * p.nvlink_hop_us + net_steps * p.net_hop_us +
                      bus_bytes / (bus_gbps * p.bandwidth_share * 125.0);  // 1 Gbit/s = 125 B/us
    if (best < 0 || us < best) best = us;
  }
  return best;
}

}  // namespace kformer::predict

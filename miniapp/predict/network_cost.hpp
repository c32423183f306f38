// The time of a communication call in a predicted run: the machine's own network (the profile's
// link class for the group: within one node or across nodes) and, when comm.emulate.* is set,
// the emulation decorator's alpha-beta time, which holds every call until at least its post time
// plus the modelled time (comm/emulated_comm.hpp): a call ends at the later of the two.
// Across nodes, on a profile that gives its NICs per node, a group is costed as NCCL runs it: its
// rings pass NVLink inside a node and the NICs between nodes, and every rank of a node
// communicates alike at that point of the step, so the node's NICs are shared by the G/r groups
// that have r members on it: the group's bus bandwidth is min(one NIC x NICs x r / G, the
// intra-node link of r ranks). A data-parallel group with one member per node thus gets NICs/G
// of a NIC; one that fills whole nodes gets all of them.
// On a profile whose collectives NCCL runs (network.one_stream), an all-gather or reduce-scatter is
// NCCL's ring: its latency grows with the ranks and the nodes it crosses (nccl_ring.hpp).
#pragma once

#include <algorithm>

#include "comm/alpha_beta.hpp"
#include "predict/machine_profile.hpp"

namespace kformer::predict {

// What a call of `us` shows beside `compute_us` of compute that starts with it, when the call holds
// `share` of the device's SMs while in flight: what outlasts the compute, or the compute's delay
// (share x us), whichever is larger.
inline double shown_beside_us(double us, double compute_us, double share) {
  return std::max(us - compute_us, us * share);
}

// A group of ranks as the mesh builds it: `size` ranks `stride` apart (TP 1, DP tp, PP tp*dp).
struct GroupShape {
  int size = 1, stride = 1;
};

class NetworkCost {
 public:
  NetworkCost(const MachineProfile& p, comm::NetworkModel emulate) : p_(p), emulate_(emulate) {}

  bool intra_node(GroupShape g) const { return double(g.stride) * g.size <= p_.devices_per_node; }
  // The members of group g on one node (ranks are placed on nodes in world-rank order).
  int members_per_node(GroupShape g) const;
  // The machine's time for a call moving `bytes` (nccl-tests' size) on the group; `nonblocking`:
  // one of several non-blocking calls posted together (the profile's iallreduce, ireduce_scatter
  // where it has them, else the blocking call's figures).
  double real_us(comm::OpKind kind, double bytes, GroupShape g, bool nonblocking = false) const;
  // The emulated network's floor under the call (0 without emulation).
  double emulated_us(comm::OpKind kind, double bytes, int n) const;
  // A group of point-to-point messages posted together: one latency, the larger direction.
  double emulated_group_us(double sent, double received) const;
  // A blocking call that all members enter at once, having computed alike: the later of the
  // two, with the wake-up such a call costs.
  double call_us(comm::OpKind kind, double bytes, GroupShape g) const {
    const double r = real_us(kind, bytes, g) + sync_wakeup_us(g.size);
    const double e = emulated_us(kind, bytes, g.size);
    return r > e ? r : e;
  }
  // The wake-up of a rank that waited in a call for a peer that came later, and of a call its
  // members entered together.
  double wakeup_us(int n) const { return n > 1 ? p_.wakeup_us : 0.0; }
  double sync_wakeup_us(int n) const { return n > 1 ? p_.sync_wakeup_us : 0.0; }
  const comm::NetworkModel& emulation() const { return emulate_; }
  // The share of the device's SMs a collective on group g holds while it runs (the profile's
  // network.collective_sms over its sms): compute beside it runs at 1 minus this. 0 where the
  // profile does not say, or for a group of one.
  double compute_share_lost(GroupShape g) const;
  // The share of the device a kernel holding `sms` SMs takes (0 where the profile gives no sms).
  double held_share(int sms) const { return p_.sms > 0 ? double(sms) / p_.sms : 0.0; }

 private:
  const MachineProfile& p_;
  comm::NetworkModel emulate_;
};

}  // namespace kformer::predict

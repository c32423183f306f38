// The memory a rank can count on when the deck sets no memory.limit_gb: the node's physical
// memory or, when smaller, the memory limit of the job's cgroup (Slurm's --mem, a container's
// limit), shared by the ranks started on the node. Read from /proc and /sys before anything is
// allocated; no Kokkos, no MPI (the caller says how many ranks share the node).
#pragma once

#include <string>

namespace kformer {

struct NodeMemory {
  double bytes = 0;    // for all ranks of the node; 0 = unknown (nothing is checked)
  int ranks = 1;       // ranks on the node
  std::string source;  // "physical memory" or "cgroup limit"
  double per_rank() const { return ranks > 0 ? bytes / ranks : bytes; }
};

// This node, shared by `ranks_on_node` ranks.
NodeMemory probe_node_memory(int ranks_on_node);

// The smallest memory limit, in bytes, set on the cgroups that `self_cgroup` (the text of
// /proc/self/cgroup) names, or on their ancestors, read under `root` (normally /sys/fs/cgroup):
// memory.max for cgroup v2, memory/.../memory.limit_in_bytes for v1. 0 when none is set.
double cgroup_memory_limit(const std::string& self_cgroup, const std::string& root);

}  // namespace kformer

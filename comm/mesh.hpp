// The rank mesh dp x pp x tp, ordered as Megatron orders it: TP fastest, then DP, then PP.
//   world rank = pp_rank * (dp * tp) + dp_rank * tp + tp_rank
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "communicator.hpp"

namespace kformer::comm {

using Groups = std::vector<std::vector<int>>;

struct MeshShape {
  int dp = 1, pp = 1, tp = 1;
};

// The groups of world ranks along each axis, computed without communication.
struct MeshGroups {
  Groups tp, dp, pp;
};
MeshGroups mesh_groups(MeshShape shape);

struct Mesh {
  MeshShape shape;
  int world_rank = 0;
  int tp_rank = 0, dp_rank = 0, pp_rank = 0;
  std::unique_ptr<Communicator> tp, dp, pp;  // this rank's group along each axis
  MeshGroups groups;
};

// Splits `world` into the three axes. Throws with the fix if dp*pp*tp != world size.
Mesh build_mesh(Communicator& world, MeshShape shape);

// "[[0,1],[2,3]]"
std::string format_groups(const Groups& groups);

}  // namespace kformer::comm

// The rank mesh (dp x pp x tp, TP fastest).
#include "mesh.hpp"

#include <sstream>
#include <stdexcept>

namespace kformer::comm {
namespace {

int rank_of(MeshShape s, int pp, int dp, int tp) { return (pp * s.dp + dp) * s.tp + tp; }

}  // namespace

MeshGroups mesh_groups(MeshShape s) {
  MeshGroups g;
  for (int p = 0; p < s.pp; ++p)
    for (int d = 0; d < s.dp; ++d) {
      g.tp.emplace_back();
      for (int t = 0; t < s.tp; ++t) g.tp.back().push_back(rank_of(s, p, d, t));
    }
  for (int p = 0; p < s.pp; ++p)
    for (int t = 0; t < s.tp; ++t) {
      g.dp.emplace_back();
      for (int d = 0; d < s.dp; ++d) g.dp.back().push_back(rank_of(s, p, d, t));
    }
  for (int d = 0; d < s.dp; ++d)
    for (int t = 0; t < s.tp; ++t) {
      g.pp.emplace_back();
      for (int p = 0; p < s.pp; ++p) g.pp.back().push_back(rank_of(s, p, d, t));
    }
  return g;
}

Mesh build_mesh(Communicator& world, MeshShape s) {
  if (s.dp < 1 || s.pp < 1 || s.tp < 1)
    throw std::runtime_error("mesh: dp, pp and tp must be >= 1 (got dp=" + std::to_string(s.dp) +
                             " pp=" + std::to_string(s.pp) + " tp=" + std::to_string(s.tp) + ")");
  if (s.dp * s.pp * s.tp != world.size())
    throw std::runtime_error("mesh: dp*pp*tp = " + std::to_string(s.dp) + "*" + std::to_string(s.pp) +
                             "*" + std::to_string(s.tp) + " = " + std::to_string(s.dp * s.pp * s.tp) +
                             " but the job has " + std::to_string(world.size()) +
                             " ranks: launch that many ranks or change parallel.tp/pp/dp");
  Mesh m;
  m.shape = s;
  m.world_rank = world.rank();
  m.tp_rank = m.world_rank % s.tp;
  m.dp_rank = (m.world_rank / s.tp) % s.dp;
  m.pp_rank = m.world_rank / (s.tp * s.dp);
  m.tp = world.split(m.pp_rank * s.dp + m.dp_rank, m.tp_rank);
  m.dp = world.split(m.pp_rank * s.tp + m.tp_rank, m.dp_rank);
  m.pp = world.split(m.dp_rank * s.tp + m.tp_rank, m.pp_rank);
  world.set_name("world");  // the watchdog names the group of a stuck call: "world group [0,1,2,3]"
  m.tp->set_name("tp");
  m.dp->set_name("dp");
  m.pp->set_name("pp");
  m.groups = mesh_groups(s);
  return m;
}

std::string format_groups(const Groups& groups) {
  std::ostringstream os;
  os << '[';
  for (std::size_t i = 0; i < groups.size(); ++i) {
    os << (i ? ",[" : "[");
    for (std::size_t j = 0; j < groups[i].size(); ++j) os << (j ? "," : "") << groups[i][j];
    os << ']';
  }
  os << ']';
  return os.str();
}

}  // namespace kformer::comm

// The per-rank table (see rank_table.hpp).
#include "train/rank_table.hpp"

namespace kformer {

RankTable::RankTable(int world, int me, const RankColumn& c) : n_(world), t_(std::size_t(kRows) * world, 0.0) {
  const double column[kRows] = {c.busy_ms, c.bubble, c.comm_ms, c.stop_signal, c.compute_ms, c.stretch_ms};
  for (int row = 0; row < kRows; ++row) t_[std::size_t(row) * n_ + me] = column[row];
}

void RankTable::read_into(IterationRecord& r) const {
  const auto row = [&](int k) { return std::vector<double>(t_.begin() + std::size_t(k) * n_, t_.begin() + std::size_t(k + 1) * n_); };
  r.rank_busy_ms = row(0);
  r.rank_bubble = row(1);
  r.rank_comm_ms = row(2);
  r.rank_compute_ms = row(4);
  r.rank_stretch_ms = row(5);
  for (int k = 0; k < n_ && r.stop_signal == 0; ++k)
    if (t_[std::size_t(3) * n_ + k] != 0) r.stop_signal = int(t_[std::size_t(3) * n_ + k]), r.stop_rank = k;
}

}  // namespace kformer

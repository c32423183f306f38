// What every rank learns of every other after an iteration, in one all-reduce (the step
// program's metrics phase): a (kRows, world) table of doubles in which each rank fills its own
// column and leaves the others 0, so the sum is every rank's figures. Its busy time, bubble and
// communication time feed the straggler and bubble figures; the stop signal it may have received
// lets every rank stop after the same iteration; its compute and what a straggler slept are what
// a test can hold without timing the machine.
#pragma once

#include <vector>

#include "train/metrics.hpp"

namespace kformer {

struct RankColumn {  // this rank's figures
  double busy_ms = 0, bubble = 0, comm_ms = 0, stop_signal = 0, compute_ms = 0, stretch_ms = 0;
};

class RankTable {
 public:
  static constexpr int kRows = 6;
  // An empty table of `world` columns with this rank's (`me`) filled in.
  RankTable(int world, int me, const RankColumn& mine);
  std::vector<double>& values() { return t_; }  // the all-reduce sums these in place
  // The summed table into the record: the per-rank figures, and the first rank's stop signal.
  void read_into(IterationRecord& r) const;

 private:
  int n_;
  std::vector<double> t_;
};

}  // namespace kformer

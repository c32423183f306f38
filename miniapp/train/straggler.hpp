// straggler.*: the one rank that stretches its compute by sleeping (slowdown - 1) times its busy
// time after the pipeline, so the same numbers arrive later at the collectives that follow
// (docs/studies.md). Every other rank returns at once.
#pragma once

#include "settings/run_settings.hpp"

namespace kformer {

struct Stretch {
  double added_ms = 0;  // (slowdown - 1) x busy_ms: what the rank's busy time counts
  double slept_ms = 0;  // as slept (never shorter)
};
// What the rank `world_rank` waited after `busy_ms` of compute (nothing on every other rank).
Stretch stretch_if_straggler(const StragglerSettings& s, int world_rank, double busy_ms);

}  // namespace kformer

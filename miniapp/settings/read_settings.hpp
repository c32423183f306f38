// The one reader of a validated Config: every key into RunSettings, once. With validate.cpp and the
// schema, the only code that sees a Config or a key string.
#pragma once

#include <string>
#include <vector>

#include "settings/config.hpp"
#include "settings/run_settings.hpp"

namespace kformer {

// `cfg` as resolve_and_validate left it (derived keys set, auto resolved).
RunSettings read_settings(const Config& cfg);

// The deck at `deck_path`, then the `key=value` overrides, validated for a job of `world_size`
// ranks, read into settings. Throws ConfigError naming the key and the fix. (Whether the layout
// fits in memory is the plan's check: plan/run_plan.hpp.)
RunSettings load_settings(const std::string& deck_path, const std::vector<std::string>& overrides, int world_size);

}  // namespace kformer

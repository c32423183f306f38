// A run's communicator options from its settings (see world_options.hpp).
#include "settings/world_options.hpp"

namespace kformer {

comm::WorldOptions world_options(const CommSettings& c) {
  comm::WorldOptions options;
  options.emulate = {c.latency_us, c.bandwidth_gbps};
  options.timeout_s = c.timeout_s;
  options.strict = c.strict;
  return options;
}

}  // namespace kformer

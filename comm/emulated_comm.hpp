// Network emulation around any backend: every call lasts at least the alpha-beta time of the
// modelled network (alpha_beta.hpp). The real call runs first, then the difference is waited
// out, so a fast local network looks like "10 us, 1 Gbit/s" and a slow one stays what it is.
// A non-blocking call completes no earlier than its post time plus the modelled time, so
// overlap with computation is emulated as well.
#pragma once

#include <memory>

#include "alpha_beta.hpp"
#include "forwarding_comm.hpp"

namespace kformer::comm {

class EmulatedComm final : public ForwardingCommunicator {
 public:
  // Throws (check_network_model) on a negative or non-finite setting.
  EmulatedComm(std::unique_ptr<Communicator> inner, NetworkModel model);

  std::string backend() const override { return "emulated(" + inner_->backend() + ")"; }
  std::unique_ptr<Communicator> split(int color, int key) override;
  void barrier() override;
  void run(const Op& op) override;
  Request start(const Op& op) override;
  Request start_group(const std::vector<Op>& ops) override;

  const NetworkModel& model() const { return model_; }

 private:
  NetworkModel model_;
};

}  // namespace kformer::comm

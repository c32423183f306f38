// ForwardingCommunicator, the base of the comm decorators (emulated, strict, traced, watched): it
// owns the communicator it wraps and passes every virtual call on to it unchanged, so that each
// decorator overrides only the calls it changes. split is the exception: a sub-communicator must
// carry the same decorators (communicator.hpp), so each decorator wraps the one its inner split
// returns, and the base leaves split to it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "communicator.hpp"

namespace kformer::comm {

class ForwardingCommunicator : public Communicator {
 public:
  int rank() const override;
  int size() const override;
  std::string backend() const override;
  std::unique_ptr<Communicator> split(int color, int key) override = 0;
  void barrier() override;
  std::vector<int> world_ranks() const override;
  void abort_calls() noexcept override;
  void set_name(const std::string& name) override;
  void fence_compute(bool blocking) override;
  void run(const Op& op) override;
  Request start(const Op& op) override;
  Request start_group(const std::vector<Op>& ops) override;

 protected:
  // Takes `inner` as it is: a decorator that needs one checks for null itself.
  explicit ForwardingCommunicator(std::unique_ptr<Communicator> inner);

  std::unique_ptr<Communicator> inner_;
};

}  // namespace kformer::comm

// A communicator that moves nothing and only records: the stand-in for a group while a step's
// work is described (kernels/call_record.hpp, miniapp/train/step_work.hpp). It has the size and
// rank of the group it stands for, so the code that calls it takes the same branches as in a run;
// every call is handed to the recorder with the group's name and completes at once.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "communicator.hpp"

namespace kformer::comm {

// (the call, the group's name, its size)
using OpRecorder = std::function<void(const Op& op, const std::string& group, int size)>;

class DescribedComm final : public Communicator {
 public:
  DescribedComm(int size, int rank, std::string name, OpRecorder record);
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "described"; }
  // A described group is built from the layout, never split (it knows no other ranks): throws.
  std::unique_ptr<Communicator> split(int color, int key) override;
  void barrier() override {}
  void set_name(const std::string& name) override { name_ = name; }
  void fence_compute(bool) override {}  // nothing was launched
  void run(const Op& op) override { record_(op, name_, size_); }
  Request start(const Op& op) override;
  Request start_group(const std::vector<Op>& ops) override;

 private:
  int size_, rank_;
  std::string name_;
  OpRecorder record_;
};

}  // namespace kformer::comm

// A recording stand-in for a group (see described_comm.hpp).
#include "described_comm.hpp"

#include <stdexcept>
#include <utility>

namespace kformer::comm {

DescribedComm::DescribedComm(int size, int rank, std::string name, OpRecorder record)
    : size_(size), rank_(rank), name_(std::move(name)), record_(std::move(record)) {
  if (size < 1 || rank < 0 || rank >= size) throw std::invalid_argument("DescribedComm: rank outside the group");
}

std::unique_ptr<Communicator> DescribedComm::split(int, int) {
  throw std::logic_error("DescribedComm: a described group cannot be split; describe each group from the layout");
}

Request DescribedComm::start(const Op& op) {
  record_(op, name_, size_);
  return Request();
}

Request DescribedComm::start_group(const std::vector<Op>& ops) {
  for (const Op& op : ops) record_(op, name_, size_);
  return Request();
}

}  // namespace kformer::comm

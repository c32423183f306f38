// One collective of kformer-comm-bench at one size: its buffers (in the default execution
// space's memory), the call through the Communicator, the same call straight to MPI on the
// same buffers, and the built-in check that counts wrong elements.
#pragma once

#include <mpi.h>

#include <Kokkos_Core.hpp>

#include <cstddef>
#include <string>
#include <vector>

#include "comm/communicator.hpp"

namespace kformer::bench {

enum class Collective { allreduce, reduce_scatter, allgather, broadcast, sendrecv };

const std::vector<Collective>& all_collectives();
const char* collective_name(Collective c);
// "allreduce" -> Collective; throws std::invalid_argument listing the valid names.
Collective parse_collective(const std::string& name);
// The Communicator call a collective is made of (sendrecv: a group of one send and one recv),
// for comm::bus_factor and the alpha-beta model.
comm::OpKind op_kind(Collective c);

class CollectiveCase {
 public:
  using Buf = Kokkos::View<float*, Kokkos::LayoutRight, Kokkos::DefaultExecutionSpace::memory_space>;

  // Sized as nccl-tests sizes a call of `bytes`: the larger buffer holds about `bytes`, and
  // reduce_scatter / allgather blocks hold at least one element per rank.
  CollectiveCase(Collective kind, std::size_t bytes, comm::Communicator& comm, MPI_Comm raw);

  std::size_t bytes() const { return count_ * sizeof(float); }  // what the table reports
  std::size_t count() const { return count_; }                  // elements in the larger buffer

  void run_comm();
  void run_mpi();
  // Fills the inputs with exact small integers, runs through the Communicator once, and returns
  // the number of wrong elements on this rank.
  std::size_t check();

 private:
  Collective kind_;
  comm::Communicator& comm_;
  MPI_Comm raw_;
  int rank_, size_, left_, right_;
  std::size_t count_ = 0, block_ = 0;  // block: reduce_scatter's result, allgather's input
  Buf send_, recv_;
};

}  // namespace kformer::bench

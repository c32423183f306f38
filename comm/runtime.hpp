// Process-wide communication set-up: initialises MPI when this build has it (and nobody else
// did), and makes the world communicator for a backend named at run time.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "communicator.hpp"

namespace kformer::comm {

class Runtime {
 public:
  Runtime(int& argc, char**& argv);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // Rank and size of the launched job (1 process without MPI), known before any backend exists.
  int world_rank() const { return world_rank_; }
  int world_size() const { return world_size_; }

  // Hard stop of every process of the job (MPI_Abort); returns only without MPI.
  [[noreturn]] void abort(int code) const;

 private:
  bool owns_mpi_ = false;
  int world_rank_ = 0;
  int world_size_ = 1;
};

// Backends compiled into this build, in the order a user would prefer them.
std::vector<std::string> compiled_backends();

// The world communicator of `backend` ("self", "mpi", "nccl"). Throws with the fix when the
// backend is unknown, not compiled in, or does not fit the launch (self on several ranks).
std::unique_ptr<Communicator> make_world(const std::string& backend, const Runtime& runtime);

}  // namespace kformer::comm

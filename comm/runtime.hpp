// Process-wide communication set-up: initialises MPI when this build has it (and nobody else
// did), and makes the world communicator for a backend named at run time.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "alpha_beta.hpp"
#include "communicator.hpp"

namespace kformer::comm {

class TraceLog;
class Watchdog;

class Runtime {
 public:
  Runtime(int& argc, char**& argv);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // Rank and size of the launched job (1 process without MPI), known before any backend exists.
  int world_rank() const { return world_rank_; }
  int world_size() const { return world_size_; }
  // Ranks of the job on this rank's node (MPI_COMM_TYPE_SHARED; 1 without MPI), and this rank's
  // place among them (0 .. ranks_on_node-1, in world-rank order): what picks its GPU.
  int ranks_on_node() const { return ranks_on_node_; }
  int node_rank() const { return node_rank_; }

  // Every rank's `mine`, in world-rank order, on every rank (MPI_Allgatherv; {mine} without MPI).
  // For start-up verdicts taken before Kokkos and the communicator exist.
  std::vector<std::string> allgather_text(const std::string& mine) const;

  // Hard stop of every process of the job (MPI_Abort); returns only without MPI.
  [[noreturn]] void abort(int code) const;

 private:
  bool owns_mpi_ = false;
  int world_rank_ = 0;
  int world_size_ = 1;
  int ranks_on_node_ = 1;
  int node_rank_ = 0;
};

// Whether a launcher (mpirun/mpiexec of Open MPI, MPICH, Intel MPI, MVAPICH or PALS; srun; aprun)
// started this process, as the environment it sets says. False for a plain `kformer ...`, which
// is one rank, and always false without MPI: such a start may do its one-rank work (the command
// line, the deck's checks) before Runtime exists, so that bad input never waits for MPI_Init.
bool started_by_launcher();

// Backends compiled into this build, in the order a user would prefer them.
std::vector<std::string> compiled_backends();

// What goes around the backend. The deck's comm.emulate.* keys map onto `emulate`, comm.timeout_s
// onto `timeout_s`.
struct WorldOptions {
  NetworkModel emulate;             // off while latency and bandwidth are both 0
  std::shared_ptr<TraceLog> trace;  // when set, every call of the world and its splits lands here
  double timeout_s = 0;             // > 0: a call not completed after this long ends the job (watchdog.hpp)
  bool strict = false;              // comm.strict: NCCL's contract on any backend (strict_comm.hpp)
};

// The world communicator of `backend` ("self", "mpi", "nccl", or "auto": backend_choice.hpp),
// wrapped as `options` say:
// comm.strict's check outermost, so it sees every call as made (its backend sends in rendezvous
// mode); then tracing, so traced times include the emulated network; the watchdog innermost, so
// it times the real network and not the emulated wait. Throws with the fix when the
// backend is unknown, not compiled in, or does not fit the launch (self on several ranks).
std::unique_ptr<Communicator> make_world(const std::string& backend, const Runtime& runtime,
                                         const WorldOptions& options = {});

// The decorators of `options` around any communicator (make_world uses it; tests and the
// benchmark wrap communicators of their own).
std::unique_ptr<Communicator> decorate(std::unique_ptr<Communicator> comm, const WorldOptions& options);

// What the watchdog of make_world does with an overdue call: prints its line on stderr, aborts
// the NCCL communicators, and ends the job with exit code 4 (MPI_Abort; std::_Exit when MPI is
// absent, or has not ended the process 10 s later).
[[noreturn]] void end_job_on_timeout(Watchdog& dog, const std::string& line);

}  // namespace kformer::comm

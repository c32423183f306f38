// Process-wide communication set-up and the backend factory.
#include "runtime.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <thread>

#include "backend_choice.hpp"
#include "emulated_comm.hpp"
#include "kformer_config.hpp"
#include "self_comm.hpp"
#include "strict_comm.hpp"
#include "traced_comm.hpp"
#include "watched_comm.hpp"
#if KFORMER_ENABLE_MPI
#include <mpi.h>

#include "mpi_comm.hpp"
#endif
#if KFORMER_ENABLE_NCCL
#include "nccl_comm.hpp"
#endif

namespace kformer::comm {

bool started_by_launcher() {
#if KFORMER_ENABLE_MPI
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE", "PMI_FD", "PALS_RANKID",
                           "MV2_COMM_WORLD_RANK", "SLURM_PROCID", "ALPS_APP_PE"})
    if (std::getenv(name)) return true;
#endif
  return false;
}

Runtime::Runtime(int& argc, char**& argv) {
#if KFORMER_ENABLE_MPI
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
#if defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION < 5
    // A plain start is a singleton that never spawns: Open MPI 4 would fork an orted daemon for
    // it (a third of a second per run). A setting of the user's own wins.
    if (!started_by_launcher()) setenv("OMPI_MCA_ess_singleton_isolated", "1", 0);
#endif
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    owns_mpi_ = true;
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size_);
  MPI_Comm node = MPI_COMM_NULL;
  if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_rank_, MPI_INFO_NULL, &node) == MPI_SUCCESS &&
      node != MPI_COMM_NULL) {
    MPI_Comm_size(node, &ranks_on_node_);
    MPI_Comm_rank(node, &node_rank_);
    MPI_Comm_free(&node);
  }
#else
  (void)argc;
  (void)argv;
#endif
}

Runtime::~Runtime() {
#if KFORMER_ENABLE_MPI
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (owns_mpi_ && !finalized) MPI_Finalize();
#endif
}

std::vector<std::string> Runtime::allgather_text(const std::string& mine) const {
#if KFORMER_ENABLE_MPI
  if (world_size_ > 1) {
    const int n = int(mine.size());
    const auto n_ranks = static_cast<std::size_t>(world_size_);
    std::vector<int> sizes(n_ranks), offsets(n_ranks);
    MPI_Allgather(&n, 1, MPI_INT, sizes.data(), 1, MPI_INT, MPI_COMM_WORLD);
    int total = 0;
    for (int r = 0; r < world_size_; ++r) {
      offsets[std::size_t(r)] = total;
      total += sizes[std::size_t(r)];
    }
    std::string all(std::size_t(total), '\0');
    MPI_Allgatherv(mine.data(), n, MPI_CHAR, &all[0], sizes.data(), offsets.data(), MPI_CHAR, MPI_COMM_WORLD);
    std::vector<std::string> out;
    for (int r = 0; r < world_size_; ++r)
      out.push_back(all.substr(std::size_t(offsets[std::size_t(r)]), std::size_t(sizes[std::size_t(r)])));
    return out;
  }
#endif
  return {mine};
}

void Runtime::abort(int code) const {
#if KFORMER_ENABLE_MPI
  if (world_size_ > 1) MPI_Abort(MPI_COMM_WORLD, code);
#endif
  std::exit(code);
}

std::vector<std::string> compiled_backends() {
  std::vector<std::string> out;
  if (KFORMER_ENABLE_NCCL) out.push_back("nccl");
  if (KFORMER_ENABLE_MPI) out.push_back("mpi");
  out.push_back("self");
  return out;
}

void end_job_on_timeout(Watchdog& dog, const std::string& line) {
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
  // MPI_THREAD_FUNNELED does not promise that MPI_Abort works from this thread (Open MPI's
  // does), and ncclCommAbort may block: if neither ends the process, this does.
  std::thread([] {
    std::this_thread::sleep_for(std::chrono::seconds(10));
    std::_Exit(kTimeoutExitCode);
  }).detach();
  dog.abort_communicators();
#if KFORMER_ENABLE_MPI
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, kTimeoutExitCode);
#endif
  std::_Exit(kTimeoutExitCode);
}

std::unique_ptr<Communicator> decorate(std::unique_ptr<Communicator> comm, const WorldOptions& options) {
  check_network_model(options.emulate);
  if (!(options.timeout_s >= 0))
    throw std::runtime_error("comm.timeout_s=" + std::to_string(options.timeout_s) +
                             " is not valid: expected a number of seconds >= 0 (0: no watchdog)");
  if (options.timeout_s > 0) {
    Watchdog::Handler handler = end_job_on_timeout;
    if (options.strict)  // the likelier cause under comm.strict is the one it exists to show
      handler = [](Watchdog& dog, const std::string& line) {
        end_job_on_timeout(dog, line + " (comm.strict: sends wait for their receive, as NCCL's may; a send posted "
                                       "before the receive it waits for, outside one group, deadlocks: post both "
                                       "in one Communicator::group)");
      };
    comm = watch(std::move(comm), options.timeout_s, handler);
  }
  if (options.emulate.enabled()) comm = std::make_unique<EmulatedComm>(std::move(comm), options.emulate);
  if (options.trace) comm = std::make_unique<TracedComm>(std::move(comm), options.trace);
  if (options.strict) comm = std::make_unique<StrictComm>(std::move(comm));
  return comm;
}

namespace {

// `rendezvous`: sends complete only once their receive is posted (comm.strict; NCCL's may not
// complete earlier, so its own sends need no such mode).
std::unique_ptr<Communicator> make_backend(const std::string& backend, const Runtime& runtime, bool rendezvous) {
  if (backend == "self") {
    if (runtime.world_size() != 1)
      throw std::runtime_error("comm.backend=self runs one rank but the job has " +
                               std::to_string(runtime.world_size()) +
                               ": use comm.backend=mpi, or launch one process");
    return std::make_unique<SelfComm>(rendezvous);
  }
  if (backend == "mpi") {
#if KFORMER_ENABLE_MPI
    return std::make_unique<MpiComm>(MPI_COMM_WORLD, false, Kokkos::DefaultExecutionSpace(), rendezvous);
#else
    throw std::runtime_error("comm.backend=mpi is not compiled into this build: reconfigure with "
                             "-DKFORMER_ENABLE_MPI=ON, or use comm.backend=self");
#endif
  }
  if (backend == "nccl") {
#if KFORMER_ENABLE_NCCL
    return std::make_unique<NcclComm>(MPI_COMM_WORLD, false);
#else
    throw std::runtime_error("comm.backend=nccl is not compiled into this build: build the 'cuda' preset "
                             "(KFORMER_ENABLE_NCCL=ON), or use comm.backend=mpi");
#endif
  }
  throw std::runtime_error("comm.backend=" + backend + " is not a backend: valid are auto, self, mpi, nccl");
}

}  // namespace

std::unique_ptr<Communicator> make_world(const std::string& backend, const Runtime& runtime,
                                         const WorldOptions& options) {
  check_network_model(options.emulate);  // before any collective set-up, identically on every rank
  return decorate(make_backend(resolve_backend(backend, runtime.world_size()).backend, runtime, options.strict),
                  options);
}

}  // namespace kformer::comm

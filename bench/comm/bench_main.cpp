// kformer-comm-bench: for each collective and each size, the time of the call through the
// Communicator and of the raw MPI call on the same buffers, as algbw and busbw with nccl-tests'
// factors, a #wrong count from a built-in check, and a Hockney alpha-beta fit per collective.
//
//   mpirun -n 4 kformer-comm-bench -b 8 -e 256M -f 2 -n 20 -w 5 --json comm.json
//
// Timing: after the warm-up, rounds alternate a block of Communicator calls with a block of
// raw MPI calls (in alternating order), so that both sides see the same machine noise; each side reports the median
// block. A block runs -n iterations, fewer when they would take longer than --block-ms (at
// least 1): large messages then alternate call by call, and more rounds (-r) buy a steadier
// median on a noisy machine. Times are averaged over ranks, as nccl-tests does.
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <Kokkos_Core.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "collective_case.hpp"
#include "comm/alpha_beta.hpp"
#include "comm/mpi_comm.hpp"
#include "comm/runtime.hpp"

namespace kb = kformer::bench;
namespace kc = kformer::comm;

namespace {

struct Options {
  std::string min_bytes = "8", max_bytes = "256M";
  int factor = 2, iters = 20, warmup = 5, rounds = 3;
  double block_ms = 100.0;
  std::string collectives = "allreduce,reduce_scatter,allgather,broadcast,sendrecv";
  std::string backend = "mpi";
  double latency_us = 0.0, bandwidth_gbps = 0.0;
  bool baseline = true;
  std::string json;
};

// "8", "64K", "64M", "1G" (powers of 1024, as nccl-tests reads them).
std::size_t parse_bytes(const std::string& s) {
  std::size_t pos = 0;
  const double v = std::stod(s, &pos);
  double mult = 1;
  if (pos < s.size()) {
    switch (s[pos]) {
      case 'K': case 'k': mult = 1024.0; break;
      case 'M': case 'm': mult = 1024.0 * 1024; break;
      case 'G': case 'g': mult = 1024.0 * 1024 * 1024; break;
      default: throw std::invalid_argument("size '" + s + "': use a number with an optional K, M or G suffix");
    }
  }
  return static_cast<std::size_t>(v * mult);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n == 0 ? 0.0 : (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]));
}

// Mean over ranks of the per-call time of `iters` calls, in microseconds.
template <class F>
double time_block(MPI_Comm raw, int iters, F&& call) {
  MPI_Barrier(raw);
  const double t0 = MPI_Wtime();
  for (int i = 0; i < iters; ++i) call();
  double us = (MPI_Wtime() - t0) * 1e6 / iters, sum = 0;
  MPI_Allreduce(&us, &sum, 1, MPI_DOUBLE, MPI_SUM, raw);
  int n = 1;
  MPI_Comm_size(raw, &n);
  return sum / n;
}

struct Row {
  std::string collective;
  std::size_t bytes = 0, count = 0;
  double time_us = 0, algbw = 0, busbw = 0, mpi_time_us = 0, mpi_busbw = 0, vs_mpi = 0;
  long wrong = 0;
};

Row measure(kb::Collective kind, std::size_t bytes, kc::Communicator& world, MPI_Comm raw, const Options& o,
            bool baseline) {
  kb::CollectiveCase cc(kind, bytes, world, raw);
  Row r;
  r.collective = kb::collective_name(kind);
  r.bytes = cc.bytes();
  r.count = cc.count();
  long wrong = static_cast<long>(cc.check());
  MPI_Allreduce(&wrong, &r.wrong, 1, MPI_LONG, MPI_SUM, raw);
  for (int i = 0; i < o.warmup; ++i) cc.run_comm();
  for (int i = 0; baseline && i < o.warmup; ++i) cc.run_mpi();
  // One call, slowest rank, decides how many fit in a block.
  double one = time_block(raw, 1, [&] { cc.run_comm(); }), slowest = 0;
  MPI_Allreduce(&one, &slowest, 1, MPI_DOUBLE, MPI_MAX, raw);
  const int iters = std::max(1, std::min(o.iters, static_cast<int>(o.block_ms * 1e3 / std::max(slowest, 1e-3))));
  std::vector<double> tc, tm;
  for (int round = 0; round < o.rounds; ++round) {
    // Who goes first alternates, so that neither side always inherits the other's wake-up.
    const bool mpi_first = baseline && round % 2;
    if (mpi_first) tm.push_back(time_block(raw, iters, [&] { cc.run_mpi(); }));
    tc.push_back(time_block(raw, iters, [&] { cc.run_comm(); }));
    if (baseline && !mpi_first) tm.push_back(time_block(raw, iters, [&] { cc.run_mpi(); }));
  }
  const double factor = kc::bus_factor(kb::op_kind(kind), world.size());
  r.time_us = median(tc);
  r.algbw = r.bytes / r.time_us / 1e3;  // bytes per us / 1e3 = GB/s
  r.busbw = r.algbw * factor;
  if (baseline) {
    r.mpi_time_us = median(tm);
    r.mpi_busbw = r.bytes / r.mpi_time_us / 1e3 * factor;
    r.vs_mpi = r.mpi_time_us / r.time_us;  // = busbw / mpi_busbw, also where the factor is 0
  }
  return r;
}

void print_header(const std::string& name) {
  std::printf("#\n# %s\n", name.c_str());
  std::printf("# %12s %12s %10s %8s %8s %7s %10s %9s %7s\n", "size", "count", "time", "algbw", "busbw", "#wrong",
              "mpi_time", "mpi_busbw", "vs_mpi");
  std::printf("# %12s %12s %10s %8s %8s %7s %10s %9s %7s\n", "(B)", "(elements)", "(us)", "(GB/s)", "(GB/s)", "",
              "(us)", "(GB/s)", "");
}

void print_row(const Row& r, bool baseline) {
  std::printf("  %12zu %12zu %10.2f %8.3f %8.3f %7ld", r.bytes, r.count, r.time_us, r.algbw, r.busbw, r.wrong);
  if (baseline)
    std::printf(" %10.2f %9.3f %7.3f\n", r.mpi_time_us, r.mpi_busbw, r.vs_mpi);
  else
    std::printf(" %10s %9s %7s\n", "-", "-", "-");
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  kc::Runtime runtime(argc, argv);
  const bool root = runtime.world_rank() == 0;
  Options o;
  CLI::App cli{"kformer-comm-bench: nccl-tests-style sweep of the Communicator against raw MPI"};
  cli.allow_extras();  // Kokkos' own flags pass through
  cli.add_option("-b,--minbytes", o.min_bytes, "smallest size (8, 64K, 1M, ...)");
  cli.add_option("-e,--maxbytes", o.max_bytes, "largest size");
  cli.add_option("-f,--stepfactor", o.factor, "size multiplier between steps")->check(CLI::Range(2, 1 << 20));
  cli.add_option("-n,--iters", o.iters, "iterations per timed block")->check(CLI::Range(1, 1 << 30));
  cli.add_option("-w,--warmup_iters", o.warmup, "warm-up iterations per size")->check(CLI::Range(0, 1 << 30));
  cli.add_option("-r,--rounds", o.rounds, "alternating Communicator/MPI blocks; the median is reported")
      ->check(CLI::Range(1, 1000));
  cli.add_option("--block-ms", o.block_ms, "cap on one timed block (fewer iterations, at least 1)");
  cli.add_option("--collectives", o.collectives, "comma-separated subset");
  cli.add_option("--backend", o.backend, "self, mpi or nccl");
  cli.add_option("--latency-us", o.latency_us, "network emulation: comm.emulate.latency_us");
  cli.add_option("--bandwidth-gbps", o.bandwidth_gbps, "network emulation: comm.emulate.bandwidth_gbps (Gbit/s)");
  cli.add_flag("!--no-mpi", o.baseline, "skip the raw MPI baseline");
  cli.add_option("--json", o.json, "write one record per (collective, bytes) here");
  try {
    cli.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return root ? cli.exit(e) : (e.get_exit_code() == 0 ? 0 : 1);
  }

  int rc = 0;
  try {
    Kokkos::ScopeGuard kokkos(argc, argv);
    kc::WorldOptions wo;
    wo.emulate = {o.latency_us, o.bandwidth_gbps};
    auto world = kc::make_world(o.backend, runtime, wo);
    const MPI_Comm raw = MPI_COMM_WORLD;
    using Mem = Kokkos::DefaultExecutionSpace::memory_space;
    const bool host_buffers = Kokkos::SpaceAccessibility<Kokkos::HostSpace, Mem>::accessible;
    const bool baseline = o.baseline && (host_buffers || kc::MpiComm::cuda_aware());
    std::vector<kb::Collective> kinds;
    std::stringstream list(o.collectives);
    for (std::string name; std::getline(list, name, ',');) kinds.push_back(kb::parse_collective(name));
    const std::size_t lo = parse_bytes(o.min_bytes), hi = parse_bytes(o.max_bytes);

    if (root) {
      std::printf("# kformer-comm-bench: backend %s, %d ranks, float32 sum, %s memory\n", world->backend().c_str(),
                  world->size(), Mem::name());
      std::printf("# sizes %zu..%zu B x%d, iters %d (block cap %.0f ms), warmup %d, rounds %d (median)%s\n", lo, hi,
                  o.factor, o.iters, o.block_ms, o.warmup, o.rounds,
                  baseline ? "" : "; raw MPI baseline off (device buffers, MPI not CUDA-aware, or --no-mpi)");
    }
    nlohmann::json records = nlohmann::json::array(), fits = nlohmann::json::object();
    std::vector<double> ratios_1m;
    long total_wrong = 0;
    for (kb::Collective kind : kinds) {
      if (root) print_header(kb::collective_name(kind));
      std::vector<double> bus_bytes, times;
      std::size_t last = 0;
      for (std::size_t bytes = lo; bytes <= hi; bytes *= static_cast<std::size_t>(o.factor)) {
        const Row r = measure(kind, bytes, *world, raw, o, baseline);
        if (r.bytes == last) continue;  // rounded up to one element per rank: already reported
        last = r.bytes;
        if (root) print_row(r, baseline);
        bus_bytes.push_back(r.bytes * kc::bus_factor(kb::op_kind(kind), world->size()));
        times.push_back(r.time_us);
        if (baseline && r.bytes >= (1u << 20)) ratios_1m.push_back(r.vs_mpi);
        nlohmann::json j = {{"collective", r.collective}, {"bytes", r.bytes}, {"time_us", r.time_us},
                            {"algbw", r.algbw}, {"busbw", r.busbw}, {"wrong", r.wrong}};
        j["mpi_busbw"] = baseline ? nlohmann::json(r.mpi_busbw) : nlohmann::json();
        j["vs_mpi"] = baseline ? nlohmann::json(r.vs_mpi) : nlohmann::json();
        records.push_back(j);
        total_wrong += r.wrong;
      }
      if (world->size() > 1 && bus_bytes.size() >= 2) {
        const kc::HockneyFit f = kc::fit_hockney(bus_bytes, times);
        fits[kb::collective_name(kind)] = {{"alpha_us", f.alpha_us}, {"beta_gbytes_per_s", f.beta_gbytes_per_s}};
        if (root)
          std::printf("# Hockney fit over bus bytes: alpha %.2f us, beta %.3f GB/s\n", f.alpha_us, f.beta_gbytes_per_s);
      }
    }
    if (root) {
      if (!ratios_1m.empty())
        std::printf("#\n# vs_mpi for sizes >= 1 MiB: median %.3f, min %.3f over %zu sizes\n", median(ratios_1m),
                    *std::min_element(ratios_1m.begin(), ratios_1m.end()), ratios_1m.size());
      std::printf("# Wrong elements: %ld %s\n", total_wrong, total_wrong ? "FAILED" : "OK");
      if (!o.json.empty()) {
        std::ofstream out(o.json);
        if (!out) throw std::runtime_error("--json " + o.json + ": cannot write there; give a writable path");
        out << nlohmann::json{{"backend", world->backend()},
                              {"ranks", world->size()},
                              {"dtype", "float32"},
                              {"records", records},
                              {"hockney", fits}}
                   .dump(2)
            << '\n';
      }
    }
    rc = total_wrong ? 1 : 0;
  } catch (const std::exception& e) {
    std::cerr << "kformer-comm-bench: error on rank " << runtime.world_rank() << ": " << e.what() << std::endl;
    runtime.abort(1);
  }
  return rc;
}

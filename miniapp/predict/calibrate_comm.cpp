// Communicator calibration (see calibrate_comm.hpp).
#include "calibrate_comm.hpp"

#include <Kokkos_Timer.hpp>

#include <algorithm>

#include "comm/alpha_beta.hpp"
#include "device.hpp"

namespace kformer::predict {
namespace {

// Median time of one call over the group (a barrier before each, so that all start together).
template <class F>
double median_us(comm::Communicator& g, F&& f, int reps) {
  std::vector<double> t;
  f();
  for (int i = 0; i < reps; ++i) {
    g.barrier();
    Kokkos::Timer timer;
    f();
    t.push_back(timer.seconds() * 1e6);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

LinkCost fit(comm::OpKind kind, int n, const std::vector<double>& bytes, const std::vector<double>& us) {
  std::vector<double> bus;
  for (double b : bytes) bus.push_back(comm::bus_factor(kind, n) * b);
  const comm::HockneyFit f = comm::fit_hockney(bus, us);
  LinkCost c;
  c.latency_us = std::max(0.0, f.alpha_us);
  c.bandwidth_gbps = std::isinf(f.beta_gbytes_per_s) ? 0.0 : f.beta_gbytes_per_s * 8;
  c.ranks = n;
  return c;
}

}  // namespace

void calibrate_comm(comm::Communicator& world, MachineProfile& p) {
  const int size = world.size();
  if (size < 2) return;
  const std::size_t max_count = std::size_t(1) << 20;  // floats: 4 MiB
  DV<float*> a("calibrate_send", max_count * std::size_t(size)), b("calibrate_recv", max_count * std::size_t(size));
  Kokkos::deep_copy(a, 1.0f);
  std::map<std::string, std::vector<LinkCost>> fits;
  for (int n = 2; n <= size; n *= 2) {
    if (size % n) continue;
    auto g = world.split(world.rank() / n, world.rank());
    for (comm::OpKind kind : {comm::OpKind::allreduce, comm::OpKind::allgather, comm::OpKind::reduce_scatter}) {
      std::vector<double> bytes, us;
      for (std::size_t count = 2; count <= max_count; count *= 8) {
        // nccl-tests' size: the buffer (allreduce), the output (allgather), the input (reduce_scatter).
        const std::size_t per = std::max<std::size_t>(1, count / std::size_t(n));
        double t = 0;
        if (kind == comm::OpKind::allreduce)
          t = median_us(*g, [&] { g->allreduce(a.data(), b.data(), count, comm::DType::f32, comm::ReduceOp::sum); }, 9);
        else if (kind == comm::OpKind::allgather)
          t = median_us(*g, [&] { g->allgather(a.data(), b.data(), per, comm::DType::f32); }, 9);
        else
          t = median_us(*g, [&] { g->reduce_scatter(a.data(), b.data(), per, comm::DType::f32, comm::ReduceOp::sum); }, 9);
        bytes.push_back(4.0 * (kind == comm::OpKind::allreduce ? count : per * n));
        us.push_back(t);
      }
      fits[kind == comm::OpKind::allreduce ? "allreduce" : kind == comm::OpKind::allgather ? "allgather" : "reduce_scatter"]
          .push_back(fit(kind, n, bytes, us));
    }
    if (n == 2) {  // one message each way between the pair, as the pipeline's groups send them
      std::vector<double> bytes, us;
      const int peer = g->rank() ^ 1;
      for (std::size_t count = 2; count <= max_count; count *= 8) {
        const double t = median_us(*g, [&] {
          g->group({comm::Op::send_to(a.data(), count, comm::DType::f32, peer), comm::Op::recv_from(b.data(), count, comm::DType::f32, peer)});
        }, 9);
        bytes.push_back(4.0 * count);
        us.push_back(t);
      }
      fits["send"].push_back(fit(comm::OpKind::send, 2, bytes, us));
    }
  }
  p.intra_node.collectives = fits;
  p.intra_node.fallback = fits["allreduce"].front();
  p.inter_node = p.intra_node;  // one node measured: no inter-node figures
  p.devices_per_node = size;
}

}  // namespace kformer::predict

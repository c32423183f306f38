// Communicator calibration (see calibrate_comm.hpp).
#include "predict/calibrate_comm.hpp"

#include <Kokkos_Timer.hpp>

#include <algorithm>

#include "comm/alpha_beta.hpp"
#include "platform/device.hpp"
#include "platform/device_reduce.hpp"

namespace kformer::predict {
namespace {

// The largest of a figure over the ranks, on every rank: through a device
// buffer, as NCCL wants it (DeviceReduce).
double share(comm::Communicator& g, double mine, comm::ReduceOp op) {
  DeviceReduce reduce;
  return reduce.allreduce(g, mine, op);
}

// The mean time of one call over calls repeated back to back for at least 20 ms (after one
// warm-up call and a barrier): on a node whose cores other processes share, a message's hand-off
// waits for the peer's next turn on a core, and a mean counts those waits as a run meets them.
template <class F>
double mean_us(comm::Communicator& g, F&& f) {
  f();
  g.barrier();
  Kokkos::Timer probe;
  for (int i = 0; i < 3; ++i) f();
  // Every member must make the same number of calls: the slowest member's probe decides.
  const double each = share(g, probe.seconds() / 3, comm::ReduceOp::max);
  const int calls = int(std::min(2000.0, std::max(5.0, 20e-3 / each)));
  g.barrier();
  Kokkos::Timer timer;
  for (int i = 0; i < calls; ++i) f();
  return timer.seconds() * 1e6 / calls;
}

// The hand-off of a message to a rank that has been waiting for it while its peer computed, as
// a pipeline's receive meets it: after a barrier rank 0 computes for 2 ms and sends; rank 1,
// blocked in its receive since the barrier, takes 2 ms plus the hand-off. On an idle node that is
// the network's latency; on one whose cores other processes share, it adds the wait for the
// receiver's next turn on a core, which a back-to-back ping-pong (both ranks spinning) hides.
double handoff_us(comm::Communicator& g, float* buf) {
  const int me = g.rank();
  const double busy_s = 2e-3;
  const int reps = 40;  // a mean over rare long waits: enough of them to see those
  double sum = 0;
  for (int i = 0; i < reps; ++i) {
    g.barrier();
    if (me == 0) {
      Kokkos::Timer busy;
      volatile double x = 0;
      while (busy.seconds() < busy_s) x = x + 1.0;  // the sender computes; the receiver waits
      g.send(buf, 1, comm::DType::f32, 1);
    } else if (me == 1) {
      Kokkos::Timer wait;
      g.recv(buf, 1, comm::DType::f32, 0);
      sum += (wait.seconds() - busy_s) * 1e6;
    }
  }
  return std::max(0.0, share(g, me == 1 ? sum / reps : 0.0, comm::ReduceOp::max));
}

// A small all-reduce entered together by members that each computed alike first, as tensor
// parallelism alternates its kernels and all-reduces: compute 1 ms, all-reduce, again, with no
// barrier between; the time beyond the compute, per call, less the back-to-back latency.
double sync_us(comm::Communicator& g, float* a, float* b, double latency_us) {
  const int reps = 40;
  const double busy_s = 1e-3;
  g.barrier();
  Kokkos::Timer total;
  for (int i = 0; i < reps; ++i) {
    Kokkos::Timer busy;
    volatile double x = 0;
    while (busy.seconds() < busy_s) x = x + 1.0;
    g.allreduce(a, b, 1, comm::DType::f32, comm::ReduceOp::sum);
  }
  const double per_call = share(g, (total.seconds() - reps * busy_s) * 1e6 / reps, comm::ReduceOp::max);
  return std::max(0.0, per_call - latency_us);
}

// The non-blocking all-reduce or reduce-scatter as GradSync posts its buckets: kPosted calls on
// separate buffers, in place, then one wait for them all; per call, the batch's mean. On MPI
// without a progress thread they move only inside the wait, one after another, which a blocking
// call's fit does not see.
constexpr int kPosted = 6;
double posted_us(comm::Communicator& g, comm::OpKind kind, float* buf, std::size_t count) {
  const std::size_t n = std::size_t(g.size()), per = std::max<std::size_t>(1, count / n);
  return mean_us(g, [&] {
           std::vector<comm::Request> r;
           for (int i = 0; i < kPosted; ++i) {
             float* b = buf + std::size_t(i) * count;
             if (kind == comm::OpKind::allreduce)
               r.push_back(g.iallreduce(b, b, count, comm::DType::f32, comm::ReduceOp::sum));
             else
               r.push_back(g.ireduce_scatter(b, b + std::size_t(g.rank()) * per, per, comm::DType::f32,
                                             comm::ReduceOp::sum));
           }
           comm::wait_all(r);
         }) /
         kPosted;
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

CommStability calibrate_comm(comm::Communicator& world, MachineProfile& p, const Agreement& wakeups) {
  CommStability out;
  const int size = world.size();
  if (size < 2) return out;
  const std::size_t max_count = std::size_t(1) << 20;  // floats: 4 MiB
  const auto a = device_buffer<float*>("calibrate_send", max_count * std::size_t(size));
  const auto b = device_buffer<float*>("calibrate_recv", max_count * std::size_t(size));
  const auto posted = device_buffer<float*>("calibrate_posted", max_count * kPosted);
  Kokkos::deep_copy(a, 1.0f);
  Kokkos::deep_copy(posted, 1.0f);
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
          t = mean_us(*g, [&] { g->allreduce(a.data(), b.data(), count, comm::DType::f32, comm::ReduceOp::sum); });
        else if (kind == comm::OpKind::allgather)
          t = mean_us(*g, [&] { g->allgather(a.data(), b.data(), per, comm::DType::f32); });
        else
          t = mean_us(*g, [&] { g->reduce_scatter(a.data(), b.data(), per, comm::DType::f32, comm::ReduceOp::sum); });
        bytes.push_back(4.0 * (kind == comm::OpKind::allreduce ? count : per * n));
        us.push_back(t);
      }
      fits[kind == comm::OpKind::allreduce ? "allreduce" : kind == comm::OpKind::allgather ? "allgather" : "reduce_scatter"]
          .push_back(fit(kind, n, bytes, us));
    }
    for (comm::OpKind kind : {comm::OpKind::allreduce, comm::OpKind::reduce_scatter}) {
      std::vector<double> bytes, us;
      for (std::size_t count = 2 * std::size_t(n); count <= max_count; count *= 8) {
        us.push_back(posted_us(*g, kind, posted.data(), count));
        bytes.push_back(4.0 * count);  // the buffer (allreduce), the input (reduce_scatter)
      }
      fits[std::string("i") + comm::op_name(kind)].push_back(fit(kind, n, bytes, us));
    }
    if (n == 2) {  // one message each way between the pair, as the pipeline's groups send them
      std::vector<double> bytes, us;
      const int peer = g->rank() ^ 1;
      for (std::size_t count = 2; count <= max_count; count *= 8) {
        const double t = mean_us(*g, [&] {
          g->group({comm::Op::send_to(a.data(), count, comm::DType::f32, peer), comm::Op::recv_from(b.data(), count, comm::DType::f32, peer)});
        });
        bytes.push_back(4.0 * count);
        us.push_back(t);
      }
      const LinkCost c = fit(comm::OpKind::send, 2, bytes, us);
      // Each pair's figures are shared within the pair, so both of its ranks repeat alike.
      out.wakeup = repeat_until_stable([&] { return std::max(0.0, handoff_us(*g, a.data()) - c.latency_us); },
                                       wakeups);
      out.sync_wakeup = repeat_until_stable(
          [&] { return sync_us(*g, a.data(), b.data(), fits["allreduce"].back().latency_us); }, wakeups);
      p.wakeup_us = out.wakeup.value;
      p.sync_wakeup_us = out.sync_wakeup.value;
      fits["send"].push_back(c);
    }
  }
  p.intra_node.collectives = fits;
  p.intra_node.fallback = fits["allreduce"].front();
  p.inter_node = p.intra_node;  // one node measured: no inter-node figures
  p.devices_per_node = size;
  // Every rank learns whether every pair agreed: the verdict on the profile is the same everywhere.
  for (StableFigure* f : {&out.wakeup, &out.sync_wakeup}) {
    const bool disagreed = f->repeats > 0 && !f->agreed;
    f->agreed = share(world, disagreed ? 1.0 : 0.0, comm::ReduceOp::max) == 0;  // no pair disagreed
  }
  return out;
}

}  // namespace kformer::predict

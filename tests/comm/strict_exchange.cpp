// Two ranks swap an 8 MiB message, for strict_exchange_test.sh: `ungrouped` posts the send, then
// the receive (the pattern NCCL deadlocks on once a message outgrows its buffers), `grouped` posts
// both in one group. `strict` or `loose` sets comm.strict; the watchdog's timeout is 3 s.
//   strict_exchange ungrouped|grouped strict|loose
#include <Kokkos_Core.hpp>

#include <cstdio>
#include <cstring>
#include <exception>

#include "device_view.hpp"
#include "runtime.hpp"
#include "views.hpp"

int main(int argc, char** argv) {
  using namespace kformer::comm;
  Runtime runtime(argc, argv);
  if (argc != 3 || runtime.world_size() != 2) {
    std::fprintf(stderr, "usage: mpiexec -n 2 strict_exchange ungrouped|grouped strict|loose\n");
    return 2;
  }
  const bool grouped = std::strcmp(argv[1], "grouped") == 0;
  int rc = 0;
  {
    Kokkos::ScopeGuard kokkos(argc, argv);
    WorldOptions options;
    options.strict = std::strcmp(argv[2], "strict") == 0;
    options.timeout_s = 3;
    auto world = make_world("mpi", runtime, options);
    world->set_name("world");
    const int me = world->rank(), peer = 1 - me;
    const std::size_t n = std::size_t(1) << 21;  // 8 MiB of floats
    using Buf = Kokkos::View<float*, Kokkos::DefaultExecutionSpace::memory_space>;
    const auto out = device_view<Buf>("out", n), in = device_view<Buf>("in", n);
    Kokkos::deep_copy(out, float(me + 1));
    if (grouped) {
      world->group({send_op(out, peer), recv_op(in, peer)});
    } else {
      Request s = isend(*world, out, peer);
      recv(*world, in, peer);
      s.wait();
    }
    auto got = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), in);
    rc = got(0) == float(peer + 1) && got(n - 1) == float(peer + 1) ? 0 : 1;
    std::printf("rank %d: %s %s exchange %s\n", me, argv[1], argv[2], rc ? "WRONG" : "ok");
    world->barrier();
  }
  return rc;
}

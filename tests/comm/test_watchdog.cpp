// The communication watchdog (comm/watchdog.hpp): the line it reports, when its clock runs (a
// blocking call from its start, a request from its wait), that a healthy run never trips it,
// and, on several ranks, a real MPI collective that a late rank holds up. The handlers here
// record the line instead of ending the job; watchdog_test.sh covers the job being ended.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <Kokkos_Core.hpp>

#include "comm/device_view.hpp"
#include "comm/runtime.hpp"
#include "comm/watched_comm.hpp"
#include "kformer_config.hpp"
#include "test_env.hpp"

using namespace kformer::comm;
using Clock = Watchdog::Clock;

namespace {

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Collects what a watchdog reports.
struct Recorder {
  std::mutex mutex;
  std::vector<std::string> lines;
  Watchdog::Handler handler() {
    return [this](Watchdog&, const std::string& line) {
      std::lock_guard<std::mutex> lock(mutex);
      lines.push_back(line);
    };
  }
  std::vector<std::string> seen() {
    std::lock_guard<std::mutex> lock(mutex);
    return lines;
  }
};

// The seconds a line says the call waited ("... after 0.3 s ...").
double waited_s(const std::string& line) {
  const auto at = line.find(" after ");
  return at == std::string::npos ? -1.0 : std::atof(line.c_str() + at + 7);
}

// A backend whose calls block until released: a peer that never comes, until the test says.
class StuckComm final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 2; }
  std::string backend() const override { return "stuck"; }
  std::vector<int> world_ranks() const override { return {5, 7}; }
  std::unique_ptr<Communicator> split(int, int) override { return std::make_unique<StuckComm>(); }
  void barrier() override { block(); }
  void run(const Op&) override { block(); }
  Request start(const Op&) override { return Request(std::make_unique<Pending>(*this)); }
  Request start_group(const std::vector<Op>&) override { return Request(std::make_unique<Pending>(*this)); }
  void abort_calls() noexcept override { ++aborts; }

  void release() {
    std::lock_guard<std::mutex> lock(mutex_);
    released_ = true;
    cv_.notify_all();
  }
  int aborts = 0;

 private:
  struct Pending final : Request::Impl {
    explicit Pending(StuckComm& c) : comm(c) {}
    bool test() override { return false; }
    void wait() override { comm.block(); }
    StuckComm& comm;
  };
  void block() {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [this] { return released_; });
    released_ = false;
  }
  std::mutex mutex_;
  std::condition_variable cv_;
  bool released_ = false;
};

}  // namespace

TEST(Watchdog, GroupsAreNamedByTheirWorldRanks) {
  EXPECT_EQ(describe_group({0, 1}, 2)->text, "group [0,1] (2 ranks)");
  EXPECT_EQ(describe_group({3}, 1)->text, "group [3] (1 rank)");
  std::vector<int> all, strided, odd;
  for (int i = 0; i < 64; ++i) all.push_back(i);
  for (int i = 0; i < 16; ++i) strided.push_back(8 * i + 1);
  odd = {0, 3, 4, 9, 10, 11, 12, 13, 20};
  EXPECT_EQ(describe_group(all, 64)->text, "group [0..63] (64 ranks)");
  EXPECT_EQ(describe_group(strided, 16)->text, "group [1,9,..,121] (16 ranks)");
  EXPECT_EQ(describe_group(odd, 9)->text, "group [0,3,4,9,..,13,20] (9 ranks)");
  EXPECT_EQ(describe_group({}, 3)->text, "a group of 3 ranks");  // the backend could not say
}

TEST(Watchdog, LineNamesRankOperationBytesAndGroup) {
  Recorder rec;
  Watchdog dog(5.0, 2, rec.handler());
  const auto group = describe_group({0, 1}, 2);
  Op op{OpKind::allreduce, nullptr, nullptr, 1 << 20, DType::f32, ReduceOp::sum, 0};
  const auto now = Clock::now();
  const auto fresh = dog.begin(activity_of(op, 2, group), now - std::chrono::seconds(1));
  EXPECT_EQ(dog.overdue(now), "");
  const auto old = dog.begin(activity_of(op, 2, group), now - std::chrono::seconds(6));
  EXPECT_EQ(dog.overdue(now),
            "kformer: rank 2: allreduce of 4.0 MiB (float32) on group [0,1] (2 ranks) has not completed after "
            "6.0 s (comm.timeout_s=5): a peer rank is hung or dead (raise comm.timeout_s if it is only slow); "
            "aborting");
  // Time this process was suspended does not count: 6 s in flight, 3 of them stopped.
  dog.postpone(std::chrono::seconds(3));
  EXPECT_EQ(dog.overdue(now), "");
  dog.end(old);
  EXPECT_EQ(dog.overdue(now), "");
  dog.end(fresh);

  // Peers are named by their world rank; a broadcast by its root; a group by its first
  // destination and source.
  const auto pp = describe_group({1, 3}, 2);
  const auto at = [&](const Activity& a) {
    const auto id = dog.begin(a, now - std::chrono::seconds(10));
    const std::string line = dog.overdue(now);
    dog.end(id);
    return line;
  };
  EXPECT_TRUE(has(at(activity_of(Op::recv_from(nullptr, 4096, DType::f32, 1), 2, pp)),
                  "rank 2: recv of 16.0 KiB (float32) from rank 3 on group [1,3] (2 ranks) (called at "
                  "comm/test_watchdog.cpp:"));  // the call site: where the Op was made
  Op bcast{OpKind::broadcast, nullptr, nullptr, 3, DType::f64, ReduceOp::sum, 0};
  EXPECT_TRUE(has(at(activity_of(bcast, 2, pp)), "broadcast of 24 B (float64) from root rank 1 on group [1,3]"));
  const std::vector<Op> exchange = {Op::send_to(nullptr, 256, DType::f32, 1), Op::recv_from(nullptr, 256, DType::f32, 0),
                                    Op::send_to(nullptr, 256, DType::f32, 0)};
  EXPECT_TRUE(has(at(activity_of(exchange, 2, pp)),
                  "send+recv of 3.0 KiB (float32) to rank 3 from rank 1 and 1 more message(s) on group [1,3]"));
  Op rs{OpKind::reduce_scatter, nullptr, nullptr, 256, DType::i32, ReduceOp::sum, 0};
  EXPECT_TRUE(has(at(activity_of(rs, 4, describe_group({}, 4))), "reduce_scatter of 4.0 KiB (int32) on a group of 4 ranks"));
}

TEST(Watchdog, BlockingCallTripsItAndAbortsTheBackend) {
  Recorder rec;
  auto stuck = std::make_unique<StuckComm>();
  StuckComm* raw = stuck.get();
  auto comm = watch(std::move(stuck), 0.3, [&](Watchdog& dog, const std::string& line) {
    rec.handler()(dog, line);
    dog.abort_communicators();
    raw->release();  // as ncclCommAbort would make the blocked call return
  });
  auto* watched = dynamic_cast<WatchedComm*>(comm.get());
  ASSERT_NE(watched, nullptr);
  EXPECT_EQ(watched->group().text, "group [5,7] (2 ranks)");
  EXPECT_EQ(watched->watchdog().world_rank(), 5);
  float x[4] = {};
  const auto t0 = Clock::now();
  comm->allreduce(x, x, 4, DType::f32, ReduceOp::sum);  // returns once the handler released it
  const double took = std::chrono::duration<double>(Clock::now() - t0).count();
  const auto lines = rec.seen();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_TRUE(has(lines[0], "kformer: rank 5: allreduce of 16 B (float32) on group [5,7] (2 ranks) (called at "
                  "comm/test_watchdog.cpp:"))
      << lines[0];
  EXPECT_GE(took, 0.3);
  EXPECT_EQ(raw->aborts, 1);
}

TEST(Watchdog, RequestCountsFromItsWaitAndTestDoesNotStartTheClock) {
  Recorder rec;
  auto stuck = std::make_unique<StuckComm>();
  StuckComm* raw = stuck.get();
  auto comm = watch(std::move(stuck), 0.3, [&](Watchdog& dog, const std::string& line) {
    rec.handler()(dog, line);
    raw->release();
  });
  float x[4] = {};
  Request r = comm->isend(x, 4, DType::f32, 1);
  EXPECT_FALSE(r.test());
  // Posted long before: computing with a request open is not a hang.
  std::this_thread::sleep_for(std::chrono::milliseconds(3000));
  EXPECT_TRUE(rec.seen().empty());
  r.wait();
  const auto lines = rec.seen();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_TRUE(has(lines[0], "send of 16 B (float32) to rank 7 on group [5,7]")) << lines[0];
  EXPECT_GE(waited_s(lines[0]), 0.29);
  // A clock that ran from the post reads at least 3.3 s; 2.5 leaves a loaded machine 2.2 s to
  // wake the watchdog's thread (it read 1.0 against a 1 s post-to-wait gap before).
  EXPECT_LT(waited_s(lines[0]), 2.5) << "the clock ran from the post, not the wait: " << lines[0];
}

TEST(Watchdog, HealthyRunNeverTripsIt) {
  // The handler of make_world: if it fired, this process would end with exit code 4.
  WorldOptions options;
  options.timeout_s = 30.0;  // a healthy run on ranks that share 2 cores may wait seconds for a peer
  auto world = decorate(kformer::test::world(), options);
  ASSERT_NE(dynamic_cast<WatchedComm*>(world.get()), nullptr);
  const int n = world->size(), me = world->rank();
  auto halves = world->split(me % 2, me);
  std::vector<int> want;
  for (int r = me % 2; r < n; r += 2) want.push_back(r);
  if (KFORMER_ENABLE_MPI) EXPECT_EQ(halves->world_ranks(), want);
  const auto v = device_view<Kokkos::View<double*, Kokkos::DefaultExecutionSpace::memory_space>>("v", 1);  // NCCL's rule
  for (int i = 0; i < 20; ++i) {
    Kokkos::deep_copy(v, 1.0);
    world->allreduce(v.data(), v.data(), 1, DType::f64, ReduceOp::sum);
    double got = 0;
    Kokkos::deep_copy(got, Kokkos::subview(v, 0));
    EXPECT_EQ(got, n);
    Request r = halves->iallreduce(v.data(), v.data(), 1, DType::f64, ReduceOp::max);
    r.wait();
  }
  world->barrier();
}

// Idle between calls is not a hang: no request is open, so a pause of three timeouts trips
// nothing. Read before the next call, so that a peer arriving late to it cannot be what fired.
TEST(Watchdog, IdleBetweenCallsIsNotAHang) {
  Recorder rec;
  auto world = watch(kformer::test::world(), 0.3, rec.handler());
  const auto v = device_view<Kokkos::View<int*, Kokkos::DefaultExecutionSpace::memory_space>>("v", 1);  // NCCL's rule
  Kokkos::deep_copy(v, 1);
  world->allreduce(v.data(), v.data(), 1, DType::i32, ReduceOp::sum);
  const auto before = rec.seen().size();
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  EXPECT_EQ(rec.seen().size(), before) << rec.seen().back();
  world->barrier();
}

#if KFORMER_ENABLE_MPI
TEST(Watchdog, LateRankHoldsUpARealCollective) {
  auto base = kformer::test::world();
  if (base->size() < 2) GTEST_SKIP() << "needs 2 ranks";
  Recorder rec;
  // 4 s late against a 1 s timeout: the peers trip it whatever the load, and the late rank's own
  // call, once it comes, would have to wait 1 s for peers that are already there to trip it.
  auto world = watch(std::move(base), 1.0, rec.handler());
  const int me = world->rank(), n = world->size();
  const int late = n - 1;
  if (me == late) std::this_thread::sleep_for(std::chrono::milliseconds(4000));
  const auto v = device_view<Kokkos::View<int*, Kokkos::DefaultExecutionSpace::memory_space>>("v", 1);  // NCCL's rule
  Kokkos::deep_copy(v, 1);
  world->allreduce(v.data(), v.data(), 1, DType::i32, ReduceOp::sum);
  int got = 0;
  Kokkos::deep_copy(got, Kokkos::subview(v, 0));
  EXPECT_EQ(got, n);
  const auto lines = rec.seen();
  if (me == late) {
    EXPECT_TRUE(lines.empty());
  } else {
    ASSERT_EQ(lines.size(), 1u);
    std::string group = "group [0";
    for (int r = 1; r < n; ++r) group += "," + std::to_string(r);
    group += "] (" + std::to_string(n) + " ranks)";
    EXPECT_TRUE(has(lines[0], "kformer: rank " + std::to_string(me) + ": allreduce of 4 B (int32) on " + group +
                                  " (called at comm/test_watchdog.cpp:"))
        << lines[0];
  }
  world->barrier();
}
#endif

// Collectives give exactly the expected result on every rank, for every element type (bfloat16
// included), out of place and in place, for zero and odd lengths, blocking and non-blocking, and
// inside split groups; bfloat16 sums add in fp32 and round once per combine; wrong arguments are
// refused with a message naming the fix.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>

#include "bf16.hpp"
#include "conformance.hpp"

namespace kformer::test {
namespace {

using comm::ReduceOp;

// Odd lengths so that no algorithm divides them evenly; the last is past MPI's eager limit.
const std::size_t kCounts[] = {1, 7, 1001, 70001};

template <class T>
void check_allreduce(comm::Communicator& c, std::size_t n, ReduceOp op, bool in_place, bool nonblocking) {
  auto send = to_buf(values<T>(c.rank(), n), "send");
  Buf<T> recv = in_place ? send : make_buf<T>("recv", n);
  if (nonblocking)
    comm::iallreduce(c, send, recv, op).wait();
  else
    comm::allreduce(c, send, recv, op);
  const auto got = to_vec(recv);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < n; ++i) wrong += got[i] != reduced<T>(c.size(), i, op);
  EXPECT_EQ(wrong, 0u) << comm::dtype_name(comm::dtype_of<T>::value) << " n=" << n
                       << (op == ReduceOp::sum ? " sum" : " max") << (in_place ? " in place" : "")
                       << (nonblocking ? " non-blocking" : "");
}

template <class T>
void check_reduce_scatter(comm::Communicator& c, std::size_t n, bool in_place, bool nonblocking) {
  const int me = c.rank(), np = c.size();
  auto send = to_buf(values<T>(me, n * np), "send");
  Buf<T> recv = in_place ? Buf<T>(Kokkos::subview(send, std::make_pair(n * me, n * (me + 1)))) : make_buf<T>("recv", n);
  if (nonblocking)
    comm::ireduce_scatter(c, send, recv, ReduceOp::sum).wait();
  else
    comm::reduce_scatter(c, send, recv, ReduceOp::sum);
  const auto got = to_vec(recv);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < n; ++i) wrong += got[i] != reduced<T>(np, n * me + i, ReduceOp::sum);
  EXPECT_EQ(wrong, 0u) << "reduce_scatter n=" << n << (in_place ? " in place" : "");
}

template <class T>
void check_allgather(comm::Communicator& c, std::size_t n, bool in_place, bool nonblocking) {
  const int me = c.rank(), np = c.size();
  Buf<T> recv = make_buf<T>("recv", n * np);
  Buf<T> send = in_place ? Buf<T>(Kokkos::subview(recv, std::make_pair(n * me, n * (me + 1)))) : make_buf<T>("send", n);
  Kokkos::deep_copy(send, to_buf(values<T>(me, n, n * me)));
  if (nonblocking)
    comm::iallgather(c, send, recv).wait();
  else
    comm::allgather(c, send, recv);
  const auto got = to_vec(recv);
  std::size_t wrong = 0;
  for (int r = 0; r < np; ++r)
    for (std::size_t i = 0; i < n; ++i) wrong += got[n * r + i] != value<T>(r, n * r + i);
  EXPECT_EQ(wrong, 0u) << "allgather n=" << n << (in_place ? " in place" : "");
}

template <class T>
void check_broadcast(comm::Communicator& c, std::size_t n, int root, bool nonblocking) {
  auto buf = to_buf(values<T>(c.rank(), n));
  if (nonblocking)
    comm::ibroadcast(c, buf, root).wait();
  else
    comm::broadcast(c, buf, root);
  EXPECT_EQ(to_vec(buf), values<T>(root, n)) << "broadcast n=" << n << " root=" << root;
}

template <class T>
void every_collective(comm::Communicator& c) {
  for (std::size_t n : kCounts)
    for (bool nb : {false, true}) {
      for (bool ip : {false, true}) {
        check_allreduce<T>(c, n, ReduceOp::sum, ip, nb);
        check_allreduce<T>(c, n, ReduceOp::max, ip, nb);
        check_reduce_scatter<T>(c, n, ip, nb);
        check_allgather<T>(c, n, ip, nb);
      }
      for (int root = 0; root < c.size(); ++root) check_broadcast<T>(c, n, root, nb);
    }
}

}  // namespace

TEST_P(CommConformance, CollectivesFloat) { every_collective<float>(*c); }
TEST_P(CommConformance, CollectivesDouble) { every_collective<double>(*c); }
TEST_P(CommConformance, CollectivesInt32) { every_collective<std::int32_t>(*c); }
TEST_P(CommConformance, CollectivesBfloat16) { every_collective<kernels::bf16>(*c); }

TEST_P(CommConformance, Bfloat16MapsToItsDType) {
  EXPECT_EQ(comm::dtype_of<kernels::bf16>::value, comm::DType::bf16);
  EXPECT_EQ(comm::dtype_size(comm::DType::bf16), 2u);
  EXPECT_STREQ(comm::dtype_name(comm::DType::bf16), "bfloat16");
}

namespace {
using kernels::bf16;

// Pairs of bf16 values whose sums need rounding: 1 + k 2^-7 plus j 2^-9 (below, at and above the
// midpoints, ties to both even and odd neighbours), then random values of mixed sign and
// magnitude (the same on every rank: a fixed seed).
void rounding_pairs(std::vector<bf16>& x0, std::vector<bf16>& x1) {
  for (int k = 0; k < 128; ++k)
    for (int j = 0; j < 16; ++j) {
      x0.push_back(bf16(1.0f + std::ldexp(float(k), -7)));
      x1.push_back(bf16(std::ldexp(float(j), -9)));
    }
  std::mt19937 rng(12345);
  std::uniform_real_distribution<float> mant(-2.0f, 2.0f);
  std::uniform_int_distribution<int> expo(-20, 20);
  for (int i = 0; i < 4096; ++i) {
    x0.push_back(bf16(std::ldexp(mant(rng), expo(rng))));
    x1.push_back(bf16(std::ldexp(mant(rng), expo(rng))));
  }
}

// The elements whose bits differ, with the first of them described (0 when all agree).
std::size_t differing_bits(const std::vector<bf16>& got, const std::vector<bf16>& want, std::string& first) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < want.size(); ++i)
    if (got[i].bits != want[i].bits && n++ == 0)
      first = "element " + std::to_string(i) + ": got " + std::to_string(float(got[i])) + ", want " +
              std::to_string(float(want[i]));
  return n;
}
}  // namespace

// With two ranks contributing (the others add zeros, which every combine keeps exactly), each
// element's sum is the fp32 sum of the two rounded once to nearest even, and the max is the
// larger: a reduction that adds the 16-bit words as integers, truncates, or rounds ties away
// from even fails it. Blocking and non-blocking, in place and not, allreduce and reduce_scatter.
TEST_P(CommConformance, Bfloat16SumsAddInFp32AndRoundOnce) {
  if (size < 2) GTEST_SKIP() << "needs two contributing ranks";
  std::vector<bf16> x0, x1;
  rounding_pairs(x0, x1);
  const std::size_t n = x0.size();
  std::vector<bf16> mine = rank == 0 ? x0 : rank == 1 ? x1 : std::vector<bf16>(n, bf16(0.0f));
  std::vector<bf16> sum(n), max(n);
  for (std::size_t i = 0; i < n; ++i) {
    sum[i] = bf16(float(x0[i]) + float(x1[i]));
    max[i] = size > 2 ? bf16(std::max({float(x0[i]), float(x1[i]), 0.0f})) : (x0[i] > x1[i] ? x0[i] : x1[i]);
  }
  for (bool nb : {false, true})
    for (bool ip : {false, true}) {
      auto send = to_buf(mine, "send");
      Buf<bf16> recv = ip ? send : make_buf<bf16>("recv", n);
      if (nb)
        comm::iallreduce(*c, send, recv, ReduceOp::sum).wait();
      else
        comm::allreduce(*c, send, recv, ReduceOp::sum);
      std::string first;
      EXPECT_EQ(differing_bits(to_vec(recv), sum, first), 0u)
          << "allreduce sum" << (nb ? " non-blocking" : "") << (ip ? " in place" : "") << ", " << first;
      send = to_buf(mine, "send");
      recv = ip ? send : make_buf<bf16>("recv", n);
      comm::allreduce(*c, send, recv, ReduceOp::max);
      EXPECT_EQ(differing_bits(to_vec(recv), max, first), 0u) << "allreduce max, " << first;
    }
  // reduce_scatter: every rank's block is the same pairs.
  std::vector<bf16> whole;
  for (int r = 0; r < size; ++r) whole.insert(whole.end(), mine.begin(), mine.end());
  auto send = to_buf(whole, "send");
  Buf<bf16> recv = make_buf<bf16>("recv", n);
  comm::reduce_scatter(*c, send, recv, ReduceOp::sum);
  std::string first;
  EXPECT_EQ(differing_bits(to_vec(recv), sum, first), 0u) << "reduce_scatter sum, " << first;
}

// Every rank contributing: each combine rounds (as NCCL's bf16 sums do), so the result is no
// longer the one-rounding sum, but every rank holds the same bits (replicas stay identical) and
// the error stays within one half-ulp per combine of the largest partial sum.
TEST_P(CommConformance, Bfloat16SumsAgreeOnEveryRank) {
  std::vector<bf16> x0, x1;
  rounding_pairs(x0, x1);
  const std::size_t n = x0.size();
  std::vector<bf16> mine(n);
  for (std::size_t i = 0; i < n; ++i) mine[i] = bf16(rank % 2 ? float(x1[i]) * (rank + 1) : float(x0[i]) - rank);
  auto buf = to_buf(mine, "buf");
  comm::allreduce(*c, buf, ReduceOp::sum);
  Buf<bf16> all = make_buf<bf16>("all", n * size);
  comm::allgather(*c, buf, all);
  const auto got = to_vec(all);
  std::size_t differ = 0, beyond = 0;
  for (std::size_t i = 0; i < n; ++i) {
    double exact = 0, scale = 0;
    for (int r = 0; r < size; ++r) {
      const double v = r % 2 ? double(float(x1[i])) * (r + 1) : double(float(bf16(float(x0[i]) - r)));
      exact += v;
      scale += std::fabs(v);
    }
    for (int r = 1; r < size; ++r) differ += got[n * r + i].bits != got[i].bits;
    beyond += std::fabs(double(float(got[i])) - exact) > (size - 1) * std::ldexp(scale, -8);
  }
  EXPECT_EQ(differ, 0u) << "ranks hold different sums";
  EXPECT_EQ(beyond, 0u) << "sums off by more than a half-ulp per combine";
}

TEST_P(CommConformance, ZeroLengthCallsCompleteAndTouchNothing) {
  Buf<float> empty = make_buf<float>("empty", 0);
  Buf<float> big = make_buf<float>("big", 0);
  comm::allreduce(*c, empty, ReduceOp::sum);
  comm::reduce_scatter(*c, big, empty, ReduceOp::sum);
  comm::allgather(*c, empty, big);
  comm::broadcast(*c, empty, 0);
  EXPECT_TRUE(comm::iallreduce(*c, empty, ReduceOp::max).test());
  // A zero-length call between two real ones must not disturb their matching.
  auto x = to_buf(std::vector<float>{1.0f});
  comm::allreduce(*c, x, ReduceOp::sum);
  comm::allreduce(*c, empty, ReduceOp::sum);
  comm::allreduce(*c, x, ReduceOp::sum);
  EXPECT_EQ(to_vec(x)[0], float(c->size() * c->size()));
}

TEST_P(CommConformance, RawPointerCallsMatchTheViewForms) {
  std::vector<std::int32_t> v = {c->rank(), 1, -c->rank()};
  auto b = to_buf(v);
  c->allreduce(b.data(), b.data(), 3, comm::DType::i32, ReduceOp::max);
  const int n = c->size();
  EXPECT_EQ(to_vec(b), (std::vector<std::int32_t>{n - 1, 1, 0}));
}

TEST_P(CommConformance, SplitGroupsReduceOnlyAmongThemselves) {
  // Odd/even ranks, ordered by descending world rank (the key), then halves of a second split.
  auto parity = c->split(rank % 2, size - rank);
  const int members = (size + 1 - rank % 2) / 2;
  EXPECT_EQ(parity->size(), members);
  EXPECT_EQ(parity->rank(), (members - 1) - rank / 2);
  std::vector<std::int32_t> mine = {rank, 1};
  auto b = to_buf(mine);
  comm::allreduce(*parity, b, ReduceOp::sum);
  std::int32_t expect = 0;
  for (int r = rank % 2; r < size; r += 2) expect += r;
  EXPECT_EQ(to_vec(b), (std::vector<std::int32_t>{expect, members}));
  // A split of a split, and a broadcast rooted at the group's last rank.
  auto sub = parity->split(0, parity->rank());
  auto w = to_buf(std::vector<std::int32_t>{rank});
  comm::broadcast(*sub, w, sub->size() - 1);
  EXPECT_EQ(to_vec(w)[0], rank % 2);  // the lowest world rank of the parity class
  EXPECT_EQ(sub->backend(), c->backend());
  // The world still works after its children did.
  auto all = to_buf(std::vector<std::int32_t>{1});
  comm::allreduce(*c, all, ReduceOp::sum);
  EXPECT_EQ(to_vec(all)[0], size);
}

TEST_P(CommConformance, WrongArgumentsAreRefusedWithTheFix) {
  Buf<float> a = make_buf<float>("a", 4);
  Buf<float> b = make_buf<float>("b", 5);
  auto message = [](auto&& call) {
    try {
      call();
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no exception");
  };
  EXPECT_NE(message([&] { comm::allreduce(*c, a, b, ReduceOp::sum); }).find("same size"), std::string::npos);
  EXPECT_NE(message([&] { comm::allgather(*c, a, b); }).find("recv must hold"), std::string::npos);
  EXPECT_NE(message([&] { comm::broadcast(*c, a, size); }).find("pick a root"), std::string::npos);
  EXPECT_NE(message([&] { comm::send(*c, a, -1); }).find("pick a peer"), std::string::npos);
  const auto m = comm::device_view<Kokkos::View<float**, Kokkos::LayoutRight, Mem>>("m", 4, 4);
  auto column = Kokkos::subview(m, Kokkos::ALL, 1);
  EXPECT_NE(message([&] { comm::allreduce(*c, column, ReduceOp::sum); }).find("contiguous"), std::string::npos);
  auto whole = Kokkos::subview(m, std::make_pair(1, 3), Kokkos::ALL);  // rows 1..2: contiguous
  comm::allreduce(*c, whole, ReduceOp::sum);
  auto shifted = Kokkos::subview(a, std::make_pair(1, 4));
  EXPECT_NE(message([&] { comm::allreduce(*c, Kokkos::subview(a, std::make_pair(0, 3)), shifted, ReduceOp::sum); })
                .find("overlap"),
            std::string::npos);
}

}  // namespace kformer::test

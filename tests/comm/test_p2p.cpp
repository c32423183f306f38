// Point-to-point: grouped ring exchange (the pipeline's pattern, in fp32 and bf16), messages matched in posting
// order with many requests outstanding, blocking pairs, and non-blocking calls that overlap
// with computation.
#include <gtest/gtest.h>

#include <string>

#include "bf16.hpp"
#include "conformance.hpp"

namespace kformer::test {
namespace {

// NCCL, or a backend held to NCCL's rules by comm.strict (rendezvous sends, one stream).
bool nccl_rules(const comm::Communicator& c) {
  const std::string b = c.backend();
  return b.find("nccl") != std::string::npos || b.find("strict(") != std::string::npos;
}

// Length and content of message i from `from`: both ends can compute them.
std::size_t msg_len(int i) { return 1 + static_cast<std::size_t>(i % 5) * 37; }
std::vector<std::int32_t> msg(int from, int i) {
  std::vector<std::int32_t> v(msg_len(i));
  for (std::size_t k = 0; k < v.size(); ++k) v[k] = from * 100000 + i * 1000 + static_cast<int>(k);
  return v;
}

// Outside any test body: CUDA's device lambdas may not live in a private member function, and
// GoogleTest's TestBody is one.
void add_work(const Buf<float>& work) {
  Kokkos::parallel_for(
      "overlap_work", Kokkos::RangePolicy<Kokkos::DefaultExecutionSpace>(0, work.extent(0)),
      KOKKOS_LAMBDA(const int i) { work(i) += 0.5f * static_cast<float>(i % 4); });
  Kokkos::fence();
}

}  // namespace

namespace {
// size-1 steps of "send what I got last to the right, receive from the left": an allgather
// built from grouped send/recv, as a pipeline passes activations along (in fp32 or bf16).
template <class T>
void ring_exchange(comm::Communicator& c) {
  const int rank = c.rank(), size = c.size();
  const int right = (rank + 1) % size, left = (rank + size - 1) % size;
  const std::size_t n = 513;
  std::vector<std::vector<T>> got(size);
  got[rank] = values<T>(rank, n);
  auto out = to_buf(got[rank], "out");
  Buf<T> in = make_buf<T>("in", n);
  for (int step = 1; step < size; ++step) {
    if (step % 2)
      c.group({comm::send_op(out, right), comm::recv_op(in, left)});
    else
      c.igroup({comm::recv_op(in, left), comm::send_op(out, right)}).wait();  // order within a group is free
    const int origin = (rank - step + size) % size;
    got[origin] = to_vec(in);
    Kokkos::deep_copy(out, in);
  }
  for (int r = 0; r < size; ++r)
    EXPECT_TRUE(got[r] == values<T>(r, n)) << comm::dtype_name(comm::dtype_of<T>::value) << " block of rank " << r;
}
}  // namespace

TEST_P(CommConformance, GroupedRingExchangeGathersEveryBlock) { ring_exchange<float>(*c); }
TEST_P(CommConformance, GroupedRingExchangeGathersEveryBlockBfloat16) { ring_exchange<kernels::bf16>(*c); }

TEST_P(CommConformance, GroupedSendToSelfAndEmptyGroup) {
  auto out = to_buf(values<double>(rank, 9));
  Buf<double> in = make_buf<double>("in", 9);
  c->group({comm::recv_op(in, rank), comm::send_op(out, rank)});
  EXPECT_EQ(to_vec(in), values<double>(rank, 9));
  EXPECT_TRUE(c->igroup({}).test());
}

TEST_P(CommConformance, ManyOutstandingMessagesArriveInPostingOrder) {
  // 48 send/recv pairs in flight at once, each a group of its own, completed in reverse order.
  const int right = (rank + 1) % size, left = (rank + size - 1) % size;
  const int k = 48;
  std::vector<Buf<std::int32_t>> outs, ins;
  std::vector<comm::Request> reqs;
  for (int i = 0; i < k; ++i) {
    outs.push_back(to_buf(msg(rank, i)));
    ins.push_back(make_buf<std::int32_t>("in", msg_len(i)));
    reqs.push_back(c->igroup({comm::send_op(outs.back(), right), comm::recv_op(ins.back(), left)}));
  }
  for (int i = k - 1; i >= 0; --i) reqs[i].wait();
  for (int i = 0; i < k; ++i) EXPECT_EQ(to_vec(ins[i]), msg(left, i)) << "message " << i;
}

TEST_P(CommConformance, SeparateIsendIrecvKeepOrderPerPair) {
  // NCCL serialises ungrouped p2p on one stream, so posting all receives before any send is
  // only defined for backends with independent requests.
  if (nccl_rules(*c)) GTEST_SKIP() << "ungrouped p2p posting order is not NCCL's model; grouped above";
  const int right = (rank + 1) % size, left = (rank + size - 1) % size;
  const int k = 40;
  std::vector<Buf<std::int32_t>> outs, ins;
  std::vector<comm::Request> sends, recvs;
  for (int i = 0; i < k; ++i) {
    outs.push_back(to_buf(msg(rank, i)));
    ins.push_back(make_buf<std::int32_t>("in", msg_len(i)));
  }
  // Half the ranks post receives first, half sends first; polling with test() in between.
  auto post_recvs = [&] {
    for (int i = 0; i < k; ++i) recvs.push_back(comm::irecv(*c, ins[i], left));
  };
  auto post_sends = [&] {
    for (int i = 0; i < k; ++i) sends.push_back(comm::isend(*c, outs[i], right));
  };
  if (rank % 2) {
    post_recvs();
    post_sends();
  } else {
    post_sends();
    post_recvs();
  }
  bool all = false;
  for (int spin = 0; spin < 1000 && !all; ++spin) {
    all = true;
    for (auto& r : recvs) all = r.test() && all;
  }
  comm::wait_all(recvs);
  comm::wait_all(sends);
  for (int i = 0; i < k; ++i) EXPECT_EQ(to_vec(ins[i]), msg(left, i)) << "message " << i;
}

TEST_P(CommConformance, BlockingSendRecvPairs) {
  if (nccl_rules(*c) && size == 1) GTEST_SKIP() << "NCCL cannot complete an ungrouped blocking send to itself";
  const int right = (rank + 1) % size, left = (rank + size - 1) % size;
  auto out = to_buf(msg(rank, 3));
  Buf<std::int32_t> in = make_buf<std::int32_t>("in", msg_len(3));
  // Even ranks send first, odd ranks receive first: no cycle of waiting sends for any size.
  if (rank % 2 == 0) {
    comm::send(*c, out, right);
    comm::recv(*c, in, left);
  } else {
    comm::recv(*c, in, left);
    comm::send(*c, out, right);
  }
  EXPECT_EQ(to_vec(in), msg(left, 3));
}

TEST_P(CommConformance, NonBlockingCollectiveOverlapsComputation) {
  const std::size_t n = 1 << 18;
  auto grads = to_buf(values<float>(rank, n), "grads");
  Buf<float> work = make_buf<float>("work", n);
  comm::Request r = comm::iallreduce(*c, grads, comm::ReduceOp::sum);
  // Work that touches other memory while the reduction is in flight, polling it now and then.
  for (int round = 0; round < 8; ++round) {
    add_work(work);
    r.test();
  }
  r.wait();
  EXPECT_TRUE(r.done());
  const auto got = to_vec(grads);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < n; ++i) wrong += got[i] != reduced<float>(size, i, comm::ReduceOp::sum);
  EXPECT_EQ(wrong, 0u);
  const auto w = to_vec(work);
  EXPECT_EQ(w[5], 4.0f);  // 8 rounds of 0.5 * (5 % 4)
}

}  // namespace kformer::test

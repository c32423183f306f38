// The collectives of kformer-comm-bench (see collective_case.hpp).
#include "collective_case.hpp"

#include <algorithm>
#include <stdexcept>

#include "comm/device_view.hpp"

namespace kformer::bench {
namespace {

// Exact in float, and a sum over a handful of ranks stays exact.
float pattern(int rank, std::size_t i) { return float(int((i * 3 + std::size_t(rank) * 5) % 11) - 4); }

void check_mpi(int rc, const char* what) {
  if (rc != MPI_SUCCESS) throw std::runtime_error(std::string("raw ") + what + " failed");
}

}  // namespace

const std::vector<Collective>& all_collectives() {
  static const std::vector<Collective> all = {Collective::allreduce, Collective::reduce_scatter,
                                              Collective::allgather, Collective::broadcast, Collective::sendrecv};
  return all;
}

const char* collective_name(Collective c) {
  switch (c) {
    case Collective::allreduce: return "allreduce";
    case Collective::reduce_scatter: return "reduce_scatter";
    case Collective::allgather: return "allgather";
    case Collective::broadcast: return "broadcast";
    case Collective::sendrecv: return "sendrecv";
  }
  return "?";
}

Collective parse_collective(const std::string& name) {
  for (Collective c : all_collectives())
    if (name == collective_name(c)) return c;
  throw std::invalid_argument("unknown collective '" + name +
                              "': valid are allreduce, reduce_scatter, allgather, broadcast, sendrecv");
}

comm::OpKind op_kind(Collective c) {
  switch (c) {
    case Collective::allreduce: return comm::OpKind::allreduce;
    case Collective::reduce_scatter: return comm::OpKind::reduce_scatter;
    case Collective::allgather: return comm::OpKind::allgather;
    case Collective::broadcast: return comm::OpKind::broadcast;
    case Collective::sendrecv: return comm::OpKind::send;
  }
  return comm::OpKind::send;
}

CollectiveCase::CollectiveCase(Collective kind, std::size_t bytes, comm::Communicator& comm, MPI_Comm raw)
    : kind_(kind), comm_(comm), raw_(raw), rank_(comm.rank()), size_(comm.size()) {
  left_ = (rank_ + size_ - 1) % size_;
  right_ = (rank_ + 1) % size_;
  const std::size_t elems = std::max<std::size_t>(1, bytes / sizeof(float));
  const auto n = static_cast<std::size_t>(size_);
  switch (kind_) {
    case Collective::reduce_scatter:
    case Collective::allgather: {
      // reduce_scatter reads the whole and leaves a block; allgather the other way round.
      block_ = std::max<std::size_t>(1, elems / n);
      count_ = block_ * n;
      const bool rs = kind_ == Collective::reduce_scatter;
      send_ = comm::device_view<Buf>("send", rs ? count_ : block_);
      recv_ = comm::device_view<Buf>("recv", rs ? block_ : count_);
      break;
    }
    case Collective::broadcast:
      count_ = elems;
      recv_ = comm::device_view<Buf>("buf", count_);
      break;
    default:
      count_ = elems;
      send_ = comm::device_view<Buf>("send", count_);
      recv_ = comm::device_view<Buf>("recv", count_);
  }
}

void CollectiveCase::run_comm() {
  using comm::DType;
  using comm::ReduceOp;
  switch (kind_) {
    case Collective::allreduce: comm_.allreduce(send_.data(), recv_.data(), count_, DType::f32, ReduceOp::sum); break;
    case Collective::reduce_scatter:
      comm_.reduce_scatter(send_.data(), recv_.data(), block_, DType::f32, ReduceOp::sum);
      break;
    case Collective::allgather: comm_.allgather(send_.data(), recv_.data(), block_, DType::f32); break;
    case Collective::broadcast: comm_.broadcast(recv_.data(), count_, DType::f32, 0); break;
    case Collective::sendrecv:
      comm_.group({comm::Op::send_to(send_.data(), count_, DType::f32, right_),
                   comm::Op::recv_from(recv_.data(), count_, DType::f32, left_)});
      break;
  }
}

void CollectiveCase::run_mpi() {
  const int c = static_cast<int>(count_), b = static_cast<int>(block_);
  switch (kind_) {
    case Collective::allreduce:
      check_mpi(MPI_Allreduce(send_.data(), recv_.data(), c, MPI_FLOAT, MPI_SUM, raw_), "MPI_Allreduce");
      break;
    case Collective::reduce_scatter:
      check_mpi(MPI_Reduce_scatter_block(send_.data(), recv_.data(), b, MPI_FLOAT, MPI_SUM, raw_),
                "MPI_Reduce_scatter_block");
      break;
    case Collective::allgather:
      check_mpi(MPI_Allgather(send_.data(), b, MPI_FLOAT, recv_.data(), b, MPI_FLOAT, raw_), "MPI_Allgather");
      break;
    case Collective::broadcast: check_mpi(MPI_Bcast(recv_.data(), c, MPI_FLOAT, 0, raw_), "MPI_Bcast"); break;
    case Collective::sendrecv:
      check_mpi(MPI_Sendrecv(send_.data(), c, MPI_FLOAT, right_, 0, recv_.data(), c, MPI_FLOAT, left_, 0, raw_,
                             MPI_STATUS_IGNORE),
                "MPI_Sendrecv");
      break;
  }
}

std::size_t CollectiveCase::check() {
  const Buf& in = kind_ == Collective::broadcast ? recv_ : send_;
  auto h_in = Kokkos::create_mirror_view(in);
  const std::size_t offset = kind_ == Collective::allgather ? block_ * std::size_t(rank_) : 0;
  for (std::size_t i = 0; i < h_in.extent(0); ++i) h_in(i) = pattern(rank_, offset + i);
  Kokkos::deep_copy(in, h_in);
  if (kind_ != Collective::broadcast) Kokkos::deep_copy(recv_, -99.0f);  // a stale result must not pass
  run_comm();
  auto out = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), recv_);
  std::size_t wrong = 0;
  auto sum_over_ranks = [&](std::size_t i) {
    float s = 0;
    for (int r = 0; r < size_; ++r) s += pattern(r, i);
    return s;
  };
  for (std::size_t i = 0; i < out.extent(0); ++i) {
    float expect = 0;
    switch (kind_) {
      case Collective::allreduce: expect = sum_over_ranks(i); break;
      case Collective::reduce_scatter: expect = sum_over_ranks(block_ * std::size_t(rank_) + i); break;
      case Collective::allgather: expect = pattern(int(i / block_), i); break;
      case Collective::broadcast: expect = pattern(0, i); break;
      case Collective::sendrecv: expect = pattern(left_, i); break;
    }
    wrong += out(i) != expect;
  }
  return wrong;
}

}  // namespace kformer::bench

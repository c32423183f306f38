// Shared pieces of the communicator conformance suite: the parameterised fixture (one
// communicator per case, made fresh for each test), Views in the default execution space's
// memory (device memory under CUDA, so NCCL and MPI staging are exercised there; recorded as
// device allocations, comm/device_view.hpp), and the
// exactly representable test values every rank can predict for every other rank.
#pragma once

#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "comm/device_view.hpp"
#include "comm/views.hpp"
#include "comm_cases.hpp"

namespace kformer::test {

using Mem = Kokkos::DefaultExecutionSpace::memory_space;
template <class T>
using Buf = Kokkos::View<T*, Kokkos::LayoutRight, Mem>;

// A device buffer of n zeros, as kformer allocates one (comm::device_view): comm.strict accepts
// it on every build.
template <class T>
Buf<T> make_buf(const std::string& label, std::size_t n) {
  return comm::device_view<Buf<T>>(label, n);
}

template <class T>
Buf<T> to_buf(const std::vector<T>& v, const char* label = "buf") {
  auto b = comm::device_view<Buf<T>>(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(label)), v.size());
  Kokkos::View<const T*, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged> h(v.data(), v.size());
  Kokkos::deep_copy(b, h);
  return b;
}

template <class T>
std::vector<T> to_vec(const Buf<T>& b) {
  std::vector<T> v(b.extent(0));
  Kokkos::View<T*, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged> h(v.data(), v.size());
  Kokkos::deep_copy(h, b);
  return v;
}

// Small integers in [-4, 6]: exact in float and bfloat16, sums over 4 ranks stay exact, and the
// maximum over ranks differs from element to element.
template <class T>
T value(int rank, std::size_t i) {
  return static_cast<T>(static_cast<int>((i * 3 + static_cast<std::size_t>(rank) * 5) % 11) - 4);
}

template <class T>
std::vector<T> values(int rank, std::size_t n, std::size_t offset = 0) {
  std::vector<T> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = value<T>(rank, offset + i);
  return v;
}

template <class T>
T reduced(int nranks, std::size_t i, comm::ReduceOp op) {
  T acc = value<T>(0, i);
  for (int r = 1; r < nranks; ++r) {
    const T x = value<T>(r, i);
    acc = static_cast<T>(op == comm::ReduceOp::sum ? acc + x : (x > acc ? x : acc));
  }
  return acc;
}

class CommConformance : public ::testing::TestWithParam<CommCase> {
 protected:
  void SetUp() override;
  std::unique_ptr<comm::Communicator> c;
  int rank = 0, size = 1;
};

}  // namespace kformer::test

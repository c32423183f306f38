// xsum64 (see checksum.hpp).
#include "checkpoint/checksum.hpp"

#include <cstdio>
#include <cstring>

#include <Kokkos_Core.hpp>

#include "counter_rng.hpp"
#include "platform/device_reduce.hpp"

namespace kformer {

std::uint64_t xsum64(const float* x, std::int64_t n, std::uint64_t first_index) {
  // Host threads for long runs (a save or load hashes every element once, on the rank that owns
  // it); a short piece is not worth a parallel launch.
  auto term = [=](std::int64_t k) {
    std::uint32_t bits;
    std::memcpy(&bits, x + k, sizeof bits);
    return kernels::mix64(((first_index + std::uint64_t(k)) << 32) | bits);
  };
  std::uint64_t sum = 0;
  if (n < (1 << 14)) {
    for (std::int64_t k = 0; k < n; ++k) sum += term(k);
    return sum;
  }
  Kokkos::parallel_reduce(
      "kformer::xsum64", Kokkos::RangePolicy<Kokkos::DefaultHostExecutionSpace>(0, n),
      [=](std::int64_t k, std::uint64_t& acc) { acc += term(k); }, sum);
  return sum;
}

void allreduce_xsums(comm::Communicator& group, std::vector<std::uint64_t>& sums) {
  // The communicator reduces floating point and 32-bit integers: send each sum as four 16-bit
  // digits in doubles, exact for any realistic rank count, and carry them back together.
  std::vector<double> digits(4 * sums.size());
  for (std::size_t i = 0; i < sums.size(); ++i)
    for (int d = 0; d < 4; ++d) digits[4 * i + d] = double((sums[i] >> (16 * d)) & 0xffff);
  if (group.size() > 1) DeviceReduce().allreduce(group, digits, comm::ReduceOp::sum);
  for (std::size_t i = 0; i < sums.size(); ++i) {
    std::uint64_t s = 0;
    for (int d = 0; d < 4; ++d) s += std::uint64_t(digits[4 * i + d]) << (16 * d);
    sums[i] = s;
  }
}

std::string xsum_hex(std::uint64_t x) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(x));
  return buf;
}

}  // namespace kformer

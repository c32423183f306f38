// Host values reduced through device memory (see device_reduce.hpp).
#include "platform/device_reduce.hpp"

#include "comm/views.hpp"
#include "platform/device.hpp"
#include "convert.hpp"

namespace kformer {
namespace {

template <class T, class Buffer>
void reduce_through(Buffer& buf, comm::Communicator& c, T* values, std::size_t n, comm::ReduceOp op,
                    comm::CallSite at) {
  if (c.size() == 1) return;  // the reduction over one rank is the values themselves
  if (buf.extent(0) < n) buf = scratch<T*>("kformer::device_reduce", n);  // described: no memory (device.hpp)
  const auto dev = Kokkos::subview(buf, std::make_pair(std::size_t(0), n));
  const Kokkos::View<T*, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> host(values, n);
  kernels::transfer(dev, host);     // fences: the values are on the device before the call reads them
  comm::allreduce(c, dev, op, at);  // blocking: the result is in dev when it returns
  kernels::transfer(host, dev);
}

}  // namespace

void DeviceReduce::allreduce(comm::Communicator& c, std::vector<double>& values, comm::ReduceOp op,
                                comm::CallSite at) {
  reduce_through(f64_, c, values.data(), values.size(), op, at);
}

void DeviceReduce::allreduce(comm::Communicator& c, std::vector<std::int32_t>& values, comm::ReduceOp op,
                                comm::CallSite at) {
  reduce_through(i32_, c, values.data(), values.size(), op, at);
}

double DeviceReduce::allreduce(comm::Communicator& c, double value, comm::ReduceOp op,
                                comm::CallSite at) {
  reduce_through(f64_, c, &value, 1, op, at);
  return value;
}

std::int32_t DeviceReduce::allreduce(comm::Communicator& c, std::int32_t value, comm::ReduceOp op,
                                comm::CallSite at) {
  reduce_through(i32_, c, &value, 1, op, at);
  return value;
}

}  // namespace kformer

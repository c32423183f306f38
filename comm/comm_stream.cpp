// The communication stream, its events and its clock anchor (see comm_stream.hpp).
#include "comm_stream.hpp"

#include <stdexcept>
#include <string>

#include "trace_log.hpp"

namespace kformer::comm {

void check_cuda(cudaError_t rc, const char* what) {
  if (rc == cudaSuccess) return;
  throw std::runtime_error(std::string("CUDA error in ") + what + ": " + cudaGetErrorString(rc));
}

CudaEvent::CudaEvent(bool timing) {
  check_cuda(cudaEventCreateWithFlags(&event_, timing ? cudaEventDefault : cudaEventDisableTiming),
             "cudaEventCreateWithFlags");
}

CudaEvent::~CudaEvent() { cudaEventDestroy(event_); }

void CudaEvent::record(cudaStream_t stream) { check_cuda(cudaEventRecord(event_, stream), "cudaEventRecord"); }

void CudaEvent::synchronize() { check_cuda(cudaEventSynchronize(event_), "cudaEventSynchronize"); }

bool CudaEvent::query() {
  const cudaError_t rc = cudaEventQuery(event_);
  if (rc == cudaErrorNotReady) return false;
  check_cuda(rc, "cudaEventQuery");
  return true;
}

std::shared_ptr<CommStream> CommStream::shared() {
  // A weak reference: the stream lives exactly as long as some communicator (or a request still
  // in flight) holds it, so the last one to go destroys it, after its own NCCL communicator.
  static std::weak_ptr<CommStream> current;
  std::shared_ptr<CommStream> s = current.lock();
  if (!s) {
    s = std::shared_ptr<CommStream>(new CommStream());
    current = s;
  }
  return s;
}

CommStream::CommStream() {
  // The highest priority the device has: a bucket's all-reduce should not queue behind the
  // blocks of the backward it overlaps, or the overlap shrinks to what is left over. Non-blocking:
  // Kokkos 3.4 computes on the legacy stream 0, which would otherwise serialise with this one.
  int least = 0, greatest = 0;
  check_cuda(cudaDeviceGetStreamPriorityRange(&least, &greatest), "cudaDeviceGetStreamPriorityRange");
  check_cuda(cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking, greatest), "cudaStreamCreateWithPriority");
  auto first = std::make_shared<ClockAnchor>();
  first->event = std::make_shared<CudaEvent>(true);
  first->event->record(stream_);
  first->event->synchronize();
  first->host_us = TraceLog::now_us();
  anchor_ = std::move(first);
}

CommStream::~CommStream() {
  // Work still queued completes first (cudaStreamDestroy does not wait, but releases the stream
  // only then); errors are ignored, since at exit the CUDA runtime may already be gone.
  if (stream_) cudaStreamDestroy(stream_);
}

CommStream::Call CommStream::begin(cudaStream_t compute) {
  Call c;
  c.start = std::make_shared<CudaEvent>(true);
  c.end = std::make_shared<CudaEvent>(true);
  c.anchor = anchor_;
  compute_done_.record(compute);
  check_cuda(cudaStreamWaitEvent(stream_, compute_done_.get(), 0), "cudaStreamWaitEvent");
  c.start->record(stream_);
  return c;
}

void CommStream::end(Call& call) { call.end->record(stream_); }

DeviceSpan CommStream::span_of(const Call& call) {
  float to_start = 0, to_end = 0;
  check_cuda(cudaEventElapsedTime(&to_start, call.anchor->event->get(), call.start->get()), "cudaEventElapsedTime");
  check_cuda(cudaEventElapsedTime(&to_end, call.anchor->event->get(), call.end->get()), "cudaEventElapsedTime");
  return {call.anchor->host_us + 1e3 * double(to_start), call.anchor->host_us + 1e3 * double(to_end)};
}

void CommStream::reanchor(const Call& call, double host_us) {
  auto a = std::make_shared<ClockAnchor>();
  a->event = call.end;
  a->host_us = host_us;
  anchor_ = std::move(a);
}

}  // namespace kformer::comm

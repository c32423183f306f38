// The CUDA stream that NCCL's calls run on, one per process, apart from the compute stream: a
// data-parallel bucket's all-reduce then runs while the backward of the next layers is computed,
// on a GPU as on the CPU. Events order each call after the compute that wrote its buffers (the
// compute stream's tail when the call is posted) and time it on the device; an anchor, an event
// whose completion the host saw at a known time, maps those device times onto the host's steady
// clock (TraceLog::now_us's), so the trace can place the call where it ran.
// Built with KFORMER_ENABLE_NCCL only.
#pragma once

#include <cuda_runtime.h>

#include <memory>

#include "request.hpp"

namespace kformer::comm {

// Throws std::runtime_error naming `what` and CUDA's reason.
void check_cuda(cudaError_t rc, const char* what);

// One CUDA event; timing ones can be measured against each other.
class CudaEvent {
 public:
  explicit CudaEvent(bool timing);
  ~CudaEvent();
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  cudaEvent_t get() const { return event_; }
  void record(cudaStream_t stream);
  void synchronize();  // blocks the host until the event has completed
  bool query();        // whether it has completed
 private:
  cudaEvent_t event_ = nullptr;
};

// A device event whose completion the host saw at host_us (a few microseconds late at most).
struct ClockAnchor {
  std::shared_ptr<CudaEvent> event;
  double host_us = 0;
};

class CommStream {
 public:
  // The process's stream: made on first use (on the current device, which Kokkos chose), shared
  // by every NcclComm of the process, destroyed when the last one that holds it goes.
  static std::shared_ptr<CommStream> shared();
  ~CommStream();
  CommStream(const CommStream&) = delete;
  CommStream& operator=(const CommStream&) = delete;

  cudaStream_t get() const { return stream_; }

  // What one call needs around its NCCL calls: begin() makes the stream wait for everything
  // queued so far on `compute` and records `start`; end() records `end` after the call.
  struct Call {
    std::shared_ptr<CudaEvent> start, end;
    std::shared_ptr<const ClockAnchor> anchor;  // the anchor current when the call was posted
  };
  Call begin(cudaStream_t compute);
  void end(Call& call);

  // The call's span on the host clock; both its events must have completed.
  static DeviceSpan span_of(const Call& call);
  // After the host saw `call` complete just now: its end becomes the anchor of later calls, so
  // the mapping never has to bridge more than the time between two blocking calls.
  void reanchor(const Call& call, double host_us);

 private:
  CommStream();
  cudaStream_t stream_ = nullptr;
  CudaEvent compute_done_{false};  // recorded on the compute stream, waited on by this one
  std::shared_ptr<const ClockAnchor> anchor_;
};

}  // namespace kformer::comm

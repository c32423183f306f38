// The per-rank record of communication calls that the tracing decorator fills: one record per
// call with its start and end, from which the trainer draws a Chrome trace and computes the
// per-rank communication time the straggler metrics need. Not thread-safe: a rank's
// communicators are driven from one thread, as MPI_THREAD_FUNNELED requires anyway.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace kformer::comm {

struct TraceRecord {
  std::string op;          // "allreduce", ..., "send", "recv", "group", "barrier"
  std::size_t bytes = 0;   // nccl-tests' size (op_bytes); a group: its sends plus its receives
  int group_size = 0;      // ranks in the communicator the call ran on
  int comm_id = 0;         // which communicator of this rank: 0 the first, then each split
  bool blocking = true;    // false: start is the post, end the observed completion
  double start_us = 0.0;   // steady clock, microseconds; one clock for every process of a node
  double end_us = -1.0;    // -1 while a non-blocking call has not been seen to complete
  // Where the backend timed the call on the device (nccl's non-blocking calls): when it ran
  // there, on the same clock; -1 where it did not, and the host span is the call's time.
  double device_start_us = -1.0;
  double device_end_us = -1.0;

  bool has_device_span() const { return device_end_us >= device_start_us && device_start_us >= 0; }
  // The interval the call occupied communication: the device span where there is one (a
  // non-blocking call posted behind queued compute did not communicate during that compute),
  // else the host span.
  double busy_start_us() const { return has_device_span() ? device_start_us : start_us; }
  double busy_end_us() const { return has_device_span() ? device_end_us : end_us; }
};

class TraceLog {
 public:
  // Microseconds on the steady clock the records use.
  static double now_us();

  // Appends a record still open (end_us = -1) and returns its index for close().
  std::size_t open(TraceRecord r);
  void close(std::size_t index, double end_us);
  // Adds the device span of a closed record, clamped into its host span (the call cannot have
  // run before it was posted or after it was seen complete; the two clocks are matched only to
  // a few microseconds).
  void set_device_span(std::size_t index, double start_us, double end_us);
  // A fresh id for each communicator that writes here.
  int next_comm_id() { return comm_ids_++; }

  const std::vector<TraceRecord>& records() const { return records_; }
  // Between iterations, with no non-blocking call in flight (its close would hit a new record).
  void clear() { records_.clear(); }

  // Time during which at least one call was in flight (overlapping non-blocking calls count
  // once), over closed records and their busy spans: the rank's communication time.
  double busy_us() const;

 private:
  std::vector<TraceRecord> records_;
  int comm_ids_ = 0;
};

}  // namespace kformer::comm

// The one interface through which every part of kformer communicates. Backends (self, mpi,
// nccl) implement it; decorators (network emulation, tracing) wrap any of them.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

namespace kformer::comm {

enum class DType { f32, f64, i32 };
enum class ReduceOp { sum, max };

std::size_t dtype_size(DType t);
const char* dtype_name(DType t);

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // "self", "mpi", "nccl", or a decorator's name around its backend's.
  virtual std::string backend() const = 0;

  // Ranks with the same color form a new communicator, ordered by key (then by old rank).
  virtual std::unique_ptr<Communicator> split(int color, int key) = 0;
  virtual void barrier() = 0;

  // Element-wise reduction over all ranks; send == recv is allowed (in place).
  virtual void allreduce(const void* send, void* recv, std::size_t count, DType type, ReduceOp op) = 0;
};

}  // namespace kformer::comm

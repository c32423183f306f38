// Addresses for the buffers of a described step (kernels/call_record.hpp): while kernels describe
// their calls instead of running, scratch() and device_buffer() hand out views over a range of
// address space reserved with no access and no backing, so a model of any size can be built and
// walked through on any machine. The addresses are distinct (but for a buffer larger than all
// the space reserved, which gets its start), so code that tells buffers apart by
// their address (aliases, shared scratch) behaves as in a run; touching one is a crash, never a
// silent read.
//
// The memory estimate (train/memory_estimate.hpp) is the sum of those buffers: DescribedBytes
// counts, by kind, what described_address hands out on its thread while it lives; the kind is
// the innermost MemoryKindScope's (workspace outside every scope). The scopes sit where the
// buffers are made (the store, the optimizer, a stage's slots), so a run makes the same buffers
// under the same kinds, and the estimate is what the code allocates, never a model of it.
#pragma once

#include <array>
#include <cstddef>

namespace kformer {

enum class MemoryKind { params, grads, optimizer, activations, workspace };
constexpr int kMemoryKinds = 5;

// The buffers this thread makes while it lives are of `kind` (scopes nest). Costs a thread-local
// write: run or described alike.
class MemoryKindScope {
 public:
  explicit MemoryKindScope(MemoryKind kind);
  ~MemoryKindScope();
  MemoryKindScope(const MemoryKindScope&) = delete;
  MemoryKindScope& operator=(const MemoryKindScope&) = delete;

 private:
  MemoryKind previous_;
};

// Counts the bytes described_address hands out on this thread while it lives, by kind.
class DescribedBytes {
 public:
  DescribedBytes();
  ~DescribedBytes();
  DescribedBytes(const DescribedBytes&) = delete;
  DescribedBytes& operator=(const DescribedBytes&) = delete;
  double of(MemoryKind kind) const { return bytes_[static_cast<int>(kind)]; }
  void add(MemoryKind kind, double bytes) { bytes_[static_cast<int>(kind)] += bytes; }

 private:
  std::array<double, kMemoryKinds> bytes_{};
  DescribedBytes* previous_;
};

// `bytes` of never-backed address space, 64-byte aligned, distinct from the earlier ones.
void* described_address(std::size_t bytes);

}  // namespace kformer

// Reserved, never-backed addresses for described steps (see described_memory.hpp).
#include "platform/described_memory.hpp"

#include <sys/mman.h>

#include <cstdint>
#include <mutex>
#include <stdexcept>

namespace kformer {
namespace {

struct Reservation {
  std::uintptr_t base = 0;
  std::size_t size = 0, used = 0;
  Reservation() {
    // As much as the kernel grants, from 64 TiB down: PROT_NONE with MAP_NORESERVE takes no memory.
    for (std::size_t s = std::size_t(1) << 46; s >= (std::size_t(1) << 32); s >>= 1) {
      void* p = mmap(nullptr, s, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (p != MAP_FAILED) {
        base = reinterpret_cast<std::uintptr_t>(p);
        size = s;
        return;
      }
    }
  }
};

thread_local MemoryKind current_kind = MemoryKind::workspace;
thread_local DescribedBytes* counting = nullptr;

}  // namespace

MemoryKindScope::MemoryKindScope(MemoryKind kind) : previous_(current_kind) { current_kind = kind; }
MemoryKindScope::~MemoryKindScope() { current_kind = previous_; }

DescribedBytes::DescribedBytes() : previous_(counting) { counting = this; }
DescribedBytes::~DescribedBytes() { counting = previous_; }

void* described_address(std::size_t bytes) {
  if (counting) counting->add(current_kind, double(bytes));
  static Reservation r;
  static std::mutex m;
  const std::lock_guard<std::mutex> lock(m);
  if (r.size == 0) throw std::runtime_error("kformer: could not reserve address space to describe a step (mmap)");
  const std::size_t need = (bytes + 63) / 64 * 64 + 64;  // a gap, so that no two buffers touch
  // A buffer larger than all the space reserved (hundreds of TB: a deck no machine holds) is
  // counted, and given the start of the space: it is never touched, and the estimate it swells
  // is refused by the memory checks with their usual line.
  if (need > r.size) return reinterpret_cast<void*>(r.base);
  if (r.used + need > r.size) r.used = 0;  // a long-lived process starts over: earlier steps are gone
  void* p = reinterpret_cast<void*>(r.base + r.used);
  r.used += need;
  return p;
}

}  // namespace kformer

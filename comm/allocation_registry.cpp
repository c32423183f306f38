// Kokkos Tools callbacks feeding the registry (see allocation_registry.hpp).
#include "allocation_registry.hpp"

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <stdexcept>

namespace kformer::comm {
namespace {

using Space = Kokkos::DefaultExecutionSpace::memory_space;

struct Allocation {
  std::uint64_t bytes;
  std::string label;
  bool device;  // made inside a DeviceScope
  bool counted;  // in live_bytes: the program's own, not the runtime's
};

// Kokkos' own buffers (its internal scratch, reduction and team memory): made without a label
// ("[unlabeled]", Kokkos 3.4 and 4.x alike) or under one of its own ("Kokkos::InternalScratch...").
// Not the program's memory: kept out of live_bytes and the peak (so they are out of the memory
// estimate's comparison too), still known to contains().
bool runtime_owned(const char* label) {
  return !label || std::strcmp(label, "[unlabeled]") == 0 || std::strncmp(label, "Kokkos::", 8) == 0;
}

thread_local int device_scopes = 0;  // DeviceScopes alive on this thread

struct State {
  std::mutex mutex;
  std::map<std::uintptr_t, Allocation> live;  // by the pointer Kokkos reports
  Kokkos::Tools::Experimental::EventSet chained{};
  // Kokkos reports the start of an allocation, which holds a header before the View's data:
  // measured once on a probe View instead of relying on the header's size.
  std::uintptr_t data_offset = 0;
  std::uint64_t live_bytes = 0, peak_bytes = 0;
  bool installed = false;
};

State& state() {
  static State s;
  return s;
}

bool tracked_space(const Kokkos::Tools::SpaceHandle& h) { return std::strcmp(h.name, Space::name()) == 0; }

void on_allocate(const Kokkos::Tools::SpaceHandle h, const char* label, const void* ptr, const std::uint64_t bytes) {
  State& s = state();
  if (tracked_space(h)) {
    std::lock_guard<std::mutex> lock(s.mutex);
    const bool counted = !runtime_owned(label);
    s.live[reinterpret_cast<std::uintptr_t>(ptr)] = {bytes, label ? label : "", device_scopes > 0, counted};
    if (counted) s.live_bytes += bytes;
    if (s.live_bytes > s.peak_bytes) s.peak_bytes = s.live_bytes;
  }
  if (s.chained.allocate_data) s.chained.allocate_data(h, label, ptr, bytes);
}

void on_deallocate(const Kokkos::Tools::SpaceHandle h, const char* label, const void* ptr, const std::uint64_t bytes) {
  State& s = state();
  if (tracked_space(h)) {
    std::lock_guard<std::mutex> lock(s.mutex);
    const auto it = s.live.find(reinterpret_cast<std::uintptr_t>(ptr));
    if (it != s.live.end()) {  // allocations made before install() were never counted
      if (it->second.counted) s.live_bytes -= it->second.bytes;
      s.live.erase(it);
    }
  }
  if (s.chained.deallocate_data) s.chained.deallocate_data(h, label, ptr, bytes);
}

}  // namespace

void AllocationRegistry::install() {
  State& s = state();
  if (s.installed) return;
  if (!Kokkos::is_initialized())
    throw std::logic_error("AllocationRegistry::install needs Kokkos initialised: call it after Kokkos starts");
  s.chained = Kokkos::Tools::Experimental::get_callbacks();
  Kokkos::Tools::Experimental::set_allocate_data_callback(on_allocate);
  Kokkos::Tools::Experimental::set_deallocate_data_callback(on_deallocate);
  s.installed = true;
  std::uintptr_t reported = 0;
  {
    Kokkos::View<char*, Space> probe("kformer_allocation_probe", 1);
    std::lock_guard<std::mutex> lock(s.mutex);
    for (const auto& a : s.live)
      if (a.second.label == "kformer_allocation_probe") reported = a.first;
    const auto data = reinterpret_cast<std::uintptr_t>(probe.data());
    if (reported == 0 || data < reported)
      throw std::logic_error("AllocationRegistry: Kokkos did not report the probe allocation: comm.strict cannot "
                             "check buffers with this Kokkos; run without comm.strict");
    s.data_offset = data - reported;
  }
}

bool AllocationRegistry::installed() { return state().installed; }

namespace {

// The live allocation holding [p, p + bytes), or null. Needs the state's mutex held.
const Allocation* find(const State& s, const void* p, std::size_t bytes) {
  const auto begin = reinterpret_cast<std::uintptr_t>(p);
  // The allocation that starts at or before p (its header comes before its data).
  auto it = s.live.upper_bound(begin);
  if (it == s.live.begin()) return nullptr;
  it = std::prev(it);
  const std::uintptr_t data = it->first + s.data_offset;
  if (begin < data || begin + bytes > data + it->second.bytes) return nullptr;
  return &it->second;
}

}  // namespace

bool AllocationRegistry::contains(const void* p, std::size_t bytes, std::string* label) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  const Allocation* a = find(s, p, bytes);
  if (a && label) *label = a->label;
  return a != nullptr;
}

bool AllocationRegistry::contains_device(const void* p, std::size_t bytes, std::string* label) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  const Allocation* a = find(s, p, bytes);
  if (a && label) *label = a->label;
  return a != nullptr && (a->device || !space_is_host());
}

bool AllocationRegistry::space_is_host() {
  return Kokkos::SpaceAccessibility<Kokkos::HostSpace, Space>::accessible;
}

AllocationRegistry::DeviceScope::DeviceScope() { ++device_scopes; }
AllocationRegistry::DeviceScope::~DeviceScope() { --device_scopes; }

std::uint64_t AllocationRegistry::live_bytes() {
  std::lock_guard<std::mutex> lock(state().mutex);
  return state().live_bytes;
}

std::uint64_t AllocationRegistry::peak_bytes() {
  std::lock_guard<std::mutex> lock(state().mutex);
  return state().peak_bytes;
}

void AllocationRegistry::reset_peak() {
  std::lock_guard<std::mutex> lock(state().mutex);
  state().peak_bytes = state().live_bytes;
}

const char* AllocationRegistry::space_name() { return Space::name(); }

}  // namespace kformer::comm

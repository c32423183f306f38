// Addresses for the buffers of a described step (kernels/call_record.hpp): while kernels describe
// their calls instead of running, scratch() and device_buffer() hand out views over a range of
// address space reserved with no access and no backing, so a model of any size can be built and
// walked through on any machine. The addresses are distinct, so code that tells buffers apart by
// their address (aliases, shared scratch) behaves as in a run; touching one is a crash, never a
// silent read.
#pragma once

#include <cstddef>

namespace kformer {

// `bytes` of never-backed address space, 64-byte aligned, distinct from the earlier ones.
void* described_address(std::size_t bytes);

}  // namespace kformer

// xsum64, the per-tensor checksum of the universal checkpoints. It is a sum, modulo 2^64, of one
// hashed term per element: term(i, bits) = mix64((i << 32) | bits), where i is the element's index
// in the full row-major tensor and bits its float32 bit pattern, and mix64 is splitmix64's
// finaliser. Being a sum of position-keyed terms, any set of ranks holding any disjoint slices can
// compute it in parallel and add up the parts, whatever the layout; a flipped bit, a moved or a
// lost element changes it. scripts/reference/check_checkpoint.py recomputes it with numpy.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "comm/communicator.hpp"

namespace kformer {

// The sum of the terms of x[0..n), whose first element has index `first_index` in its tensor.
std::uint64_t xsum64(const float* x, std::int64_t n, std::uint64_t first_index);

// Adds every rank's partial sums element-wise (modulo 2^64), in place, over `group`.
void allreduce_xsums(comm::Communicator& group, std::vector<std::uint64_t>& sums);

std::string xsum_hex(std::uint64_t x);

}  // namespace kformer

// The Kokkos::View handling kformer's code relies on, in this test's memory space: a
// default-constructed View copied and assigned (every `const DV<float*> none;` handed to a kernel),
// an unmanaged View of a buffer taken into a View of the managed type (block_typed.hpp, stage.hpp:
// shards and strided slices of one allocation), and the reference counts of a real allocation
// through both. These are Kokkos' own semantics; the test exists because a Kokkos and compiler pair
// can break them: Kokkos' mdspan-based View (develop's default since April 2025, the releases' after
// 4.6) built with GCC 12.2-12.4 leaves a default-constructed View's tracker unset, so that copying one
// dereferences a null allocation record and the trainer segfaults at its first block
// (kokkos/kokkos#8187, fixed upstream by #8223 of 2025-07-04; docs/kokkos-versions.md). The line
// printed before each step says which one a crash came from.
#include "kernel_test_util.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <utility>

namespace {

using ktest::Mem;
template <class T>
using Unmanaged = Kokkos::View<T, Kokkos::LayoutRight, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

void say(const char* step) {
  std::fprintf(stderr,
               "view_semantics: %s (a crash here: Kokkos' mdspan View under GCC 12.2-12.4 without "
               "kokkos/kokkos#8223; use GCC 13+, Clang, or a Kokkos with that fix; docs/kokkos-versions.md)\n",
               step);
}

TEST(ViewSemantics, DefaultConstructedViewsCopyAndAssign) {
  say("copying a default-constructed View");
  const ktest::View<float*> none;
  const ktest::View<float*> copy = none;
  EXPECT_EQ(copy.data(), nullptr);
  EXPECT_EQ(copy.extent(0), 0u);
  EXPECT_EQ(copy.use_count(), 0);
  say("assigning a default-constructed View over an allocated one");
  ktest::View<float*> v("v", 8);
  v = none;
  EXPECT_EQ(v.data(), nullptr);
  ktest::View<float**> two;
  ktest::View<float**> moved = std::move(two);
  EXPECT_EQ(moved.data(), nullptr);
}

TEST(ViewSemantics, UnmanagedBufferTakenAsManagedType) {
  ktest::View<float*> whole("whole", 24);
  EXPECT_EQ(whole.use_count(), 1);
  say("taking an unmanaged View of an allocation into a View of the managed type");
  {
    // Rows 2..3 of a 4 x 6 matrix held in `whole`, as a stage takes its TP rank's shard.
    const ktest::View<float**> shard = Unmanaged<float**>(whole.data() + 2 * 6, 2, 6);
    const ktest::View<float**> again = shard;
    EXPECT_EQ(again.data(), whole.data() + 12);
    EXPECT_EQ(again.extent(0), 2u);
    EXPECT_EQ(again.extent(1), 6u);
    // An unmanaged View holds no reference: the allocation's count is unchanged by it and its copies.
    EXPECT_EQ(whole.use_count(), 1);
  }
  say("copying a managed View");
  {
    const ktest::View<float*> alias = whole;
    EXPECT_EQ(whole.use_count(), 2);
    EXPECT_EQ(alias.data(), whole.data());
  }
  EXPECT_EQ(whole.use_count(), 1);
}

TEST(ViewSemantics, WritesThroughAnUnmanagedShardReachTheAllocation) {
  ktest::View<float*> whole("whole", 12);
  Kokkos::deep_copy(whole, 0.0f);
  const ktest::View<float**> shard = Unmanaged<float**>(whole.data() + 6, 2, 3);
  Kokkos::deep_copy(shard, 2.5f);
  const auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), whole);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(h(i), i < 6 ? 0.0f : 2.5f) << "element " << i;
}

}  // namespace

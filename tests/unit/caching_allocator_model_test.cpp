// The caching allocator model against the rules of c10/cuda/CUDACachingAllocator.cpp (default
// configuration): segment sizes, splitting, best fit, merging, empty_cache; and sim's
// memory_reserved() built on it.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <vector>

#include "harness/instrument/caching_allocator_model.h"
#include "harness/instrument/sim/sim_device.h"

namespace harness::memory {
namespace {

constexpr int64_t kMiB = 1 << 20;

TEST(CachingAllocatorModel, SmallRequestsShareOne2MiBSegment) {
  CachingAllocatorModel m;
  std::vector<CachingAllocatorModel::Block*> blocks;
  for (int i = 0; i < 4; ++i) blocks.push_back(m.allocate(1000));  // 1024 bytes each
  EXPECT_EQ(m.reserved_bytes(), 2 * kMiB);
  EXPECT_EQ(m.segments(), 1);
  // 2 MiB hold 2048 blocks of 1 KiB: the 2049th needs a second segment.
  for (int i = 4; i < 2048; ++i) blocks.push_back(m.allocate(1024));
  EXPECT_EQ(m.segments(), 1);
  blocks.push_back(m.allocate(1));
  EXPECT_EQ(m.segments(), 2);
  EXPECT_EQ(m.reserved_bytes(), 4 * kMiB);
  for (auto* b : blocks) m.free(b);
}

TEST(CachingAllocatorModel, SegmentSizesAndRounding) {
  EXPECT_EQ(CachingAllocatorModel::rounded(1), 512);
  EXPECT_EQ(CachingAllocatorModel::rounded(513), 1024);
  EXPECT_EQ(CachingAllocatorModel::segment_size(kMiB), 2 * kMiB);           // small pool
  EXPECT_EQ(CachingAllocatorModel::segment_size(kMiB + 512), 20 * kMiB);    // kLargeBuffer
  EXPECT_EQ(CachingAllocatorModel::segment_size(10 * kMiB - 512), 20 * kMiB);
  EXPECT_EQ(CachingAllocatorModel::segment_size(10 * kMiB), 10 * kMiB);     // rounded to 2 MiB
  EXPECT_EQ(CachingAllocatorModel::segment_size(100000256), 48 * 2 * kMiB);
}

TEST(CachingAllocatorModel, ALargeBlockIsSplitOnlyWhenMoreThan1MiBIsLeft) {
  CachingAllocatorModel m;
  // 1.5 MiB: a 20 MiB segment, split (18.5 MiB left); the next 1.5 MiB fits in the rest.
  auto* a = m.allocate(3 * kMiB / 2);
  auto* b = m.allocate(3 * kMiB / 2);
  EXPECT_EQ(m.segments(), 1);
  EXPECT_EQ(m.reserved_bytes(), 20 * kMiB);
  // 100,000,256 bytes: a 96 MiB segment (48 x 2 MiB); the 663,296 bytes left are not split off,
  // so a small request cannot use them (and the small pool is apart anyway).
  auto* c = m.allocate(100000256);
  EXPECT_EQ(m.reserved_bytes(), 20 * kMiB + 96 * kMiB);
  m.free(c);
  // The freed 96 MiB serve 60 MiB (best fit), split: 36 MiB left, free, serve 30 MiB.
  auto* d = m.allocate(60 * kMiB);
  auto* e = m.allocate(30 * kMiB);
  EXPECT_EQ(m.segments(), 2);
  // 30 MiB fit no free block now (6 MiB and 17 MiB are left): a new segment.
  auto* f = m.allocate(30 * kMiB);
  EXPECT_EQ(m.segments(), 3);
  for (auto* x : {a, b, d, e, f}) m.free(x);
}

TEST(CachingAllocatorModel, FreedNeighboursMergeIntoOneBlock) {
  CachingAllocatorModel m;
  auto* a = m.allocate(8 * kMiB);  // a 20 MiB segment: 8 + 12 free
  auto* b = m.allocate(8 * kMiB);  // from the 12: 8 + 4 free
  EXPECT_EQ(m.segments(), 1);
  m.free(a);
  m.free(b);  // merges with a's block before it and the 4 MiB after it: 20 MiB free
  auto* c = m.allocate(18 * kMiB);
  EXPECT_EQ(m.segments(), 1);
  m.free(c);
}

TEST(CachingAllocatorModel, TheBestFittingFreeBlockIsTaken) {
  CachingAllocatorModel m;
  auto* big = m.allocate(40 * kMiB);
  auto* small = m.allocate(12 * kMiB);
  auto* keep1 = m.allocate(40 * kMiB);  // keeps the two apart
  m.free(big);
  m.free(small);
  auto* g = m.allocate(12 * kMiB);  // the 12 MiB block, not the 40 MiB one
  auto* h = m.allocate(40 * kMiB);  // so this one still fits without a new segment
  EXPECT_EQ(m.segments(), 3);
  for (auto* x : {keep1, g, h}) m.free(x);
}

TEST(CachingAllocatorModel, EmptyCacheReleasesSegmentsWithNothingAllocated) {
  CachingAllocatorModel m;
  auto* a = m.allocate(100);
  auto* b = m.allocate(30 * kMiB);
  auto* c = m.allocate(30 * kMiB);
  EXPECT_EQ(m.reserved_bytes(), 2 * kMiB + 60 * kMiB);
  m.free(c);
  m.release_cached();
  EXPECT_EQ(m.reserved_bytes(), 2 * kMiB + 30 * kMiB);
  m.free(a);
  m.free(b);
  m.release_cached();
  EXPECT_EQ(m.reserved_bytes(), 0);
  EXPECT_EQ(m.segments(), 0);
}

// sim:6 is used by no other test of this binary: its figures start at 0.
TEST(CachingAllocatorModel, SimMemoryReservedIsTheModels) {
  sim::initialize();
  const at::TensorOptions on6 = at::TensorOptions().device(sim::device(6)).dtype(at::kFloat);
  {
    const at::Tensor small = at::empty({250}, on6);        // 1,000 bytes: a 2 MiB segment
    const at::Tensor large = at::empty({1 << 20}, on6);    // 4 MiB: a 20 MiB segment
    const Stats s = sim::memory_stats(6);
    EXPECT_EQ(s.allocated_bytes, 1024 + 4 * kMiB);
    EXPECT_EQ(s.reserved_bytes, 22 * kMiB);
  }
  const Stats freed = sim::memory_stats(6);
  EXPECT_EQ(freed.allocated_bytes, 0);
  EXPECT_EQ(freed.reserved_bytes, 22 * kMiB);  // cached, as CUDA keeps it
  EXPECT_EQ(freed.reserved_peak_bytes, 22 * kMiB);
  sim::empty_cache(6);
  EXPECT_EQ(sim::memory_stats(6).reserved_bytes, 0);
  EXPECT_EQ(sim::memory_stats(6).reserved_peak_bytes, 22 * kMiB);
  sim::reset_peak(6);
  EXPECT_EQ(sim::memory_stats(6).reserved_peak_bytes, 0);
}

// CUDA counts a block's size in allocated_bytes: a large request whose block had too little left
// to split (1 MiB or less) holds the whole block (sim:7, used by no other test).
TEST(CachingAllocatorModel, ALargeRequestHoldsItsWholeBlockWhenTooLittleIsLeftToSplit) {
  sim::initialize();
  const at::TensorOptions on7 = at::TensorOptions().device(sim::device(7)).dtype(at::kByte);
  {
    const at::Tensor t = at::empty({11 * kMiB + 512}, on7);  // a 12 MiB segment, 1 MiB - 512 left
    EXPECT_EQ(sim::memory_stats(7).allocated_bytes, 12 * kMiB);
    EXPECT_EQ(sim::memory_stats(7).reserved_bytes, 12 * kMiB);
  }
  {
    const at::Tensor t = at::empty({10 * kMiB}, on7);  // from the cached 12 MiB: 2 MiB left, split
    EXPECT_EQ(sim::memory_stats(7).allocated_bytes, 10 * kMiB);
    EXPECT_EQ(sim::memory_stats(7).reserved_bytes, 12 * kMiB);
  }
  EXPECT_EQ(sim::memory_stats(7).allocated_bytes, 0);
}

// A CPU kernel's output that a sim tensor adopts is a block of the model like any other (sim:5,
// used by no other test): it takes its place in the segment the inputs opened.
TEST(CachingAllocatorModel, AnAdoptedKernelOutputIsAModelledBlock) {
  sim::initialize();
  const at::TensorOptions on5 = at::TensorOptions().device(sim::device(5)).dtype(at::kFloat);
  {
    const at::Tensor a = at::ones({1 << 16}, on5);  // 256 KiB: a 2 MiB small-pool segment
    const at::Tensor c = a + a;                       // the CPU kernel's output, adopted
    EXPECT_EQ(sim::memory_stats(5).allocated_bytes, 2 * 256 * 1024);
    EXPECT_EQ(sim::memory_stats(5).reserved_bytes, 2 * kMiB);
    const at::Tensor d = at::empty({6 * (1 << 16)}, on5);  // 1.5 MiB: the large pool
    EXPECT_EQ(sim::memory_stats(5).reserved_bytes, 22 * kMiB);
  }
  EXPECT_EQ(sim::memory_stats(5).allocated_bytes, 0);
}

}  // namespace
}  // namespace harness::memory

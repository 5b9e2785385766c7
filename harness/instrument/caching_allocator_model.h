#pragma once
// What CUDA's caching allocator reserves from the driver for a device's requests, block by block,
// as c10/cuda/CUDACachingAllocator.cpp decides it with its default configuration (no
// max_split_size, no expandable segments, no roundup_power2_divisions), for the sim device's
// memory_reserved():
//   - a request is rounded up to a multiple of 512 bytes (round_size, kMinBlockSize);
//   - requests up to 1 MiB (kSmallSize) come from the small pool, larger ones from the large;
//   - the smallest free block of the pool that fits is taken (get_free_block: best fit by size,
//     then address); none: a new segment is reserved (cudaMalloc) of 2 MiB for the small pool
//     (kSmallBuffer), 20 MiB for requests under 10 MiB (kLargeBuffer, kMinLargeAlloc), else the
//     request rounded up to 2 MiB (kRoundLarge) (get_allocation_size);
//   - a block larger than the request is split when what is left is at least 512 bytes (small
//     pool) or more than 1 MiB (large pool) (should_split); the rest is a free block;
//   - a freed block merges with free neighbours of its segment (free_block, try_merge_blocks);
//     segments stay reserved until release_cached() (torch.cuda.empty_cache(): every segment with
//     nothing allocated in it goes back).
// Streams are not modelled: every block is the one stream's (sim runs every op as it is
// launched, so a block is free for the next request as soon as it is freed). Not thread-safe:
// the memory ledger serializes each device's model.
#include <cstdint>
#include <memory>

namespace harness::memory {

class CachingAllocatorModel {
 public:
  struct Block;

  CachingAllocatorModel();
  ~CachingAllocatorModel();
  CachingAllocatorModel(const CachingAllocatorModel&) = delete;
  CachingAllocatorModel& operator=(const CachingAllocatorModel&) = delete;

  // The block that serves a request of `nbytes` (> 0); reserves a segment when no free block fits.
  Block* allocate(int64_t nbytes);
  // Back to its pool, merged with free neighbours.
  void free(Block* block);
  // torch.cuda.empty_cache(): the segments with nothing allocated go back to the driver.
  void release_cached();

  // What a block holds while allocated: the request rounded, or the whole block where what was
  // left was too small to split off (CUDA counts block->size in allocated_bytes).
  static int64_t size_of(const Block* block);
  int64_t reserved_bytes() const { return reserved_; }  // the segments' bytes
  int64_t segments() const { return segments_; }
  static int64_t rounded(int64_t nbytes);  // round_size
  static int64_t segment_size(int64_t rounded_bytes);  // get_allocation_size

 private:
  struct Pools;
  std::unique_ptr<Pools> pools_;
  int64_t reserved_ = 0;
  int64_t segments_ = 0;
  int64_t next_address_ = 0;  // where the next segment starts (addresses only order blocks)
};

}  // namespace harness::memory

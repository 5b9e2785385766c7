#pragma once
// A sim device keeps the host bytes of the blocks it frees for its next requests of the same
// size, as CUDA's caching allocator keeps a device's freed blocks instead of giving them back to
// the driver: the bytes of one step's tensors serve the next step's, with no malloc and free for
// each (host allocations cost a sim step what a CUDA step does not pay: on the resume_adam step,
// glibc's consolidation of freed chunks on every tensor-sized request). This decides only which
// host bytes serve a request: what a device holds and would reserve is counted as before, by the
// memory ledger and its caching allocator model (memory_ledger.h, caching_allocator_model.h).
//
// Both ways device bytes are made keep them: the sim device allocator's blocks
// (open_device_block) and a CPU kernel's allocations charged to a device (ChargeTo, in the
// counting CPU allocator), whichever thread frees them. A request takes kept bytes of exactly its
// size, the most recently freed first. At most kKeptDeviceBlocks blocks and kKeptDeviceBytes bytes
// a device (headers included): a freed block that would not fit gives back the oldest kept ones
// (sizes a program no longer asks for: a varying sequence length's), one larger than all the room
// is freed. torch.cuda.empty_cache()
// (memory::release_cached) gives them back. Under AddressSanitizer nothing is kept, so that a use
// after free is caught. Implemented in memory_ledger.cpp, beside the accounts.
#include <cstddef>
#include <cstdint>

namespace harness::memory {

inline constexpr size_t kKeptDeviceBlocks = 128;
inline constexpr size_t kKeptDeviceBytes = size_t{256} << 20;

struct KeptStats {
  int64_t blocks = 0;
  int64_t bytes = 0;  // headers included
};
KeptStats kept_stats(int device) noexcept;

// A sim device allocator's block of `nbytes`, modelled and charged to `device` (open_block):
// kept bytes of its size, else new ones (c10::alloc_cpu, which throws when out of memory).
// Returns where the caller's bytes begin; free_device_block frees it, keeping its bytes.
void* open_device_block(size_t nbytes, int device);
void free_device_block(void* data) noexcept;

}  // namespace harness::memory

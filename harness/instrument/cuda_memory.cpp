// Device memory on cuda: LibTorch's caching allocator keeps, per GPU, the bytes its blocks hold
// for tensors (allocated_bytes, over all pools: StatType::AGGREGATE) and their peak, which
// resetPeakStats restarts from the current level, and the bytes its segments hold reserved from
// the driver (reserved_bytes). Compiled only in builds with CUDA (HARNESS_HAVE_CUDA). Memory other
// libraries take from the driver themselves (NCCL's buffers, for one) is not counted.
#include <c10/core/Allocator.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>

#include <memory>
#include <optional>

#include "harness/instrument/memory_watch.h"

namespace harness {
namespace {

class CudaMemorySource final : public MemorySource {
 public:
  // The GPU current when read: each rank's own (communicator.cpp sets it to LOCAL_RANK).
  // Another thread may raise the peak between the two calls; that allocation then shows in the
  // next stretch's peak only if it is still held (a small window, between phase boundaries).
  void release_cached() noexcept override {
    try {
      c10::cuda::CUDACachingAllocator::emptyCache();
    } catch (...) {
    }
  }
  std::optional<MemoryLevel> read() noexcept override {
    try {
      namespace allocator = c10::cuda::CUDACachingAllocator;
      const c10::DeviceIndex device = c10::cuda::current_device();
      const c10::CachingDeviceAllocator::DeviceStats stats = allocator::getDeviceStats(device);
      const auto aggregate = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
      const c10::CachingAllocator::Stat& bytes = stats.allocated_bytes[aggregate];
      const c10::CachingAllocator::Stat& reserved = stats.reserved_bytes[aggregate];
      allocator::resetPeakStats(device);
      return MemoryLevel{bytes.current, bytes.peak, reserved.current, reserved.peak};
    } catch (...) {
      return std::nullopt;  // no allocator for the device yet (CUDA not initialised)
    }
  }
};

}  // namespace

std::unique_ptr<MemorySource> cuda_memory_source() { return std::make_unique<CudaMemorySource>(); }

}  // namespace harness

#pragma once
// The memory ledger: bytes held now and their peak, per account -- the host (CPU tensors) and
// each sim device -- kept with relaxed atomics, so that counting costs an allocation two atomic
// operations and no lock.
//
// Every counted block carries a header in front of its bytes (kBlockHeaderBytes long, so the bytes
// keep the allocator's alignment) that names its size and the account it is charged to. A block
// is charged once, when it is made, and discharged when it is freed; moving it to another account
// (charge_to_device) changes the one account it is charged to. So every byte is counted exactly
// once, wherever it ends up.
//
// Host memory is counted by a CPU allocator wrapping the one c10 had when install_host_counting()
// ran: bytes of CPU tensors allocated since then. Page-locked memory (Tensor::pin_memory(): the
// sim backend's and CUDA's host allocators) and memory that does not come from c10's allocator
// (std::vector, BLAS workspaces) are not included. CPU tensors Gloo allocates for a collective
// (all_gather's flat buffer) are host memory, also for collectives on sim tensors: Gloo runs them
// on its own threads, outside the sim backend. So are temporaries a sim op's CPU kernel allocates
// on intra-op worker threads (rare; an output made there moves to the device when adopted).
// An allocation on another thread that races a peak reset (take_peak) shows in the peak after
// the reset instead of the one before.
#include <cstddef>
#include <cstdint>

namespace c10 {
class DataPtr;
}

namespace harness::memory {

inline constexpr int kHost = -1;        // the host account; 0..kMaxDevices-1 are sim devices
inline constexpr int kMaxDevices = 64;  // as many as the sim backend allows
inline constexpr size_t kBlockHeaderBytes = 64;
// A device account holds what CUDA's caching allocator would give a request, as
// torch.cuda.memory_allocated() counts it: the block serving it in a model of that allocator
// (caching_allocator_model.h) -- its size rounded up to a multiple of 512 bytes
// (CUDACachingAllocator.cpp round_size, kMinBlockSize), or a whole block where what was left of
// it was too small to split off (more than 1 MiB must be left in the large pool). What the
// allocator would reserve from the driver for the same requests -- its 2 MiB and 20 MiB segments,
// blocks split and reused -- is Stats::reserved_bytes (torch.cuda.memory_reserved()).
inline constexpr int64_t kDeviceBlockBytes = 512;
// What `account` holds for a request of `nbytes` rounded as a block is (the host: nbytes
// itself); a large request's block may hold more (see above).
int64_t held_bytes(int account, int64_t nbytes) noexcept;

struct Stats {
  int64_t allocated_bytes = 0;  // held now
  int64_t peak_bytes = 0;       // the most held at once since the last reset (or the start)
  // A device's: what CUDA's caching allocator would hold reserved for the same requests (its
  // segments), now and at most since the same reset. The host: 0.
  int64_t reserved_bytes = 0;
  int64_t reserved_peak_bytes = 0;
};

Stats stats(int account) noexcept;
// The peak restarts from the level held now.
void reset_peak(int account) noexcept;
// stats(), then reset_peak(), as one step (the instrument's read at each phase boundary).
Stats take_peak(int account) noexcept;
// The same account as the program sees it (torch.cuda.max_memory_allocated): its own peak,
// restarted only by reset_program_peak (torch.cuda.reset_peak_memory_stats), never by the
// instrument's phase boundaries.
Stats program_stats(int account) noexcept;
void reset_program_peak(int account) noexcept;

// Counted blocks. `raw` points at kBlockHeaderBytes + nbytes bytes; open_block charges `nbytes`
// to `account` and returns where the caller's bytes begin; close_block discharges them and
// returns `raw` again (for the allocator that made it to free).
// `modelled` false: a device block enters the device's caching allocator model only when
// charge_to_device() is called for it (a CPU kernel's output adopted by a sim tensor).
void* open_block(void* raw, size_t nbytes, int account, bool modelled = true) noexcept;
void* close_block(void* data) noexcept;

// Plain charges, for bytes that are not in a counted block (a sim tensor adopting CPU bytes the
// counting allocator did not make). `nbytes` is the request; the account holds held_bytes() of it.
// charge() returns the request's block in the device's caching allocator model (nullptr for the
// host), which discharge() must be given back.
void* charge(int account, int64_t nbytes) noexcept;
void discharge(int account, int64_t nbytes, void* block) noexcept;
// torch.cuda.empty_cache() on a device: its modelled segments with nothing allocated go back.
void release_cached(int account) noexcept;

// While one is alive, the CPU allocations this thread makes are charged to `account` instead of
// the host: the sim backend runs a sim op's CPU kernel under one, so the outputs and temporaries
// that kernel allocates are device memory from the start (never a host peak).
class ChargeTo {
 public:
  explicit ChargeTo(int account) noexcept;
  ~ChargeTo();
  ChargeTo(const ChargeTo&) = delete;
  ChargeTo& operator=(const ChargeTo&) = delete;

 private:
  int previous_;
};

// Installs the counting CPU allocator (c10::SetCPUAllocator) once; later calls do nothing.
// Returns whether it is c10's CPU allocator (false: another allocator of higher priority was
// installed first, and host memory is not measured).
bool install_host_counting();
bool host_counting_installed() noexcept;

// Moves a block the counting CPU allocator made from the host account to device `device` (a CPU
// kernel's output that a sim tensor adopts), or, charged to that device already, puts it in the
// device's caching allocator model. Returns false when `ptr` is not such a block.
bool charge_to_device(const c10::DataPtr& ptr, int device) noexcept;

}  // namespace harness::memory

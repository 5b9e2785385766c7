#include "harness/instrument/memory_ledger.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/alignment.h>
#include <c10/core/impl/alloc_cpu.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <new>
#include <utility>

#include "harness/instrument/caching_allocator_model.h"
#include "harness/instrument/kept_device_bytes.h"
#include "harness/instrument/spin_lock.h"

namespace harness::memory {
namespace {

// The host bytes of a device's freed blocks, kept for its next request of the same size
// (kept_device_bytes.h). Constant-initialised, as Account is: a block freed while the process
// exits finds it still there.
class KeptBytes {
 public:
  // Bytes of exactly `nbytes` that were kept (the most recently freed first: likely still in the
  // CPU's caches); empty: none.
  c10::DataPtr take(size_t nbytes) noexcept {
    std::lock_guard<SpinLock> held(lock_);
    for (size_t i = count_; i-- > 0;) {
      if (kept_[i].nbytes != nbytes) continue;
      const Kept found = kept_[i];
      std::copy(kept_ + i + 1, kept_ + count_, kept_ + i);
      --count_;
      bytes_ -= nbytes;
      return {found.data, found.context, found.deleter, c10::Device(c10::DeviceType::CPU)};
    }
    return {};
  }

  // Keeps `bytes` (`nbytes` long) for a later take(), giving back the oldest kept ones it would
  // not fit beside; false (and `bytes` untouched): larger than all the room there is.
  bool keep(c10::DataPtr& bytes, size_t nbytes) noexcept {
#if defined(__SANITIZE_ADDRESS__)
    // Under AddressSanitizer every freed block goes back, so that a use after free is caught.
    (void)bytes, (void)nbytes;
    return false;
#else
    if (nbytes > kKeptDeviceBytes) return false;
    Kept evicted[kKeptDeviceBlocks];
    size_t n = 0;
    {
      std::lock_guard<SpinLock> held(lock_);
      while (count_ == kKeptDeviceBlocks || bytes_ + nbytes > kKeptDeviceBytes) {
        evicted[n] = kept_[n];  // the oldest first: sizes a program no longer asks for go
        bytes_ -= evicted[n].nbytes;
        --count_;
        ++n;
      }
      std::copy(kept_ + n, kept_ + n + count_, kept_);
      void* data = bytes.get();
      const c10::DeleterFnPtr deleter = bytes.get_deleter();
      void* context = bytes.release_context();
      kept_[count_++] = {nbytes, data, context, deleter};
      bytes_ += nbytes;
    }
    give_back(evicted, n);
    return true;
#endif
  }

  // Gives every kept block back to its allocator.
  void release() noexcept {
    Kept out[kKeptDeviceBlocks];
    size_t n = 0;
    {
      std::lock_guard<SpinLock> held(lock_);
      n = std::exchange(count_, 0);
      std::copy(kept_, kept_ + n, out);
      bytes_ = 0;
    }
    give_back(out, n);
  }

  KeptStats stats() noexcept {
    std::lock_guard<SpinLock> held(lock_);
    return {static_cast<int64_t>(count_), static_cast<int64_t>(bytes_)};
  }

 private:
  struct Kept {
    size_t nbytes;
    void* data;
    void* context;
    c10::DeleterFnPtr deleter;
  };
  // Outside the lock: a free may take a while.
  static void give_back(const Kept* blocks, size_t n) noexcept {
    for (size_t i = 0; i < n; ++i) blocks[i].deleter(blocks[i].context);
  }
  SpinLock lock_;
  size_t count_ = 0;
  size_t bytes_ = 0;
  Kept kept_[kKeptDeviceBlocks] = {};
};

struct alignas(64) Account {  // on cache lines of its own: devices do not contend with the host
  std::atomic<int64_t> allocated{0};
  std::atomic<int64_t> peak{0};
  std::atomic<int64_t> program_peak{0};
  // A device's: what CUDA's caching allocator would have reserved (caching_allocator_model.h),
  // changed under `lock` only.
  std::atomic<int64_t> reserved{0};
  std::atomic<int64_t> reserved_peak{0};
  std::atomic<int64_t> reserved_program_peak{0};
  SpinLock lock;  // held for a model operation (tens of nanoseconds): cheaper than a mutex
  CachingAllocatorModel* model = nullptr;  // made at the device's first block, never freed
  KeptBytes kept;  // a device's
};
Account g_accounts[kMaxDevices + 1];  // [0] is the host; constant-initialised, never destroyed

Account& account_of(int account) noexcept { return g_accounts[account + 1]; }

// In front of every counted block's bytes.
struct BlockHeader {
  size_t nbytes;
  std::atomic<int> account;
  c10::DataPtr base;  // the bytes, header included, as their allocator gave them
  void* model_block;  // a device's: its block in the caching allocator's model
};
static_assert(sizeof(BlockHeader) <= kBlockHeaderBytes, "the header must fit");
static_assert(kBlockHeaderBytes % c10::gAlignment == 0, "the bytes must keep their alignment");

BlockHeader* header_of(void* data) noexcept {
  return reinterpret_cast<BlockHeader*>(static_cast<char*>(data) - kBlockHeaderBytes);
}

thread_local int t_account = kHost;

// Frees a block that holds its bytes' DataPtr (`base`): discharged, and its bytes kept for the
// device it was charged to, or given back to their allocator.
void release_block(void* data) noexcept {
  if (data == nullptr) return;
  BlockHeader* header = header_of(data);
  const int account = header->account.load(std::memory_order_relaxed);
  const size_t total = header->nbytes + kBlockHeaderBytes;
  c10::DataPtr base = std::move(header->base);  // freed when it goes out of scope, unless kept
  close_block(data);
  if (account != kHost) account_of(account).kept.keep(base, total);
}

c10::DataPtr take_kept(int device, size_t total) noexcept {
  return account_of(device).kept.take(total);
}

// open_block over `base`'s bytes, the block holding `base` for release_block.
void* open_block_holding(c10::DataPtr base, size_t nbytes, int account, bool modelled) noexcept {
  void* data = open_block(base.get(), nbytes, account, modelled);
  header_of(data)->base = std::move(base);
  return data;
}

// Wraps the CPU allocator c10 had: each block gets a header, and is charged to the host, or to
// the account a ChargeTo names on this thread.
class CountingCpuAllocator final : public c10::Allocator {
 public:
  explicit CountingCpuAllocator(c10::Allocator* base) : base_(base) {}

  c10::DataPtr allocate(size_t nbytes) override {
    if (nbytes == 0) return base_->allocate(0);  // nothing to count (null where c10's is)
    const size_t total = nbytes + kBlockHeaderBytes;
    c10::DataPtr base = t_account == kHost ? c10::DataPtr() : take_kept(t_account, total);
    if (!base) base = base_->allocate(total);
    // A CPU kernel's allocation charged to a device (ChargeTo) is modelled in the device's
    // caching allocator only once a sim tensor adopts it (charge_to_device): its temporaries,
    // which a CUDA kernel would not allocate, never are.
    void* data = open_block_holding(std::move(base), nbytes, t_account, /*modelled=*/false);
    return {data, data, &free_block, c10::Device(c10::DeviceType::CPU)};
  }
  // Also right for a zero-byte raw allocation: c10's allocators give null for it.
  c10::DeleterFnPtr raw_deleter() const override { return &free_block; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

  static void free_block(void* data) { release_block(data); }

 private:
  c10::Allocator* base_;
};

CountingCpuAllocator* g_counting = nullptr;
std::once_flag g_install_once;

}  // namespace

Stats stats(int account) noexcept {
  const Account& a = account_of(account);
  const int64_t level = a.allocated.load(std::memory_order_relaxed);
  const int64_t reserved = a.reserved.load(std::memory_order_relaxed);
  return {level, std::max(level, a.peak.load(std::memory_order_relaxed)), reserved,
          std::max(reserved, a.reserved_peak.load(std::memory_order_relaxed))};
}

void reset_peak(int account) noexcept { (void)take_peak(account); }

Stats take_peak(int account) noexcept {
  Account& a = account_of(account);
  const int64_t level = a.allocated.load(std::memory_order_relaxed);
  const int64_t reserved = a.reserved.load(std::memory_order_relaxed);
  return {level, std::max(level, a.peak.exchange(level, std::memory_order_relaxed)), reserved,
          std::max(reserved, a.reserved_peak.exchange(reserved, std::memory_order_relaxed))};
}

Stats program_stats(int account) noexcept {
  const Account& a = account_of(account);
  const int64_t level = a.allocated.load(std::memory_order_relaxed);
  const int64_t reserved = a.reserved.load(std::memory_order_relaxed);
  return {level, std::max(level, a.program_peak.load(std::memory_order_relaxed)), reserved,
          std::max(reserved, a.reserved_program_peak.load(std::memory_order_relaxed))};
}

void reset_program_peak(int account) noexcept {
  Account& a = account_of(account);
  a.program_peak.store(a.allocated.load(std::memory_order_relaxed), std::memory_order_relaxed);
  a.reserved_program_peak.store(a.reserved.load(std::memory_order_relaxed),
                                std::memory_order_relaxed);
}

namespace {
void raise_to(std::atomic<int64_t>& peak, int64_t level) noexcept {
  int64_t seen = peak.load(std::memory_order_relaxed);
  while (level > seen && !peak.compare_exchange_weak(seen, level, std::memory_order_relaxed)) {
  }
}
}  // namespace

int64_t held_bytes(int account, int64_t nbytes) noexcept {
  if (account == kHost || nbytes <= 0) return nbytes;
  return (nbytes + kDeviceBlockBytes - 1) / kDeviceBlockBytes * kDeviceBlockBytes;
}

namespace {

// The caching allocator's block for a device request (nullptr: the host, an empty request, or
// no memory left to model it with).
void* model_allocate(Account& a, int64_t nbytes) noexcept {
  try {
    std::lock_guard<SpinLock> held(a.lock);
    if (a.model == nullptr) a.model = new CachingAllocatorModel();
    void* block = a.model->allocate(nbytes);
    const int64_t reserved = a.model->reserved_bytes();
    a.reserved.store(reserved, std::memory_order_relaxed);
    raise_to(a.reserved_peak, reserved);
    raise_to(a.reserved_program_peak, reserved);
    return block;
  } catch (...) {
    return nullptr;
  }
}

void model_free(Account& a, void* block) noexcept {
  std::lock_guard<SpinLock> held(a.lock);
  a.model->free(static_cast<CachingAllocatorModel::Block*>(block));
}

}  // namespace

// What a request holds: its block's size in the device's model (CUDA's allocated_bytes), or,
// without a block, the request rounded (held_bytes).
int64_t held_by(int account, int64_t nbytes, const void* block) noexcept {
  return block != nullptr
             ? CachingAllocatorModel::size_of(static_cast<const CachingAllocatorModel::Block*>(block))
             : held_bytes(account, nbytes);
}

namespace {

void* charge_block(int account, int64_t nbytes, bool modelled) noexcept {
  Account& a = account_of(account);
  void* block = modelled && account != kHost && nbytes > 0 ? model_allocate(a, nbytes) : nullptr;
  nbytes = held_by(account, nbytes, block);
  const int64_t level = a.allocated.fetch_add(nbytes, std::memory_order_relaxed) + nbytes;
  raise_to(a.peak, level);
  raise_to(a.program_peak, level);
  return block;
}

// A block already charged to `device` unmodelled, now modelled: the account holds its block's
// size from now on instead of the rounded request.
void* model_charged(int device, int64_t nbytes) noexcept {
  Account& a = account_of(device);
  void* block = model_allocate(a, nbytes);
  if (block == nullptr) return nullptr;
  const int64_t more = held_by(device, nbytes, block) - held_bytes(device, nbytes);
  if (more != 0) {
    const int64_t level = a.allocated.fetch_add(more, std::memory_order_relaxed) + more;
    raise_to(a.peak, level);
    raise_to(a.program_peak, level);
  }
  return block;
}

}  // namespace

void* charge(int account, int64_t nbytes) noexcept {
  return charge_block(account, nbytes, /*modelled=*/true);
}

void discharge(int account, int64_t nbytes, void* block) noexcept {
  Account& a = account_of(account);
  nbytes = held_by(account, nbytes, block);  // before the model frees (and may merge) it
  if (block != nullptr) model_free(a, block);
  a.allocated.fetch_sub(nbytes, std::memory_order_relaxed);
}

void release_cached(int account) noexcept {
  Account& a = account_of(account);
  a.kept.release();
  std::lock_guard<SpinLock> held(a.lock);
  if (a.model == nullptr) return;
  a.model->release_cached();
  a.reserved.store(a.model->reserved_bytes(), std::memory_order_relaxed);
}

KeptStats kept_stats(int device) noexcept { return account_of(device).kept.stats(); }

void* open_device_block(size_t nbytes, int device) {
  const size_t total = nbytes + kBlockHeaderBytes;
  c10::DataPtr base = take_kept(device, total);
  if (!base) {
    void* raw = c10::alloc_cpu(total);
    base = c10::DataPtr(raw, raw, &c10::free_cpu, c10::Device(c10::DeviceType::CPU));
  }
  return open_block_holding(std::move(base), nbytes, device, /*modelled=*/true);
}

void free_device_block(void* data) noexcept { release_block(data); }

void* open_block(void* raw, size_t nbytes, int account, bool modelled) noexcept {
  BlockHeader* header = new (raw) BlockHeader{nbytes, {account}, {}, nullptr};
  header->model_block = charge_block(account, static_cast<int64_t>(nbytes), modelled);
  return static_cast<char*>(raw) + kBlockHeaderBytes;
}

void* close_block(void* data) noexcept {
  BlockHeader* header = header_of(data);
  discharge(header->account.load(std::memory_order_relaxed), static_cast<int64_t>(header->nbytes),
            header->model_block);
  header->~BlockHeader();
  return header;
}

ChargeTo::ChargeTo(int account) noexcept : previous_(t_account) { t_account = account; }
ChargeTo::~ChargeTo() { t_account = previous_; }

bool install_host_counting() {
  std::call_once(g_install_once, [] {
    // Leaked: CPU tensors are freed through it until the process ends.
    g_counting = new CountingCpuAllocator(c10::GetCPUAllocator());
    c10::SetCPUAllocator(g_counting);
  });
  return host_counting_installed();
}

bool host_counting_installed() noexcept {
  return g_counting != nullptr && c10::GetCPUAllocator() == g_counting;
}

bool charge_to_device(const c10::DataPtr& ptr, int device) noexcept {
  if (ptr.get_deleter() != &CountingCpuAllocator::free_block || ptr.get() == nullptr) {
    return false;
  }
  BlockHeader* header = header_of(ptr.get());
  int expected = kHost;
  if (header->account.compare_exchange_strong(expected, device)) {
    discharge(kHost, static_cast<int64_t>(header->nbytes), nullptr);
    header->model_block = charge(device, static_cast<int64_t>(header->nbytes));
  } else if (expected == device && header->model_block == nullptr) {
    // A CPU kernel's output, charged to the device when allocated: a device tensor now.
    header->model_block = model_charged(device, static_cast<int64_t>(header->nbytes));
  }
  return true;
}

}  // namespace harness::memory

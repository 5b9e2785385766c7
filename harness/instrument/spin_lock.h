#pragma once
// SpinLock: a lock for a few tens of nanoseconds of work, taken on every counted event and
// device allocation. Uncontended, it costs one atomic exchange and one store, where a mutex costs
// two atomic read-modify-writes and a call into libc. A thread that finds it taken spins a while,
// then yields, so that a holder descheduled on a busy machine gets the core back.
#include <atomic>
#include <thread>

namespace harness {

class SpinLock {
 public:
  // Inline where it is free (the compiler would not always inline the loop into its callers);
  // the wait, out of line.
  void lock() noexcept {
    if (__builtin_expect(!taken_.exchange(true, std::memory_order_acquire), 1)) return;
    wait_and_lock();
  }
  void unlock() noexcept { taken_.store(false, std::memory_order_release); }

 private:
  __attribute__((noinline)) void wait_and_lock() noexcept {
    do {
      for (int spins = 0; taken_.load(std::memory_order_relaxed); ++spins) {
        if (spins >= kSpinsBeforeYield) std::this_thread::yield();
      }
    } while (taken_.exchange(true, std::memory_order_acquire));
  }

  static constexpr int kSpinsBeforeYield = 64;
  std::atomic<bool> taken_{false};
};

}  // namespace harness

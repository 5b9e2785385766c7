#pragma once
// Phase: an RAII scope naming what the program is doing ("train.forward", "optimizer.step", ...).
//
// Every counted event is attributed to the innermost open phase. Where NVTX is available, a phase
// is also an NVTX range in the "harness" domain, so Nsight Systems shows the same phases.
//
// Phases form one process-wide stack, not a per-thread one: the autograd engine runs backward ops
// on a device thread while the main thread waits inside "train.backward", and those ops belong to
// that phase. Phases are opened and closed by the thread that drives the run, never concurrently.
// Names must be string literals (or otherwise outlive the scope): nothing is copied on this path.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

namespace harness {

// The phase name used for events that happen outside every phase.
inline constexpr const char* kNoPhase = "(none)";

class Phase {
 public:
  explicit Phase(const char* name) noexcept;
  ~Phase();

  Phase(const Phase&) = delete;
  Phase& operator=(const Phase&) = delete;
  static void* operator new(std::size_t) = delete;  // a scope, never a heap object

  // The innermost open phase, or kNoPhase ("(none)") when none is open.
  static const char* current_name() noexcept;

  // The innermost open phase's name and the serial number of its scope: each Phase scope gets
  // one of its own, never reused (0: no phase open). Two events with the same serial happened in
  // the same scope, so a name looked up once can be reused without comparing text.
  struct Current {
    const char* name;
    uint64_t serial;
  };
  static Current current() noexcept;  // inline below: read on every counted event

 private:
  const char* name_;
  const Phase* parent_;
  uint64_t serial_;
};

namespace phase_stack {
// The innermost open phase: one stack for the process (`top`), or one per thread
// (set_phases_per_thread; phase_scope.h), whose top this thread reads out of line (a thread_local
// of phase.cpp).
extern std::atomic<const Phase*> top;
extern std::atomic<bool> per_thread;
const Phase* this_threads_top() noexcept;
inline const Phase* innermost() noexcept {
  return per_thread.load(std::memory_order_relaxed) ? this_threads_top() : top.load();
}
}  // namespace phase_stack

inline Phase::Current Phase::current() noexcept {
  const Phase* top = phase_stack::innermost();
  return top ? Current{top->name_, top->serial_} : Current{kNoPhase, 0};
}

// Whether this build emits phases as NVTX ranges (built with NVTX's headers).
bool phases_are_nvtx_ranges() noexcept;

// An NVTX range in the "harness" domain that is not a phase (nothing is attributed to it): what a
// timeline needs to tell apart what phases repeat, a variant ("resume_adam/fresh/foreach") or a
// measured step ("step 13", as torch.profiler's ProfilerStep#13). The name is copied by NVTX when
// the range opens. Costs nothing in a build without NVTX.
class NvtxRange {
 public:
  explicit NvtxRange(const std::string& name) noexcept;
  ~NvtxRange();
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};

// Observers of phase boundaries: up to kMaxPhaseListeners at once, added and removed by the
// thread that drives the run. Today at most four: the trace writer (--trace), the CUPTI collector
// (cuda), the memory watch (measured windows) and the phase clock (measured steps). Each slot
// costs every Phase scope an atomic load, so the array is no larger than that.
class PhaseListener {
 public:
  virtual ~PhaseListener() = default;
  virtual void on_phase_begin(const char* name) noexcept = 0;
  virtual void on_phase_end(const char* name) noexcept = 0;
};
inline constexpr int kMaxPhaseListeners = 4;
void add_phase_listener(PhaseListener* listener);  // throws std::length_error when full
void remove_phase_listener(PhaseListener* listener) noexcept;

}  // namespace harness

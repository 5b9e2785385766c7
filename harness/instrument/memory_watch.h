#pragma once
// MemoryWatch: device and host memory by phase, over an instrument's measured windows.
//
// A MemorySource reads one pool of memory: the level now and the peak since its previous read,
// after which the peak restarts from the level (as CUDA's resetPeakStats does). While started,
// the watch reads its sources at every phase boundary; the peak of the stretch since the previous
// boundary raises the peak of every phase open during it (a nested phase's memory is also its
// parents'), and a phase that ends records the level at its end. A phase's peak starts at the
// level when it began, so a phase that allocates nothing has the level as its peak. The phase
// that was innermost when the watch started counts as open from then; kNoPhase and
// kUncountedPhase get no figures of their own (the window has them).
//
// Figures go to Counts::phases[name].memory and, for the window as a whole (start to stop,
// outside phases included), to Counts::memory. A source that is absent or cannot be read leaves
// its figures unset (reported as null). The watch resets its sources' peaks: nothing else should
// rely on them while it runs.
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "harness/instrument/counts.h"
#include "harness/instrument/instrument.h"
#include "harness/instrument/phase.h"

namespace harness {

struct MemoryLevel {
  int64_t allocated = 0;
  int64_t peak = 0;  // since the previous read
  // What the device's allocator holds reserved (its segments), now and at most since the
  // previous read; unset where the source does not know (the host).
  std::optional<int64_t> reserved, reserved_peak;
};

class MemorySource {
 public:
  virtual ~MemorySource() = default;
  // The level and the peak since the previous read; the peak then restarts from the level.
  // std::nullopt: it cannot be read now.
  virtual std::optional<MemoryLevel> read() noexcept = 0;
  // Gives the allocator's cached, unused segments back (empty_cache); nothing where it has none.
  virtual void release_cached() noexcept {}
};

// CPU tensors (memory_ledger.h); nullptr where the counting CPU allocator is not c10's.
std::unique_ptr<MemorySource> host_memory_source();
// The rank's own sim device (sim::own_device(), looked up at every read).
std::unique_ptr<MemorySource> sim_memory_source();
// The current CUDA device, from LibTorch's caching allocator (cuda_memory.cpp: defined only in
// builds with CUDA, where instrument.cpp calls it).
std::unique_ptr<MemorySource> cuda_memory_source();

class MemoryWatch final : public PhaseListener {
 public:
  // Either source may be nullptr (not measured).
  MemoryWatch(std::unique_ptr<MemorySource> device, std::unique_ptr<MemorySource> host);
  ~MemoryWatch() override;
  MemoryWatch(const MemoryWatch&) = delete;
  MemoryWatch& operator=(const MemoryWatch&) = delete;

  // Listens to phase boundaries until stop(); figures accumulate until take_into().
  void start();
  void stop() noexcept;
  // Merges what it saw since the last take into `counts` (as the later window) and forgets it.
  void take_into(Counts& counts);

  void on_phase_begin(const char* name) noexcept override;
  void on_phase_end(const char* name) noexcept override;
  // Every read (each phase boundary while started) also goes to `trace` as the memory timeline:
  // the level then and the peak since the previous read, of each source. nullptr: none.
  void attach_trace(TraceRecorder* trace);
  void release_cached();  // the device source's

 private:
  struct Levels {
    std::optional<MemoryLevel> device, host;
    std::optional<MemoryLevel> reserved;  // the device's reserved bytes, as a level of its own
  };
  struct Open {
    const char* name;
    MemoryCounts memory;
  };
  Levels read_and_raise();  // requires mu_: reads both sources, raises every open phase's peak
  void trace_levels(const Levels& now);  // requires mu_: the timeline's record of this read
  void record(const Open& phase, const Levels& at_end);  // requires mu_

  std::unique_ptr<MemorySource> device_, host_;
  TraceRecorder* trace_ = nullptr;
  std::mutex mu_;
  bool running_ = false;
  std::vector<Open> open_;  // innermost last
  std::map<std::string, MemoryCounts> phases_;
  MemoryCounts window_;
};

// `inner` with a MemoryWatch over its windows: start() and stop() also start and stop the
// watch, take() adds its figures to inner's counts.
std::unique_ptr<Instrument> with_memory(std::unique_ptr<Instrument> inner,
                                        std::unique_ptr<MemorySource> device,
                                        std::unique_ptr<MemorySource> host);

}  // namespace harness

#pragma once
// Instrument: what counts events on the chosen device, switched on for measured windows.
//   sim  -> DispatcherInstrument: the sim backend reports each op, copy and sync as it happens.
//   cpu  -> DispatcherInstrument as well: nothing crosses a host-device boundary, so copies and
//           syncs are truly zero; launches are not measured (reported as null).
//   cuda -> CUPTI (cupti/cupti_collector.h) where the build has it; where CUPTI cannot run it is
//           reported as unavailable or degraded, never as zeros.
// make_instrument() also installs the counting CPU allocator and wraps the instrument in a
// MemoryWatch (memory_watch.h): device memory by phase from the sim ledger or CUDA's caching
// allocator (none on cpu: null), host memory from the counting CPU allocator.
#include <memory>
#include <optional>
#include <string>

#include "harness/instrument/collector.h"
#include "harness/instrument/trace.h"
#include "harness/device_kind.h"

namespace harness {

class Instrument {
 public:
  virtual ~Instrument() = default;
  virtual std::string name() const = 0;
  // "ok", or why the instrument is degraded or unavailable.
  virtual std::string status() const = 0;
  // The version of what does the counting where it has one (CUPTI's API version), else "".
  virtual std::string version() const { return ""; }
  virtual bool available() const = 0;
  // Whether launch counts are measured (false: reported as null).
  virtual bool measures_launches() const = 0;

  // Also put the events it sees on this timeline (nullptr: off).
  virtual void attach_trace(TraceRecorder* trace) { (void)trace; }

  // Waits until the device has finished the work issued so far, without counting the wait, so
  // that a step's time covers its device work (a no-op where the host already waited: sim, cpu).
  virtual void drain() {}
  // The device allocator's cached segments with nothing allocated go back (empty_cache), so that
  // what the next variant reserves starts from what is held, as in a fresh process.
  virtual void release_cached_memory() {}

  // The host time waited in syncs in the counts not yet taken, where the instrument knows it while
  // it counts (sim, cpu; every sync timed); empty elsewhere (cuda: CUPTI's records are read in
  // take()). StepWindow takes each step's sync wait from it.
  virtual std::optional<int64_t> sync_wait_so_far() const { return std::nullopt; }

  // Count events between start() and stop(); counts accumulate until take().
  virtual void start() = 0;
  virtual void stop() = 0;
  virtual Counts take() = 0;
};

// CountingMode::NvtxOnly (bench --nvtx-only) leaves CUPTI alone for a profiler that wants it (nsys):
// nothing is counted (counts are null, never zeros) and phases stay NVTX ranges.
enum class CountingMode { On, NvtxOnly };

std::unique_ptr<Instrument> make_instrument(DeviceKind kind,
                                            CountingMode counting = CountingMode::On);

// RAII: instrument.start() ... instrument.stop().
class Counting {
 public:
  explicit Counting(Instrument& instrument) : instrument_(instrument) { instrument_.start(); }
  ~Counting() { instrument_.stop(); }
  Counting(const Counting&) = delete;
  Counting& operator=(const Counting&) = delete;

 private:
  Instrument& instrument_;
};

}  // namespace harness

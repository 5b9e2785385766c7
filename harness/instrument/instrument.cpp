// The one place that knows which instruments this build has (#ifdefs stay here).
#include "harness/instrument/instrument.h"

#include "harness/build_config.h"
#include "harness/instrument/memory_ledger.h"
#include "harness/instrument/memory_watch.h"

#if HARNESS_HAVE_CUPTI
#include "harness/instrument/cupti/cupti_collector.h"
#endif

namespace harness {
namespace {

class DispatcherInstrument final : public Instrument {
 public:
  explicit DispatcherInstrument(bool counts_launches) : counts_launches_(counts_launches) {}
  std::string name() const override { return counts_launches_ ? "dispatcher" : "ops-only"; }
  std::string status() const override { return "ok"; }
  bool available() const override { return true; }
  bool measures_launches() const override { return counts_launches_; }
  void attach_trace(TraceRecorder* trace) override { collector_.set_trace(trace); }
  std::optional<int64_t> sync_wait_so_far() const override {
    const EventCollector::SyncWait w = collector_.sync_wait();
    if (!w.complete) return std::nullopt;
    return w.ns;
  }
  void start() override { scope_.emplace(collector_); }
  void stop() override { scope_.reset(); }
  Counts take() override {
    Counts c = collector_.snapshot();
    collector_.clear();
    return c;
  }

 private:
  bool counts_launches_;
  EventCollector collector_;
  std::optional<ScopedCollection> scope_;
};

// Counts nothing, and says why: its counts are reported as null.
class UnavailableInstrument final : public Instrument {
 public:
  UnavailableInstrument(std::string name, std::string status)
      : name_(std::move(name)), status_(std::move(status)) {}
  std::string name() const override { return name_; }
  std::string status() const override { return status_; }
  bool available() const override { return false; }
  bool measures_launches() const override { return false; }
  void start() override {}
  void stop() override {}
  Counts take() override { return {}; }

 private:
  std::string name_;
  std::string status_;
};

std::unique_ptr<Instrument> make_event_instrument(DeviceKind kind, CountingMode counting) {
  if (counting == CountingMode::NvtxOnly) {
    return std::make_unique<UnavailableInstrument>(
        "none", "off: --nvtx-only (CUPTI is left to the profiler; phases are still NVTX ranges)");
  }
  switch (kind) {
    case DeviceKind::Sim: return std::make_unique<DispatcherInstrument>(true);
    case DeviceKind::Cpu: return std::make_unique<DispatcherInstrument>(false);
    case DeviceKind::Cuda: break;
  }
#if HARNESS_HAVE_CUPTI
  return cupti::make_cupti_instrument();
#else
  return std::make_unique<UnavailableInstrument>("cupti",
                                                 "unavailable: this build has no CUPTI collector");
#endif
}

// The device's memory: none on cpu (memory.* are null there).
std::unique_ptr<MemorySource> device_memory_source(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::Sim: return sim_memory_source();
    case DeviceKind::Cpu: return nullptr;
    case DeviceKind::Cuda: break;
  }
#if HARNESS_HAVE_CUDA
  return cuda_memory_source();
#else
  return nullptr;
#endif
}

}  // namespace

std::unique_ptr<Instrument> make_instrument(DeviceKind kind, CountingMode counting) {
  memory::install_host_counting();  // before the workload's first CPU tensor
  return with_memory(make_event_instrument(kind, counting), device_memory_source(kind),
                     host_memory_source());
}

}  // namespace harness

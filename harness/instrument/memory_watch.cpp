#include "harness/instrument/memory_watch.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "harness/instrument/memory_ledger.h"
#include "harness/instrument/sim/sim_device.h"

namespace harness {
namespace {

// An account of the memory ledger: the host, or a sim device.
class LedgerSource final : public MemorySource {
 public:
  explicit LedgerSource(int (*account)() noexcept) : account_(account) {}
  void release_cached() noexcept override {
    const int account = account_();
    if (account != memory::kHost) memory::release_cached(account);
  }
  std::optional<MemoryLevel> read() noexcept override {
    const int account = account_();
    const memory::Stats s = memory::take_peak(account);
    MemoryLevel level{s.allocated_bytes, s.peak_bytes, std::nullopt, std::nullopt};
    if (account != memory::kHost) {
      level.reserved = s.reserved_bytes;
      level.reserved_peak = s.reserved_peak_bytes;
    }
    return level;
  }

 private:
  int (*account_)() noexcept;
};

int host_account() noexcept { return memory::kHost; }

void raise(MemoryTally& tally, const std::optional<MemoryLevel>& level) {
  if (level) tally.peak = std::max(tally.peak.value_or(level->peak), level->peak);
}

// Figures of something that begins now: its peak so far is the level.
MemoryTally starting_at(const std::optional<MemoryLevel>& level) {
  MemoryTally t;
  if (level) t.peak = level->allocated;
  return t;
}

MemoryTally ending_at(MemoryTally t, const std::optional<MemoryLevel>& level) {
  if (level) t.allocated = level->allocated;
  return t;
}

// The device's reserved bytes as a level of their own (unset where the source has none).
std::optional<MemoryLevel> reserved_of(const std::optional<MemoryLevel>& device) {
  if (!device || !device->reserved) return std::nullopt;
  return MemoryLevel{*device->reserved, device->reserved_peak.value_or(*device->reserved),
                     std::nullopt, std::nullopt};
}

bool counted(const char* phase) {
  return std::strcmp(phase, kNoPhase) != 0 && std::strcmp(phase, kUncountedPhase) != 0;
}

}  // namespace

std::unique_ptr<MemorySource> host_memory_source() {
  if (!memory::host_counting_installed()) return nullptr;
  return std::make_unique<LedgerSource>(&host_account);
}

std::unique_ptr<MemorySource> sim_memory_source() {
  return std::make_unique<LedgerSource>(&sim::own_device);
}

MemoryWatch::MemoryWatch(std::unique_ptr<MemorySource> device, std::unique_ptr<MemorySource> host)
    : device_(std::move(device)), host_(std::move(host)) {}

MemoryWatch::~MemoryWatch() { stop(); }

MemoryWatch::Levels MemoryWatch::read_and_raise() {
  Levels now;
  if (device_) now.device = device_->read();
  if (host_) now.host = host_->read();
  now.reserved = reserved_of(now.device);
  for (Open& o : open_) {
    raise(o.memory.device, now.device);
    raise(o.memory.host, now.host);
    raise(o.memory.reserved, now.reserved);
  }
  raise(window_.device, now.device);
  raise(window_.host, now.host);
  raise(window_.reserved, now.reserved);
  trace_levels(now);
  return now;
}

void MemoryWatch::trace_levels(const Levels& now) {
  if (trace_ == nullptr) return;
  const int64_t at = trace_clock_ns();
  if (now.device) {
    trace_->add_memory(true, at, now.device->allocated, now.device->peak, now.device->reserved);
  }
  if (now.host) trace_->add_memory(false, at, now.host->allocated, now.host->peak, std::nullopt);
}

void MemoryWatch::release_cached() {
  std::lock_guard<std::mutex> lock(mu_);
  if (device_) device_->release_cached();
}

void MemoryWatch::attach_trace(TraceRecorder* trace) {
  std::lock_guard<std::mutex> lock(mu_);
  trace_ = trace;
}

void MemoryWatch::record(const Open& phase, const Levels& at_end) {
  if (!counted(phase.name)) return;
  phases_[phase.name].add({ending_at(phase.memory.device, at_end.device),
                           ending_at(phase.memory.host, at_end.host),
                           ending_at(phase.memory.reserved, at_end.reserved)});
}

void MemoryWatch::start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (running_) return;
  Levels now;  // what came before the window is not its peak
  if (device_) now.device = device_->read();
  if (host_) now.host = host_->read();
  now.reserved = reserved_of(now.device);
  Levels at_start = now;  // the timeline starts at the level, as the window's peak does
  for (std::optional<MemoryLevel>* level : {&at_start.device, &at_start.host}) {
    if (*level) (*level)->peak = (*level)->allocated;
  }
  trace_levels(at_start);
  const MemoryCounts begins{starting_at(now.device), starting_at(now.host),
                            starting_at(now.reserved)};
  window_.add(begins);
  open_.assign(1, {Phase::current_name(), begins});
  add_phase_listener(this);
  running_ = true;
}

void MemoryWatch::stop() noexcept {
  try {
    std::lock_guard<std::mutex> lock(mu_);
    if (!running_) return;
    remove_phase_listener(this);
    running_ = false;
    const Levels now = read_and_raise();
    for (auto it = open_.rbegin(); it != open_.rend(); ++it) record(*it, now);  // still open
    open_.clear();
    window_.device = ending_at(window_.device, now.device);
    window_.host = ending_at(window_.host, now.host);
    window_.reserved = ending_at(window_.reserved, now.reserved);
  } catch (...) {
    // Out of memory: this window's figures are incomplete.
  }
}

void MemoryWatch::take_into(Counts& counts) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [phase, memory] : phases_) counts.phases[phase].memory.add(memory);
  counts.memory.add(window_);
  phases_.clear();
  window_ = {};
}

void MemoryWatch::on_phase_begin(const char* name) noexcept {
  try {
    std::lock_guard<std::mutex> lock(mu_);
    if (!running_) return;
    const Levels now = read_and_raise();
    open_.push_back(
        {name, {starting_at(now.device), starting_at(now.host), starting_at(now.reserved)}});
  } catch (...) {
  }
}

void MemoryWatch::on_phase_end(const char* name) noexcept {
  try {
    std::lock_guard<std::mutex> lock(mu_);
    if (!running_) return;
    const Levels now = read_and_raise();
    // A phase that began before the window (and was not its innermost) is not on the stack.
    if (open_.empty() || std::strcmp(open_.back().name, name) != 0) return;
    const Open ended = open_.back();
    open_.pop_back();
    record(ended, now);
  } catch (...) {
  }
}

namespace {

class MemoryInstrument final : public Instrument {
 public:
  MemoryInstrument(std::unique_ptr<Instrument> inner, std::unique_ptr<MemorySource> device,
                   std::unique_ptr<MemorySource> host)
      : inner_(std::move(inner)), watch_(std::move(device), std::move(host)) {}
  std::string name() const override { return inner_->name(); }
  std::string status() const override { return inner_->status(); }
  std::string version() const override { return inner_->version(); }
  bool available() const override { return inner_->available(); }
  bool measures_launches() const override { return inner_->measures_launches(); }
  void attach_trace(TraceRecorder* trace) override {
    inner_->attach_trace(trace);
    watch_.attach_trace(trace);
  }
  void drain() override { inner_->drain(); }
  void release_cached_memory() override {
    inner_->release_cached_memory();
    watch_.release_cached();
  }
  std::optional<int64_t> sync_wait_so_far() const override { return inner_->sync_wait_so_far(); }
  void start() override {
    inner_->start();
    watch_.start();
  }
  void stop() override {
    watch_.stop();
    inner_->stop();
  }
  Counts take() override {
    Counts counts = inner_->take();
    watch_.take_into(counts);
    return counts;
  }

 private:
  std::unique_ptr<Instrument> inner_;
  MemoryWatch watch_;  // stopped before inner_ goes
};

}  // namespace

std::unique_ptr<Instrument> with_memory(std::unique_ptr<Instrument> inner,
                                        std::unique_ptr<MemorySource> device,
                                        std::unique_ptr<MemorySource> host) {
  return std::make_unique<MemoryInstrument>(std::move(inner), std::move(device), std::move(host));
}

}  // namespace harness

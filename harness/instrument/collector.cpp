#include "harness/instrument/collector.h"

#include <string>

#include "harness/instrument/phase.h"

namespace harness {
namespace {
std::atomic<EventCollector*> g_active{nullptr};
}  // namespace

PhaseCounts& EventCollector::current_phase_counts() {
  return counts_.phases[Phase::current_name()];
}

void EventCollector::record_launch(std::string_view op) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& c = current_phase_counts();
  c.launches += 1;
  c.launches_by_op[std::string(op)] += 1;
}

void EventCollector::record_copy(CopyKind kind, int64_t bytes, bool host_pinned) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& tally = current_phase_counts().copies(kind);
  tally.count += 1;
  tally.bytes += bytes;
  if (host_pinned) tally.pinned += 1;
}

void EventCollector::record_sync(std::string_view op, std::string_view reason) {
  std::lock_guard<std::mutex> lock(mu_);
  const char* phase = Phase::current_name();
  counts_.phases[phase].syncs += 1;
  counts_.sync_sites[{phase, std::string(op), std::string(reason)}] += 1;
}

void EventCollector::record_collective(std::string_view name, int64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& tally = current_phase_counts().collectives[std::string(name)];
  tally.count += 1;
  tally.bytes += bytes;
}

Counts EventCollector::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counts_;
}

void EventCollector::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  counts_ = Counts{};
}

ScopedCollection::ScopedCollection(EventCollector& collector) noexcept
    : previous_(g_active.exchange(&collector)) {}

ScopedCollection::~ScopedCollection() { g_active.store(previous_); }

namespace events {
// Recording allocates (map nodes, strings); an allocation failure is not worth aborting a
// measurement for, so it is swallowed here and the count is lost.
#define HARNESS_FORWARD_EVENT(call)                                      \
  EventCollector* c = g_active.load(std::memory_order_acquire);         \
  if (c == nullptr) return;                                             \
  try {                                                                 \
    c->call;                                                            \
  } catch (...) {                                                       \
  }

void record_launch(std::string_view op) noexcept { HARNESS_FORWARD_EVENT(record_launch(op)); }
void record_copy(CopyKind kind, int64_t bytes, bool host_pinned) noexcept {
  HARNESS_FORWARD_EVENT(record_copy(kind, bytes, host_pinned));
}
void record_sync(std::string_view op, std::string_view reason) noexcept {
  HARNESS_FORWARD_EVENT(record_sync(op, reason));
}
void record_collective(std::string_view name, int64_t bytes) noexcept {
  HARNESS_FORWARD_EVENT(record_collective(name, bytes));
}
#undef HARNESS_FORWARD_EVENT
bool collecting() noexcept { return g_active.load(std::memory_order_acquire) != nullptr; }
}  // namespace events

}  // namespace harness

#include "harness/instrument/collector.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>

#include "harness/instrument/phase.h"
#include "harness/instrument/trace.h"

namespace harness {
namespace {
// The collectors counting now, each in a slot of its own: every event goes to each of them, so a
// session started inside another (harness_sim.count() in a program that `run` counts) counts
// what happens while it is on, and so does the outer one. Slots [0, g_slots_in_use) are scanned;
// they change under g_slots_mu only.
std::atomic<EventCollector*> g_active[kMaxActiveCollectors];
std::atomic<int> g_slots_in_use{0};
std::mutex g_slots_mu;

// Whether a name kept by the collector still reads as `text` (an address found again may have
// been reused for other text). Inline: the hot path compares a few bytes, no call.
inline bool same_text(const std::string& kept, std::string_view text) noexcept {
  return kept.size() == text.size() && std::memcmp(kept.data(), text.data(), text.size()) == 0;
}
}  // namespace

PhaseCounts& EventCollector::current_phase_counts(Phase::Current* current) {
  const Phase::Current phase = Phase::current();
  if (current) *current = phase;
  if (phase.serial == last_phase_serial_) return *last_phase_counts_;
  auto it = phase_slots_.find(phase.name);
  if (it == phase_slots_.end() || *it->second.name != phase.name) {
    auto node = counts_.phases.try_emplace(phase.name).first;  // std::map nodes never move
    it = phase_slots_.insert_or_assign(phase.name, PhaseSlot{&node->first, &node->second}).first;
  }
  last_phase_serial_ = phase.serial;
  last_phase_counts_ = it->second.counts;
  return *last_phase_counts_;
}

int64_t& EventCollector::launch_slot(PhaseCounts& c, std::string_view op) {
  // The hot path (a step's ops, again each step) finds the slot among the recent ones by the
  // addresses of the phase's counts and the op's name; else the map has it; a new op, or an
  // address reused for other text, takes a new node.
  const auto op_address = reinterpret_cast<uintptr_t>(op.data());
  const auto counts_address = reinterpret_cast<uintptr_t>(&c);
  RecentLaunch& recent =
      recent_launches_[((op_address >> 3) ^ (counts_address >> 4)) % kRecentLaunches];
  if (recent.counts == &c && recent.op == op.data() && same_text(*recent.slot.name, op)) {
    return *recent.slot.count;
  }
  const std::pair<const void*, const void*> key{&c, op.data()};
  auto it = op_slots_.find(key);
  if (it == op_slots_.end() || !same_text(*it->second.name, op)) {
    auto node = c.launches_by_op.try_emplace(std::string(op)).first;
    it = op_slots_.insert_or_assign(key, OpSlot{&node->first, &node->second}).first;
  }
  recent = {&c, op.data(), it->second};
  return *recent.slot.count;
}

void EventCollector::record_launch(std::string_view op, int64_t begin_ns) {
  {
    std::lock_guard<SpinLock> lock(mu_);
    PhaseCounts& counts = current_phase_counts();
    counts.launches += 1;
    launch_slot(counts, op) += 1;
  }
  if (trace_) {
    // The sim runs an op on the calling thread: its call is its launch, and its device slice
    // spans the same time.
    const int64_t end = trace_clock_ns();
    const int64_t begin = begin_ns ? begin_ns : end;
    const uint64_t correlation = trace_->next_correlation();
    const TraceArgs args = {{"phase", Phase::current_name()}};
    trace_->add_host_call(op, "cudaLaunchKernel", correlation, begin, end, args);
    trace_->add_device_work(DeviceWork::Kernel, op, -1, kSimComputeStream, correlation, begin,
                            end, args);
  }
}

std::string trace_memcpy_name(CopyKind kind, bool host_pinned, bool cross_device) {
  const char* host = host_pinned ? "Pinned" : "Pageable";
  switch (kind) {
    case CopyKind::HostToDevice: return std::string("Memcpy HtoD (") + host + " -> Device)";
    case CopyKind::DeviceToHost: return std::string("Memcpy DtoH (Device -> ") + host + ")";
    case CopyKind::DeviceToDevice: break;
  }
  return cross_device ? "Memcpy PtoP (Device -> Device)" : "Memcpy DtoD (Device -> Device)";
}

namespace {

// NCCL's kernel name for a c10d op ("all_reduce" -> ncclDevKernel_AllReduce).
std::string nccl_kernel_name(const std::string& op) {
  std::string camel;
  bool upper = true;
  for (char c : op) {
    if (c == '_') {
      upper = true;
      continue;
    }
    camel += upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
    upper = false;
  }
  return "ncclDevKernel_" + camel;
}

// A site on the trace: the program's line, and the library's.
void add_site_args(TraceArgs& args, const Site& site) {
  if (!site.frame.empty()) args["site"] = site.frame;
  if (!site.library.empty()) args["library site"] = site.library;
  if (!site.allowed.empty()) args["allowed"] = site.allowed;
}

}  // namespace

inline void EventCollector::add_copy(PhaseCounts& counts, CopyKind kind, int64_t bytes,
                                     bool host_pinned, bool cross_device) {
  auto& tally = counts.copies(kind);
  tally.count += 1;
  tally.bytes += bytes;
  if (host_pinned) tally.pinned += 1;
  if (cross_device) {
    counts.cross_device.count += 1;
    counts.cross_device.bytes += bytes;
  }
}

void EventCollector::trace_copy(CopyKind kind, int64_t bytes, bool host_pinned, int64_t begin_ns,
                                bool cross_device, const Site& site) {
  const int64_t end = trace_clock_ns();
  const int64_t begin = begin_ns ? begin_ns : end;
  const uint64_t correlation = trace_->next_correlation();
  TraceArgs args = {{"phase", Phase::current_name()}, {"kind", to_string(kind)}};
  add_site_args(args, site);
  trace_->add_host_call("", "cudaMemcpyAsync", correlation, begin, end, args);
  args["bytes"] = bytes;
  args["host memory"] = host_pinned ? "pinned" : "pageable";
  args["cross-device"] = cross_device;
  trace_->add_device_work(DeviceWork::Memcpy, trace_memcpy_name(kind, host_pinned, cross_device),
                          -1, kSimComputeStream, correlation, begin, end, std::move(args));
}

void EventCollector::add_copy_site(const Phase::Current& phase, CopyKind kind, const char* how,
                                   const Site& site, int64_t bytes) {
  const char* name = kind == CopyKind::HostToDevice ? "H2D" : "D2H";  // as reports name them
  CopySiteTally& tally =
      counts_.copy_sites[CopySiteKey{phase.name, name, how, site.frame, site.library}];
  tally.count += 1;
  tally.bytes += bytes;
}

void EventCollector::record_copy(CopyKind kind, int64_t bytes, bool host_pinned,
                                 int64_t begin_ns, bool cross_device, bool tensor_copy) {
  const bool sited = tensor_copy && kind != CopyKind::DeviceToDevice && !host_pinned;
  const Site site = sited || trace_ ? current_site() : Site{};  // before the lock (site.h)
  {
    std::lock_guard<SpinLock> lock(mu_);
    Phase::Current phase{};
    PhaseCounts& counts = current_phase_counts(&phase);
    add_copy(counts, kind, bytes, host_pinned, cross_device);
    if (sited) {
      add_copy_site(phase, kind, "pageable", site, bytes);
      counts.capture_blockers += 1;  // CUDA stages it through a buffer of its own, on the host
    }
  }
  if (trace_) trace_copy(kind, bytes, host_pinned, begin_ns, cross_device, site);
}

void EventCollector::record_copy_and_sync(CopyKind kind, int64_t bytes, bool host_pinned,
                                          int64_t begin_ns, bool cross_device,
                                          std::string_view op, std::string_view reason,
                                          int64_t wait_ns, bool tensor_copy) {
  if (!tensor_copy && !trace_ && !site_may_be_known() &&
      record_repeated_sync({kind, host_pinned, cross_device, /*literal_names=*/false, bytes,
                            wait_ns, op, reason})) {
    return;
  }
  count_copy_and_sync(kind, bytes, host_pinned, begin_ns, cross_device, op, reason, wait_ns,
                      tensor_copy);
}

void EventCollector::record_value_read(CopyKind kind, int64_t bytes, bool host_pinned,
                                       std::string_view op, std::string_view reason,
                                       int64_t wait_ns) {
  if (!trace_ && !site_may_be_known() &&
      record_repeated_sync({kind, host_pinned, /*cross_device=*/false, /*literal_names=*/true,
                            bytes, wait_ns, op, reason})) {
    return;
  }
  count_copy_and_sync(kind, bytes, host_pinned, /*begin_ns=*/0, /*cross_device=*/false, op,
                      reason, wait_ns, /*tensor_copy=*/false);
}

void EventCollector::count_copy_and_sync(CopyKind kind, int64_t bytes, bool host_pinned,
                                         int64_t begin_ns, bool cross_device,
                                         std::string_view op, std::string_view reason,
                                         int64_t wait_ns, bool tensor_copy) {
  const Site site = current_site();  // before the lock (site.h)
  {
    std::lock_guard<SpinLock> lock(mu_);
    Phase::Current phase{};
    PhaseCounts& counts = current_phase_counts(&phase);
    add_copy(counts, kind, bytes, host_pinned, cross_device);
    if (tensor_copy && kind != CopyKind::DeviceToDevice) {
      add_copy_site(phase, kind, "blocking", site, bytes);
    }
    if (!trace_) {
      add_sync(counts, phase, op, reason, wait_ns, /*collective=*/false, site);
      return;
    }
  }
  // On the trace, the copy's slice comes before the sync's.
  trace_copy(kind, bytes, host_pinned, begin_ns, cross_device, site);
  std::lock_guard<SpinLock> lock(mu_);
  Phase::Current phase{};
  PhaseCounts& counts = current_phase_counts(&phase);
  add_sync(counts, phase, op, reason, wait_ns, /*collective=*/false, site);
}

bool EventCollector::record_repeated_sync(const SyncedCopy& copy) {
  const uint64_t serial = Phase::current().serial;
  std::lock_guard<SpinLock> lock(mu_);
  if (serial != last_sync_serial_ || copy.op.data() != last_sync_op_ ||
      copy.reason.data() != last_sync_reason_) {
    return false;
  }
  // A literal at the last sync's address is the last sync's text if it is as long; other names
  // may have been freed and their addresses reused.
  const bool same_names =
      copy.literal_names
          ? last_sync_.key->op.size() == copy.op.size() &&
                last_sync_.key->reason.size() == copy.reason.size()
          : same_text(last_sync_.key->op, copy.op) && same_text(last_sync_.key->reason, copy.reason);
  if (!same_names) return false;
  PhaseCounts& counts = *last_sync_counts_;
  add_copy(counts, copy.kind, copy.bytes, copy.host_pinned, copy.cross_device);
  counts.add_sync(copy.wait_ns);
  counts.capture_blockers += 1;  // a graph cannot wait for the host
  last_sync_.tally->add_sync(copy.wait_ns);
  return true;
}

SyncSiteTally& EventCollector::sync_tally(const Phase::Current& phase, std::string_view op,
                                          std::string_view reason, const Site& site) {
  if (site.empty()) return *sync_slot(phase, op, reason).tally;
  // A site with a frame: frames are built per call (a Python frame's text), so by text.
  return counts_.sync_sites[SyncSiteKey{phase.name, std::string(op), std::string(reason),
                                        site.frame, site.library, site.allowed}];
}

const EventCollector::SyncSlot& EventCollector::sync_slot(const Phase::Current& phase,
                                                           std::string_view op,
                                                           std::string_view reason) {
  // The hot path (a sync in a loop) takes the last site when nothing but its text could differ;
  // else the site found by the addresses of its names, no strings built; a new site, or an
  // address reused for other text, takes the map.
  if (phase.serial == last_sync_serial_ && op.data() == last_sync_op_ &&
      reason.data() == last_sync_reason_ && same_text(last_sync_.key->op, op) &&
      same_text(last_sync_.key->reason, reason)) {
    return last_sync_;
  }
  const std::tuple<const void*, const void*, const void*> address{phase.name, op.data(),
                                                                  reason.data()};
  auto slot = sync_slots_.find(address);
  if (slot == sync_slots_.end() || slot->second.key->phase != phase.name ||
      !same_text(slot->second.key->op, op) || !same_text(slot->second.key->reason, reason)) {
    auto node = counts_.sync_sites
                    .try_emplace(SyncSiteKey{phase.name, std::string(op), std::string(reason)})
                    .first;
    slot = sync_slots_.insert_or_assign(address, SyncSlot{&node->first, &node->second}).first;
  }
  last_sync_serial_ = phase.serial;
  last_sync_op_ = op.data();
  last_sync_reason_ = reason.data();
  last_sync_ = slot->second;
  return last_sync_;
}

void EventCollector::add_sync(PhaseCounts& counts, const Phase::Current& phase,
                              std::string_view op, std::string_view reason, int64_t wait_ns,
                              bool collective, const Site& site) {
  counts.add_sync(wait_ns, collective);
  counts.capture_blockers += 1;  // a graph cannot wait for the host
  sync_tally(phase, op, reason, site).add_sync(wait_ns);
  if (site.empty()) last_sync_counts_ = &counts;  // sync_slot made this sync the last one
  if (trace_) {
    const int64_t now = trace_clock_ns();
    TraceArgs args = {{"reason", reason}, {"phase", phase.name}};
    add_site_args(args, site);
    if (wait_ns < 0) {
      trace_->add_instant("syncs", op, "sync", now, std::move(args));
    } else {
      trace_->add_span("syncs", op, "sync", now - wait_ns, now, std::move(args));
    }
  }
}

void EventCollector::record_any_sync(std::string_view op, std::string_view reason,
                                     int64_t wait_ns, bool collective) {
  const Site site = current_site();  // before the lock (site.h)
  std::lock_guard<SpinLock> lock(mu_);
  Phase::Current phase{};
  PhaseCounts& counts = current_phase_counts(&phase);
  add_sync(counts, phase, op, reason, wait_ns, collective, site);
}

void EventCollector::record_sync(std::string_view op, std::string_view reason, int64_t wait_ns) {
  record_any_sync(op, reason, wait_ns, /*collective=*/false);
}

void EventCollector::record_collective_sync(std::string_view op, std::string_view reason,
                                            int64_t wait_ns) {
  record_any_sync(op, reason, wait_ns, /*collective=*/true);
}

void EventCollector::record_collective_wait(std::string_view op, int64_t wait_ns) {
  std::lock_guard<SpinLock> lock(mu_);
  current_phase_counts().collective_waits += 1;
  if (trace_ && wait_ns >= 0) {
    const int64_t now = trace_clock_ns();
    trace_->add_span("collective waits", std::string(op) + " wait", "collective wait",
                     now - wait_ns, now,
                     {{"phase", Phase::current_name()}, {"host sync", false}, {"op", op}});
  }
}

void EventCollector::record_collective(std::string_view name, int64_t bytes) {
  std::lock_guard<SpinLock> lock(mu_);
  auto& tally = current_phase_counts().collectives[std::string(name)];
  tally.count += 1;
  tally.bytes += bytes;
}

void EventCollector::record_collective_trace(const CollectiveTrace& c) {
  if (!trace_) return;
  const uint64_t correlation = trace_->next_correlation();
  // The arguments PyTorch's profiler gives a collective (record_param_comms, and its kernel).
  TraceArgs args = {{"Collective name", c.op},
                    {"In msg nelems", c.in_nelems},
                    {"Out msg nelems", c.out_nelems},
                    {"Group size", c.group_size},
                    {"dtype", c.dtype},
                    {"Process Group Name", c.group_name},
                    {"Process Group Description", c.group_desc},
                    {"Rank", c.rank},
                    {"bytes", c.bytes},
                    {"phase", c.phase}};
  trace_->add_host_call("record_param_comms", c.on_device ? "cudaLaunchKernel" : "", correlation,
                        c.issued_ns, std::max(c.issued_ns, c.call_end_ns), args, c.thread);
  if (c.on_device) {
    trace_->add_device_work(DeviceWork::Collective, nccl_kernel_name(c.op), -1,
                            kSimCollectiveStream, correlation, c.issued_ns, c.done_ns,
                            std::move(args));
  } else {
    trace_->add_device_work(DeviceWork::HostCollective, "gloo:" + c.op, -1, kSimCollectiveStream,
                            correlation, c.issued_ns, c.done_ns, std::move(args));
  }
}

void EventCollector::record_stream_wait() {
  std::lock_guard<SpinLock> lock(mu_);
  current_phase_counts().stream_waits += 1;
}

void EventCollector::record_event(std::string_view kind, std::string_view what,
                                  const Site& where) {
  const std::string name(kind);
  if (!is_event_kind(name)) throw std::invalid_argument("unknown event kind '" + name + "'");
  const Site site = where.frame.empty() && where.library.empty() ? current_site() : where;
  std::lock_guard<SpinLock> lock(mu_);
  Phase::Current phase{};
  PhaseCounts& counts = current_phase_counts(&phase);
  if (name == kGraphBreak) counts.graph_breaks += 1;
  if (name == kRecompile) counts.recompiles += 1;
  if (name == kCaptureBlocker) counts.capture_blockers += 1;
  counts_.event_sites[EventSiteKey{phase.name, name, std::string(what), site.frame,
                                   site.library}] += 1;
  if (trace_) {
    TraceArgs args = {{"phase", phase.name}, {"what", what}};
    add_site_args(args, site);
    trace_->add_instant("compiled code", name, name, trace_clock_ns(), std::move(args));
  }
}

Counts EventCollector::snapshot() const {
  std::lock_guard<SpinLock> lock(mu_);
  return counts_;
}

EventCollector::SyncWait EventCollector::sync_wait() const {
  std::lock_guard<SpinLock> lock(mu_);
  SyncWait w;
  for (const auto& [phase, c] : counts_.phases) {
    w.ns += c.sync_wait_ns;
    w.complete = w.complete && c.timed_syncs == c.syncs;
  }
  return w;
}

void EventCollector::clear() {
  std::lock_guard<SpinLock> lock(mu_);
  counts_ = Counts{};
  phase_slots_.clear();
  op_slots_.clear();
  sync_slots_.clear();
  last_phase_serial_ = kNoSerial;
  last_sync_serial_ = kNoSerial;
  recent_launches_.fill({});
}

ScopedCollection::ScopedCollection(EventCollector& collector) {
  std::lock_guard<std::mutex> lock(g_slots_mu);
  int free = -1;
  for (int i = 0; i < kMaxActiveCollectors; ++i) {
    EventCollector* c = g_active[i].load(std::memory_order_relaxed);
    if (c == &collector) return;  // already counting: this scope adds nothing, removes nothing
    if (c == nullptr && free < 0) free = i;
  }
  if (free < 0) {
    throw std::length_error("more than " + std::to_string(kMaxActiveCollectors) +
                            " event collectors counting at once");
  }
  slot_ = free;
  g_active[free].store(&collector, std::memory_order_release);
  if (free + 1 > g_slots_in_use.load(std::memory_order_relaxed)) {
    g_slots_in_use.store(free + 1, std::memory_order_release);
  }
}

ScopedCollection::~ScopedCollection() {
  if (slot_ < 0) return;
  std::lock_guard<std::mutex> lock(g_slots_mu);
  g_active[slot_].store(nullptr, std::memory_order_release);
  int in_use = g_slots_in_use.load(std::memory_order_relaxed);
  while (in_use > 0 && g_active[in_use - 1].load(std::memory_order_relaxed) == nullptr) --in_use;
  g_slots_in_use.store(in_use, std::memory_order_release);
}

namespace events {
// Recording allocates (map nodes, strings); an allocation failure is not worth aborting a
// measurement for, so it is swallowed here and the count is lost.
#define HARNESS_FORWARD_EVENT(call)                                        \
  const int slots = g_slots_in_use.load(std::memory_order_acquire);       \
  for (int i = 0; i < slots; ++i) {                                       \
    EventCollector* c = g_active[i].load(std::memory_order_acquire);      \
    if (c == nullptr) continue;                                           \
    try {                                                                 \
      c->call;                                                            \
    } catch (...) {                                                       \
    }                                                                     \
  }

void record_launch(std::string_view op, int64_t begin_ns) noexcept {
  HARNESS_FORWARD_EVENT(record_launch(op, begin_ns));
}
void record_copy(CopyKind kind, int64_t bytes, bool host_pinned, int64_t begin_ns,
                 bool cross_device, bool tensor_copy) noexcept {
  HARNESS_FORWARD_EVENT(record_copy(kind, bytes, host_pinned, begin_ns, cross_device, tensor_copy));
}
void record_collective_sync(std::string_view op, std::string_view reason,
                            int64_t wait_ns) noexcept {
  HARNESS_FORWARD_EVENT(record_collective_sync(op, reason, wait_ns));
}
void record_collective_wait(std::string_view op, int64_t wait_ns) noexcept {
  HARNESS_FORWARD_EVENT(record_collective_wait(op, wait_ns));
}
void record_sync(std::string_view op, std::string_view reason, int64_t wait_ns) noexcept {
  HARNESS_FORWARD_EVENT(record_sync(op, reason, wait_ns));
}
void record_copy_and_sync(CopyKind kind, int64_t bytes, bool host_pinned, int64_t begin_ns,
                          bool cross_device, std::string_view op, std::string_view reason,
                          int64_t wait_ns, bool tensor_copy) noexcept {
  HARNESS_FORWARD_EVENT(record_copy_and_sync(kind, bytes, host_pinned, begin_ns, cross_device, op,
                                             reason, wait_ns, tensor_copy));
}
void record_value_read(CopyKind kind, int64_t bytes, bool host_pinned, std::string_view op,
                       std::string_view reason, int64_t wait_ns) noexcept {
  HARNESS_FORWARD_EVENT(record_value_read(kind, bytes, host_pinned, op, reason, wait_ns));
}
void record_collective(std::string_view name, int64_t bytes) noexcept {
  HARNESS_FORWARD_EVENT(record_collective(name, bytes));
}
void record_collective_trace(const CollectiveTrace& collective) noexcept {
  HARNESS_FORWARD_EVENT(record_collective_trace(collective));
}
void record_stream_wait() noexcept { HARNESS_FORWARD_EVENT(record_stream_wait()); }
void record_event(std::string_view kind, std::string_view what, const Site& where) noexcept {
  HARNESS_FORWARD_EVENT(record_event(kind, what, where));
}
#undef HARNESS_FORWARD_EVENT
bool collecting() noexcept { return g_slots_in_use.load(std::memory_order_acquire) > 0; }
std::atomic<bool> g_a_trace_was_set{false};
bool any_active_collector_traces() noexcept {
  const int slots = g_slots_in_use.load(std::memory_order_acquire);
  for (int i = 0; i < slots; ++i) {
    EventCollector* c = g_active[i].load(std::memory_order_acquire);
    if (c != nullptr && c->tracing()) return true;
  }
  return false;
}
int64_t begin_time() noexcept { return collecting() ? trace_clock_ns() : 0; }
int64_t elapsed_since(int64_t begin) noexcept {
  return begin == 0 ? kNotTimed : std::max<int64_t>(0, trace_clock_ns() - begin);
}
}  // namespace events

}  // namespace harness

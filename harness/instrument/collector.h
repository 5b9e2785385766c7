#pragma once
// EventCollector: the sink that device backends report events to while a window is being measured.
//
// Owns the Counts of the current window. Devices call the free functions in namespace
// harness::events (record_launch, record_copy, ...) which forward to the active collector; when none
// is active they cost one relaxed atomic load and return. Events may arrive from any thread (the
// autograd engine runs backward ops on a device thread), so recording takes a lock (a spin lock:
// recording holds it for tens of nanoseconds, on every launch).
#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "harness/instrument/counts.h"
#include "harness/instrument/phase.h"
#include "harness/instrument/site.h"
#include "harness/instrument/spin_lock.h"

namespace harness {

class TraceRecorder;

// A sync whose wait was not measured (the `wait_ns` argument of record_sync and
// record_collective_sync).
inline constexpr int64_t kNotTimed = -1;

// A collective as the trace shows it, from issue to completion, with the arguments PyTorch's
// profiler gives an NCCL kernel (the c10d backend fills it in: record_collective_trace).
struct CollectiveTrace {
  std::string op;  // "broadcast", "all_reduce", ...
  int64_t bytes = 0;
  int64_t in_nelems = 0, out_nelems = 0;
  std::string dtype;  // as c10 names it: "Float", "Long", ...
  int group_size = 0, rank = 0;
  std::string group_name, group_desc;
  bool on_device = true;  // false: on CPU tensors (no device work)
  std::string phase;      // the innermost phase when it was issued
  uint64_t thread = 0;    // the thread that issued it
  int64_t issued_ns = 0, call_end_ns = 0, done_ns = 0;  // trace_clock_ns()
};

// A copy's device slice on the trace, named as CUPTI names it ("Memcpy HtoD (Pinned -> Device)").
std::string trace_memcpy_name(CopyKind kind, bool host_pinned, bool cross_device);

namespace events {
// Set for good once any collector is given a trace (tracing() below reads it before every op).
extern std::atomic<bool> g_a_trace_was_set;
}  // namespace events

class EventCollector {
 public:
  // `begin_ns` (trace_clock_ns()) is when the op or copy started, for the trace; 0: just now.
  void record_launch(std::string_view op, int64_t begin_ns = 0);
  // `tensor_copy`: a copy between tensors that the program asked for (copy_, Tensor.to), not a
  // read an op makes of its own result (item's, nonzero's count): a pageable H2D or D2H one has a
  // copy site (site.h).
  void record_copy(CopyKind kind, int64_t bytes, bool host_pinned, int64_t begin_ns = 0,
                   bool cross_device = false, bool tensor_copy = false);
  // `wait_ns`: the host time spent waiting in it (kNotTimed: not measured). A timed sync is a span
  // on the trace, ending now.
  void record_sync(std::string_view op, std::string_view reason, int64_t wait_ns = kNotTimed);
  // A copy that is also a sync (a blocking copy, .item()'s read): record_copy then record_sync,
  // under one lock. A blocking H2D or D2H `tensor_copy` has a copy site.
  void record_copy_and_sync(CopyKind kind, int64_t bytes, bool host_pinned, int64_t begin_ns,
                            bool cross_device, std::string_view op, std::string_view reason,
                            int64_t wait_ns, bool tensor_copy = false);
  // A read of a value an op computed (`.item()`): a copy of `bytes` that is also a sync, named by
  // string literals. Counted as record_copy_and_sync counts it (not a tensor copy); a repeat of the
  // last sync is recognised by the literals' addresses, which never hold other text.
  void record_value_read(CopyKind kind, int64_t bytes, bool host_pinned, std::string_view op,
                         std::string_view reason, int64_t wait_ns);
  // A host sync that waited for collective `op` (barrier(), or a collective on CPU tensors):
  // counted in syncs and apart (`collective_syncs`), with its site.
  void record_collective_sync(std::string_view op, std::string_view reason,
                              int64_t wait_ns = kNotTimed);
  // A wait for collective `op` on device tensors: device-side (the stream waits for the
  // collective's stream, as NCCL's work.wait() does), not a host sync. `wait_ns`: the host time
  // the sim spent in it, for the trace only.
  void record_collective_wait(std::string_view op, int64_t wait_ns = kNotTimed);
  void record_collective(std::string_view name, int64_t bytes);
  // For the trace only (counted by record_collective when it was issued).
  void record_collective_trace(const CollectiveTrace& collective);
  void record_stream_wait();
  // An event of kind kGraphBreak, kRecompile or kCaptureBlocker (counts.h), with what it was;
  // sited at `where` when that has a frame or a library frame (compiled code names the line
  // dynamo traced, which the calling thread's frames no longer show), else where the calling
  // thread is. Another kind throws std::invalid_argument.
  void record_event(std::string_view kind, std::string_view what, const Site& where = {});

  Counts snapshot() const;
  // The host time waited in syncs so far (what snapshot().total().sync_wait_ns says), and whether
  // every sync so far was timed.
  struct SyncWait {
    int64_t ns = 0;
    bool complete = true;
  };
  SyncWait sync_wait() const;
  void clear();
  // Also put every event on this timeline (nullptr: counts only).
  void set_trace(TraceRecorder* trace) {
    if (trace != nullptr) events::g_a_trace_was_set.store(true, std::memory_order_relaxed);
    trace_ = trace;
  }
  bool tracing() const { return trace_ != nullptr; }

 private:
  // The innermost phase's counts (the phase itself in `phase`, if asked). Requires mu_.
  PhaseCounts& current_phase_counts(Phase::Current* phase = nullptr);
  static void add_copy(PhaseCounts& counts, CopyKind kind, int64_t bytes, bool host_pinned,
                       bool cross_device);
  void trace_copy(CopyKind kind, int64_t bytes, bool host_pinned, int64_t begin_ns,
                  bool cross_device, const Site& site);
  // A copy site's tally. Requires mu_.
  void add_copy_site(const Phase::Current& phase, CopyKind kind, const char* how,
                     const Site& site, int64_t bytes);
  int64_t& launch_slot(PhaseCounts& counts, std::string_view op);  // requires mu_
  // The hot path of record_copy_and_sync (`.item()` in a loop): counts the copy and the sync when
  // they repeat the last sync without a site, in the same phase scope; false (nothing counted)
  // otherwise. Takes mu_.
  // One record, passed by address (nine arguments cost more to pass than to count).
  // `literal_names`: op and reason are string literals (compared by address and size).
  struct SyncedCopy {
    CopyKind kind;
    bool host_pinned;
    bool cross_device;
    bool literal_names;
    int64_t bytes;
    int64_t wait_ns;
    std::string_view op;
    std::string_view reason;
  };
  bool record_repeated_sync(const SyncedCopy& copy);
  // record_copy_and_sync past its hot path.
  void count_copy_and_sync(CopyKind kind, int64_t bytes, bool host_pinned, int64_t begin_ns,
                           bool cross_device, std::string_view op, std::string_view reason,
                           int64_t wait_ns, bool tensor_copy);
  // Counts a sync at `site` (site.h; resolved before the lock: a resolver may take Python's
  // GIL) in `counts`, phase `phase`'s. Requires mu_.
  void add_sync(PhaseCounts& counts, const Phase::Current& phase, std::string_view op,
                std::string_view reason, int64_t wait_ns, bool collective, const Site& site);
  // The site's tally in `phase`: looked up by the addresses of its names where it has no frame,
  // else by its text. Requires mu_.
  struct SyncSlot;
  const SyncSlot& sync_slot(const Phase::Current& phase, std::string_view op,
                            std::string_view reason);
  SyncSiteTally& sync_tally(const Phase::Current& phase, std::string_view op,
                            std::string_view reason, const Site& site);
  void record_any_sync(std::string_view op, std::string_view reason, int64_t wait_ns,
                       bool collective);

  // Phase names are mostly string literals and op names live as long as the dispatcher: the hot
  // path finds its counters by address (checking the text, in case an address was reused)
  // without building strings.
  struct PointerPairHash {
    size_t operator()(const std::pair<const void*, const void*>& p) const {
      return std::hash<const void*>()(p.first) * 31 + std::hash<const void*>()(p.second);
    }
  };

  mutable SpinLock mu_;
  Counts counts_;
  struct PhaseSlot {
    const std::string* name;
    PhaseCounts* counts;
  };
  struct OpSlot {
    const std::string* name;
    int64_t* count;
  };
  struct SyncSlot {
    const SyncSiteKey* key;
    SyncSiteTally* tally;
  };
  struct PointerTripleHash {
    size_t operator()(const std::tuple<const void*, const void*, const void*>& t) const {
      const std::hash<const void*> h;
      return (h(std::get<0>(t)) * 31 + h(std::get<1>(t))) * 31 + h(std::get<2>(t));
    }
  };
  std::unordered_map<const void*, PhaseSlot> phase_slots_;
  std::unordered_map<std::pair<const void*, const void*>, OpSlot, PointerPairHash> op_slots_;
  // (phase name, op, reason) addresses -> the site's node in counts_.sync_sites.
  std::unordered_map<std::tuple<const void*, const void*, const void*>, SyncSlot,
                     PointerTripleHash>
      sync_slots_;
  // The last lookups, for a sync or an op repeated in one phase scope (`.item()` in a loop): a
  // phase scope's serial stands for its name, so a hit compares no phase text. kNoSerial: empty.
  static constexpr uint64_t kNoSerial = ~uint64_t{0};
  uint64_t last_phase_serial_ = kNoSerial;
  PhaseCounts* last_phase_counts_ = nullptr;
  uint64_t last_sync_serial_ = kNoSerial;
  const char* last_sync_op_ = nullptr;
  const char* last_sync_reason_ = nullptr;
  SyncSlot last_sync_{};
  PhaseCounts* last_sync_counts_ = nullptr;  // the last sync's phase counts
  // The counters of recent launches, by the phase's counts and the op name's address: a step's
  // ops come round again in every step, each in its phase (counts nullptr: an empty entry).
  struct RecentLaunch {
    const PhaseCounts* counts = nullptr;
    const char* op = nullptr;
    OpSlot slot{};
  };
  static constexpr size_t kRecentLaunches = 64;
  std::array<RecentLaunch, kRecentLaunches> recent_launches_{};
  TraceRecorder* trace_ = nullptr;
};

// Collectors that count at once (harness_sim.count() inside `run`, bench's instrument beside a
// test's own collector): each gets every event.
inline constexpr int kMaxActiveCollectors = 8;

// Makes a collector count for its lifetime: it gets every event, as does every other collector
// counting at the same time (scopes need not end in the order they began). A collector that
// already counts is left as it is (this scope neither adds nor removes it). Throws
// std::length_error with kMaxActiveCollectors already counting.
class ScopedCollection {
 public:
  explicit ScopedCollection(EventCollector& collector);
  ~ScopedCollection();
  ScopedCollection(const ScopedCollection&) = delete;
  ScopedCollection& operator=(const ScopedCollection&) = delete;

 private:
  int slot_ = -1;  // the slot this scope filled; -1: none
};

namespace events {
// The entry points for device backends. Each is a no-op when no collector is active.
void record_launch(std::string_view op, int64_t begin_ns = 0) noexcept;
void record_copy(CopyKind kind, int64_t bytes, bool host_pinned, int64_t begin_ns = 0,
                 bool cross_device = false, bool tensor_copy = false) noexcept;
void record_sync(std::string_view op, std::string_view reason,
                 int64_t wait_ns = kNotTimed) noexcept;
void record_copy_and_sync(CopyKind kind, int64_t bytes, bool host_pinned, int64_t begin_ns,
                          bool cross_device, std::string_view op, std::string_view reason,
                          int64_t wait_ns, bool tensor_copy = false) noexcept;
// EventCollector::record_value_read; `op` and `reason` must be string literals (the template
// takes character arrays only).
void record_value_read(CopyKind kind, int64_t bytes, bool host_pinned, std::string_view op,
                       std::string_view reason, int64_t wait_ns) noexcept;
template <size_t OpSize, size_t ReasonSize>
void record_value_read(CopyKind kind, int64_t bytes, bool host_pinned, const char (&op)[OpSize],
                       const char (&reason)[ReasonSize], int64_t wait_ns) noexcept {
  record_value_read(kind, bytes, host_pinned, std::string_view(op, OpSize - 1),
                    std::string_view(reason, ReasonSize - 1), wait_ns);
}
void record_collective_sync(std::string_view op, std::string_view reason,
                            int64_t wait_ns = kNotTimed) noexcept;
void record_collective_wait(std::string_view op, int64_t wait_ns = kNotTimed) noexcept;
void record_collective(std::string_view name, int64_t bytes) noexcept;
void record_collective_trace(const CollectiveTrace& collective) noexcept;
void record_stream_wait() noexcept;
void record_event(std::string_view kind, std::string_view what, const Site& where = {}) noexcept;
bool collecting() noexcept;
// Whether the active collector also puts events on a trace. Read before every op: one load until
// a collector of this process has been given a trace.
bool any_active_collector_traces() noexcept;
inline bool tracing() noexcept {
  return g_a_trace_was_set.load(std::memory_order_relaxed) && any_active_collector_traces();
}
// trace_clock_ns() while a collector is active, else 0 (so that timing costs nothing when off).
int64_t begin_time() noexcept;
// The time since `begin` (a begin_time()), for a sync's wait; kNotTimed when `begin` is 0 (no
// collector was active when it began, so nothing was timed).
int64_t elapsed_since(int64_t begin) noexcept;
}  // namespace events

}  // namespace harness

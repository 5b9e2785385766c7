#pragma once
// What the instrument counts, by phase. Plain data: no Torch, no locking (see EventCollector).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "harness/instrument/phase.h"  // kNoPhase
#include "harness/report/model/result.h"

namespace harness {

enum class CopyKind { HostToDevice, DeviceToHost, DeviceToDevice };
const char* to_string(CopyKind kind);

struct CopyTally {
  int64_t count = 0;
  int64_t bytes = 0;
  int64_t pinned = 0;  // copies whose host side was page-locked (H2D / D2H only)
  void add(const CopyTally& o) { count += o.count; bytes += o.bytes; pinned += o.pinned; }
  bool operator==(const CopyTally& o) const {
    return count == o.count && bytes == o.bytes && pinned == o.pinned;
  }
};

struct CollectiveTally {
  int64_t count = 0;
  int64_t bytes = 0;
  bool operator==(const CollectiveTally& o) const { return count == o.count && bytes == o.bytes; }
};

// Memory of one pool (a device, or the host's CPU tensors) over a phase or a window, in bytes;
// unset: not measured. Levels, not counts: never summed over phases or divided per step.
struct MemoryTally {
  std::optional<int64_t> peak;       // the most held at once while it was open, counting what was
                                     // held when it began and what its nested phases held
  std::optional<int64_t> allocated;  // held when it (last) ended
  // Merges `later` (a later occurrence or window): the larger peak, `later`'s level where it
  // has one.
  void add(const MemoryTally& later);
  bool operator==(const MemoryTally& o) const { return peak == o.peak && allocated == o.allocated; }
};

struct MemoryCounts {
  MemoryTally device;    // the rank's own device
  MemoryTally host;      // CPU tensors (see memory_ledger.h)
  MemoryTally reserved;  // the device's allocator's reserved bytes (its segments)
  void add(const MemoryCounts& later) {
    device.add(later.device);
    host.add(later.host);
    reserved.add(later.reserved);
  }
  bool operator==(const MemoryCounts& o) const {
    return device == o.device && host == o.host && reserved == o.reserved;
  }
};

// Everything counted while one phase was the innermost; and its memory (MemoryWatch), which
// covers the whole time it was open.
struct PhaseCounts {
  int64_t launches = 0;
  std::map<std::string, int64_t> launches_by_op;
  CopyTally h2d, d2h, d2d;
  CopyTally cross_device;     // copies that touched a device other than the current one (any kind)
  int64_t syncs = 0;
  // The syncs that waited for a collective on the host: barrier(), and collectives on CPU
  // tensors (Gloo blocks the caller).
  int64_t collective_syncs = 0;
  // Waits for a collective on device tensors: device-side, as NCCL's work.wait() makes the
  // current stream wait for the NCCL stream; not host syncs (DESIGN.md, "collective wait").
  int64_t collective_waits = 0;
  // Host time spent waiting in syncs, in ns, over the `timed_syncs` syncs whose wait the instrument
  // measured (sim: the work inside `.item()`, a blocking copy, a synchronize or a collective wait;
  // cuda: SYNCHRONIZATION records' end - start). A total only when every sync was timed.
  int64_t sync_wait_ns = 0;
  int64_t timed_syncs = 0;
  // CUDA memsets (CUPTI MEMSET records); unset where not measured (sim, cpu: a fill is a launch).
  std::optional<int64_t> memsets;
  int64_t stream_waits = 0;  // stream-wait-event: device-side, not a host sync
  // Compiled code (harness_sim under torch.compile): graph breaks crossed (a compiled graph that
  // ended where dynamo could not go on, run once more) and recompilations (a guard failed).
  int64_t graph_breaks = 0;
  int64_t recompiles = 0;
  // What would stop the work from being captured in a CUDA graph: every sync, every copy from or
  // into pageable host memory, and the blockers recorded as events (kCaptureBlocker).
  int64_t capture_blockers = 0;
  std::map<std::string, CollectiveTally> collectives;
  MemoryCounts memory;
  // GPU time, where device records are timed (CUPTI; unset on sim and cpu: not measured): the
  // summed durations of the phase's kernels, memcpys and memsets, and the sum over the phase's
  // occurrences of each one's span on the GPU (its first record's start to its last one's end).
  std::optional<int64_t> gpu_time_ns;
  std::optional<int64_t> gpu_span_ns;

  CopyTally& copies(CopyKind kind) {
    switch (kind) {
      case CopyKind::HostToDevice: return h2d;
      case CopyKind::DeviceToHost: return d2h;
      case CopyKind::DeviceToDevice: break;
    }
    return d2d;
  }
  const CopyTally& copies(CopyKind kind) const;
  // One sync; `wait_ns` < 0: its wait was not measured.
  void add_sync(int64_t wait_ns, bool collective = false) {
    syncs += 1;
    if (collective) collective_syncs += 1;
    if (wait_ns >= 0) {
      sync_wait_ns += wait_ns;
      timed_syncs += 1;
    }
  }
  // Counts are summed; memory is merged (MemoryTally::add), `other` taken as the later.
  void add(const PhaseCounts& other);
  bool operator==(const PhaseCounts& o) const;
};

// The syncs of one site: how many, and the host time spent waiting in the `timed` ones of them.
struct SyncSiteTally {
  int64_t count = 0;
  int64_t wait_ns = 0;
  int64_t timed = 0;
  // One sync; `wait_ns` < 0: its wait was not measured.
  void add_sync(int64_t wait) {
    count += 1;
    if (wait >= 0) {
      wait_ns += wait;
      timed += 1;
    }
  }
  void add(const SyncSiteTally& o) { count += o.count; wait_ns += o.wait_ns; timed += o.timed; }
  bool operator==(const SyncSiteTally& o) const {
    return count == o.count && wait_ns == o.wait_ns && timed == o.timed;
  }
};

// A sync site: the phase, the op, why it synced, and where in the program (site.h: the program's
// frame and the library frame that made the call; both "" when not known).
struct SyncSiteKey {
  std::string phase, op, reason;
  std::string frame, library;
  std::string allowed;  // why the program allowed it (site.h), "" where it did not
  bool operator<(const SyncSiteKey& o) const {
    return std::tie(phase, op, reason, frame, library, allowed) <
           std::tie(o.phase, o.op, o.reason, o.frame, o.library, o.allowed);
  }
  bool operator==(const SyncSiteKey& o) const {
    return phase == o.phase && op == o.op && reason == o.reason && frame == o.frame &&
           library == o.library && allowed == o.allowed;
  }
};

// A copy a user would move (CopySite in result.h): the phase, H2D or D2H, "blocking" (the host
// waited for it) or "pageable" (non-blocking, from or into pageable host memory), and where.
struct CopySiteKey {
  std::string phase, kind, how;
  std::string frame, library;
  bool operator<(const CopySiteKey& o) const {
    return std::tie(phase, kind, how, frame, library) <
           std::tie(o.phase, o.kind, o.how, o.frame, o.library);
  }
  bool operator==(const CopySiteKey& o) const {
    return phase == o.phase && kind == o.kind && how == o.how && frame == o.frame &&
           library == o.library;
  }
};

// An event of a kind EventSite names (result.h: kGraphBreak, kRecompile, kCaptureBlocker): the phase, the kind, what it was (a graph break's reason, the
// guard that failed, what blocks capture) and where.
struct EventSiteKey {
  std::string phase, kind, what;
  std::string frame, library;
  bool operator<(const EventSiteKey& o) const {
    return std::tie(phase, kind, what, frame, library) <
           std::tie(o.phase, o.kind, o.what, o.frame, o.library);
  }
  bool operator==(const EventSiteKey& o) const {
    return phase == o.phase && kind == o.kind && what == o.what && frame == o.frame &&
           library == o.library;
  }
};

struct CopySiteTally {
  int64_t count = 0;
  int64_t bytes = 0;
  void add(const CopySiteTally& o) { count += o.count; bytes += o.bytes; }
  bool operator==(const CopySiteTally& o) const { return count == o.count && bytes == o.bytes; }
};

// Counts of a window of execution, keyed by innermost phase (kNoPhase when no phase was open).
struct Counts {
  std::map<std::string, PhaseCounts> phases;
  std::map<SyncSiteKey, SyncSiteTally> sync_sites;
  std::map<CopySiteKey, CopySiteTally> copy_sites;
  std::map<EventSiteKey, int64_t> event_sites;
  MemoryCounts memory;  // the whole window, from its start to its end (outside phases too)

  // The sum of the phases' counts; memory: the window's peak (the largest) and its level at the
  // end (without window figures: the phases', merged in name order).
  PhaseCounts total() const;
  // `other` is the later window.
  void add(const Counts& other);
  bool operator==(const Counts& o) const {
    return phases == o.phases && sync_sites == o.sync_sites && copy_sites == o.copy_sites &&
           event_sites == o.event_sites && memory == o.memory;
  }
};

// The phase of what the harness itself does inside a measured window (waiting for the device at
// the end of a step, so that the step's time covers its device work): never counted.
inline constexpr const char* kUncountedPhase = "harness.uncounted";

// Turns counts into self-describing measurements (names such as "d2h.count", "sync.count",
// "sync.wait_time", "gpu_time"). `divisor` divides every value (the number of measured steps for
// per-step figures). Times not measured are null: sync.wait_time where a sync was not timed,
// gpu_time where no device record is timed (sim, cpu).
std::vector<Measurement> to_measurements(const PhaseCounts& counts, double divisor = 1.0);
// What only a phase has ("gpu_span": a sum over its occurrences, which the window's total and
// per-step figures have no counterpart for); null where not measured.
std::vector<Measurement> phase_only_measurements(const PhaseCounts& counts);
// Memory as measurements ("memory.peak_bytes", "host_memory.allocated_bytes", ...; null where not
// measured). Levels: they go in `total` and each phase, never in per-step figures.
std::vector<Measurement> memory_measurements(const PhaseCounts& counts);
std::vector<SyncSite> to_sync_sites(const Counts& counts);
std::vector<CopySite> to_copy_sites(const Counts& counts);
std::vector<EventSite> to_event_sites(const Counts& counts);

}  // namespace harness

#pragma once
// What the instrument counts, by phase. Plain data: no Torch, no locking (see EventCollector).
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "harness/report/result.h"

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

// Everything counted while one phase was the innermost.
struct PhaseCounts {
  int64_t launches = 0;
  std::map<std::string, int64_t> launches_by_op;
  CopyTally h2d, d2h, d2d;
  CopyTally cross_device;     // copies that touched a device other than the current one (any kind)
  int64_t syncs = 0;
  int64_t collective_waits = 0;  // the syncs that were waits for a collective to finish
  int64_t memsets = 0;       // CUDA memsets (CUPTI MEMSET records); sim has none
  int64_t stream_waits = 0;  // stream-wait-event: device-side, not a host sync
  std::map<std::string, CollectiveTally> collectives;

  CopyTally& copies(CopyKind kind);
  const CopyTally& copies(CopyKind kind) const;
  void add(const PhaseCounts& other);
  bool operator==(const PhaseCounts& o) const;
};

struct SyncSiteKey {
  std::string phase, op, reason;
  bool operator<(const SyncSiteKey& o) const {
    return std::tie(phase, op, reason) < std::tie(o.phase, o.op, o.reason);
  }
  bool operator==(const SyncSiteKey& o) const {
    return phase == o.phase && op == o.op && reason == o.reason;
  }
};

// Counts of a window of execution, keyed by innermost phase ("" when no phase was open).
struct Counts {
  std::map<std::string, PhaseCounts> phases;
  std::map<SyncSiteKey, int64_t> sync_sites;

  PhaseCounts total() const;
  void add(const Counts& other);
  bool operator==(const Counts& o) const { return phases == o.phases && sync_sites == o.sync_sites; }
};

// The phase name used for events that happen outside every phase.
inline constexpr const char* kNoPhase = "(none)";
// The phase of what the harness itself does inside a measured window (waiting for the device at
// the end of a step, so that the step's time covers its device work): never counted.
inline constexpr const char* kUncountedPhase = "harness.uncounted";

// Turns counts into self-describing measurements (names such as "d2h.count", "sync.count").
// `divisor` divides every value (the number of measured steps for per-step figures).
std::vector<Measurement> to_measurements(const PhaseCounts& counts, double divisor = 1.0);
std::vector<SyncSite> to_sync_sites(const Counts& counts);

}  // namespace harness

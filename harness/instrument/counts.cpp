#include "harness/instrument/counts.h"

#include <algorithm>

namespace harness {

const char* to_string(CopyKind kind) {
  switch (kind) {
    case CopyKind::HostToDevice: return "h2d";
    case CopyKind::DeviceToHost: return "d2h";
    case CopyKind::DeviceToDevice: return "d2d";
  }
  return "?";
}

const CopyTally& PhaseCounts::copies(CopyKind kind) const {
  return const_cast<PhaseCounts*>(this)->copies(kind);
}

namespace {
// Unset: not measured. Measured on either side: the sum of what was measured.
void add_optional(std::optional<int64_t>& into, const std::optional<int64_t>& from) {
  if (from) into = into.value_or(0) + *from;
}
}  // namespace

void MemoryTally::add(const MemoryTally& later) {
  if (later.peak) peak = peak ? std::max(*peak, *later.peak) : *later.peak;
  if (later.allocated) allocated = later.allocated;
}

void PhaseCounts::add(const PhaseCounts& o) {
  launches += o.launches;
  for (const auto& [op, n] : o.launches_by_op) launches_by_op[op] += n;
  h2d.add(o.h2d);
  d2h.add(o.d2h);
  d2d.add(o.d2d);
  cross_device.add(o.cross_device);
  syncs += o.syncs;
  collective_syncs += o.collective_syncs;
  collective_waits += o.collective_waits;
  sync_wait_ns += o.sync_wait_ns;
  timed_syncs += o.timed_syncs;
  add_optional(memsets, o.memsets);
  stream_waits += o.stream_waits;
  graph_breaks += o.graph_breaks;
  recompiles += o.recompiles;
  capture_blockers += o.capture_blockers;
  for (const auto& [name, c] : o.collectives) {
    collectives[name].count += c.count;
    collectives[name].bytes += c.bytes;
  }
  memory.add(o.memory);
  add_optional(gpu_time_ns, o.gpu_time_ns);
  add_optional(gpu_span_ns, o.gpu_span_ns);
}

bool PhaseCounts::operator==(const PhaseCounts& o) const {
  return launches == o.launches && launches_by_op == o.launches_by_op && h2d == o.h2d &&
         d2h == o.d2h && d2d == o.d2d && cross_device == o.cross_device && syncs == o.syncs &&
         collective_syncs == o.collective_syncs && collective_waits == o.collective_waits &&
         sync_wait_ns == o.sync_wait_ns &&
         timed_syncs == o.timed_syncs && memsets == o.memsets && stream_waits == o.stream_waits &&
         graph_breaks == o.graph_breaks && recompiles == o.recompiles &&
         capture_blockers == o.capture_blockers &&
         collectives == o.collectives && memory == o.memory && gpu_time_ns == o.gpu_time_ns &&
         gpu_span_ns == o.gpu_span_ns;
}

PhaseCounts Counts::total() const {
  PhaseCounts sum;
  for (const auto& [_, c] : phases) sum.add(c);
  sum.memory.add(memory);
  return sum;
}

void Counts::add(const Counts& o) {
  for (const auto& [phase, c] : o.phases) phases[phase].add(c);
  for (const auto& [site, t] : o.sync_sites) sync_sites[site].add(t);
  for (const auto& [site, t] : o.copy_sites) copy_sites[site].add(t);
  for (const auto& [site, n] : o.event_sites) event_sites[site] += n;
  memory.add(o.memory);
}

namespace {

std::optional<double> wait_time(const PhaseCounts& c, double divisor) {
  if (c.timed_syncs != c.syncs) return std::nullopt;
  return static_cast<double>(c.sync_wait_ns) / divisor;
}

std::optional<double> divided(const std::optional<int64_t>& n, double divisor) {
  if (!n) return std::nullopt;
  return static_cast<double>(*n) / divisor;
}

}  // namespace

std::vector<Measurement> to_measurements(const PhaseCounts& c, double divisor) {
  auto v = [divisor](int64_t x) { return static_cast<double>(x) / divisor; };
  std::vector<Measurement> out = {
      {"launch.count", v(c.launches), "count", "device ops (kernels) launched"},
      {"h2d.count", v(c.h2d.count), "count", "host-to-device copies"},
      {"h2d.bytes", v(c.h2d.bytes), "bytes", "bytes copied host-to-device"},
      {"h2d.pinned", v(c.h2d.pinned), "count", "host-to-device copies from page-locked memory"},
      {"d2h.count", v(c.d2h.count), "count", "device-to-host copies"},
      {"d2h.bytes", v(c.d2h.bytes), "bytes", "bytes copied device-to-host"},
      {"d2h.pinned", v(c.d2h.pinned), "count", "device-to-host copies into page-locked memory"},
      {"d2d.count", v(c.d2d.count), "count", "device-to-device copies"},
      {"d2d.bytes", v(c.d2d.bytes), "bytes", "bytes copied device-to-device"},
      {"cross_device_copy.count", v(c.cross_device.count), "count",
       "copies to or from a device other than the current one (another rank's device)"},
      {"cross_device_copy.bytes", v(c.cross_device.bytes), "bytes",
       "bytes copied to or from a device other than the current one"},
      {"sync.count", v(c.syncs), "count", "host-device synchronizations"},
      {"sync.collective_wait.count", v(c.collective_syncs), "count",
       "synchronizations that waited for a collective on the host: barrier(), collectives on CPU "
       "tensors"},
      {"sync.other.count", v(c.syncs - c.collective_syncs), "count",
       "synchronizations other than waits for a collective"},
      {"collective_wait.count", v(c.collective_waits), "count",
       "waits for a collective on device tensors: device-side (the stream waits, as with NCCL), "
       "not host syncs"},
      {"sync.wait_time", wait_time(c, divisor), "ns",
       "host time spent waiting in host-device synchronizations (null: not every sync was timed)"},
      {"gpu_time", divided(c.gpu_time_ns, divisor), "ns",
       "summed durations of the device's kernels, memcpys and memsets (null: not measured, as on "
       "sim and cpu)"},
      {"memset.count", divided(c.memsets, divisor), "count",
       "device memsets (null: not measured, as on sim and cpu, where a fill is a launch)"},
      {"stream_wait.count", v(c.stream_waits), "count",
       "stream-wait-event (device-side waits, not host syncs)"},
      {"graph_break.count", v(c.graph_breaks), "count",
       "graph breaks crossed in compiled code (torch.compile: a graph that ended where dynamo "
       "could not go on)"},
      {"recompile.count", v(c.recompiles), "count",
       "recompilations of compiled code (torch.compile: a guard failed)"},
      {"capture.blockers", v(c.capture_blockers), "count",
       "what would stop the work from being captured in a CUDA graph: syncs, copies from or "
       "into pageable host memory, and other blockers (CPU tensors read by device ops, ...)"},
  };
  int64_t coll_count = 0, coll_bytes = 0;
  for (const auto& [name, t] : c.collectives) {
    coll_count += t.count;
    coll_bytes += t.bytes;
    out.push_back({"collective." + name + ".count", v(t.count), "count", name + " calls"});
    out.push_back({"collective." + name + ".bytes", v(t.bytes), "bytes", name + " payload bytes"});
  }
  out.push_back({"collective.count", v(coll_count), "count", "collective calls"});
  out.push_back({"collective.bytes", v(coll_bytes), "bytes", "collective payload bytes"});
  return out;
}

std::vector<Measurement> memory_measurements(const PhaseCounts& c) {
  auto v = [](const std::optional<int64_t>& x) -> std::optional<double> {
    if (!x) return std::nullopt;
    return static_cast<double>(*x);
  };
  // The same descriptions for `total` (the measured window) and each phase.
  auto described = [](const char* what) {
    return std::string(what) + "; a variant merged over ranks sums its ranks' figures";
  };
  return {
      {"memory.peak_bytes", v(c.memory.device.peak), "bytes",
       described("most device memory allocated at once during the phase or window (the rank's own "
                 "device; what was allocated when it began included)")},
      {"memory.allocated_bytes", v(c.memory.device.allocated), "bytes",
       described("device memory allocated at the end of the phase (its last occurrence) or "
                 "window")},
      {"memory.reserved_peak_bytes", v(c.memory.reserved.peak), "bytes",
       described("the most device memory the caching allocator held reserved at once (its "
                 "segments: on sim, what CUDA's would reserve for the same requests; "
                 "torch.cuda.max_memory_reserved)")},
      {"memory.reserved_bytes", v(c.memory.reserved.allocated), "bytes",
       described("device memory the caching allocator held reserved at the end of the phase "
                 "or window")},
      {"host_memory.peak_bytes", v(c.memory.host.peak), "bytes",
       described("most bytes held by CPU tensors at once during the phase or window (pageable "
                 "memory of c10's CPU allocator; what was held when it began included)")},
      {"host_memory.allocated_bytes", v(c.memory.host.allocated), "bytes",
       described("bytes held by CPU tensors at the end of the phase (its last occurrence) or "
                 "window")},
  };
}

std::vector<Measurement> phase_only_measurements(const PhaseCounts& c) {
  std::optional<double> span;
  if (c.gpu_span_ns) span = static_cast<double>(*c.gpu_span_ns);
  return {
      {"gpu_span", span, "ns",
       "GPU wall span of the phase: from the start of its first kernel, memcpy or memset to the "
       "end of its last, summed over its occurrences (null: not measured, as on sim and cpu)"}};
}

std::vector<SyncSite> to_sync_sites(const Counts& counts) {
  std::vector<SyncSite> out;
  for (const auto& [key, t] : counts.sync_sites) {
    SyncSite site{key.phase, key.op, key.reason, t.count};
    if (t.timed == t.count) site.wait_ns = t.wait_ns;
    site.frame = key.frame;
    site.library = key.library;
    site.allowed = key.allowed;
    out.push_back(std::move(site));
  }
  return out;
}

std::vector<CopySite> to_copy_sites(const Counts& counts) {
  std::vector<CopySite> out;
  for (const auto& [key, t] : counts.copy_sites) {
    out.push_back({key.phase, key.kind, key.how, key.frame, key.library, t.count, t.bytes});
  }
  return out;
}

std::vector<EventSite> to_event_sites(const Counts& counts) {
  std::vector<EventSite> out;
  for (const auto& [key, n] : counts.event_sites) {
    out.push_back({key.kind, key.phase, key.what, key.frame, key.library, n});
  }
  return out;
}

}  // namespace harness

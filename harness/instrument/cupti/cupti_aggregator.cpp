#include "harness/instrument/cupti/cupti_aggregator.h"

#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>
#include <cxxabi.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <utility>

#include "harness/instrument/collector.h"
#include "harness/instrument/trace.h"

namespace harness::cupti {
namespace {

bool host_kind_pinned(uint8_t kind) { return kind == CUPTI_ACTIVITY_MEMORY_KIND_PINNED; }

// Kernel names come mangled ("_ZN2at6native..."); reports and traces show them demangled.
std::string demangled(const char* name) {
  if (name == nullptr) return "(unnamed kernel)";
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> out(abi::__cxa_demangle(name, nullptr, nullptr, &status),
                                             std::free);
  return status == 0 && out ? std::string(out.get()) : std::string(name);
}

// When and where a device record (kernel, memcpy, memset) ran.
template <class Pending, class Record>
void set_time_and_place(Pending& p, const Record& r) {
  p.start = r.start;
  p.end = r.end;
  p.device = r.deviceId;
  p.stream = r.streamId;
}

const char* copy_name(CopyKind kind) {
  switch (kind) {
    case CopyKind::HostToDevice: return "memcpy HtoD";
    case CopyKind::DeviceToHost: return "memcpy DtoH";
    case CopyKind::DeviceToDevice: break;
  }
  return "memcpy DtoD";
}

// How a runtime or driver call makes the host wait: not at all, as a synchronize (named as
// SYNCHRONIZATION records are, so that a site is the same whichever CUPTI counted it), or as a
// synchronous memcpy, which waits when one side is host memory (CUDA's API synchronization
// behavior: a device-to-device cudaMemcpy does not block the host).
enum class Blocking { None, Synchronize, CopyWithHost };
struct BlockingCall {
  Blocking how = Blocking::None;
  const char* site = nullptr;  // for Synchronize
};

BlockingCall blocking(bool driver, uint32_t cbid) {
  constexpr BlockingCall kContext{Blocking::Synchronize, "context synchronize"};
  constexpr BlockingCall kStream{Blocking::Synchronize, "stream synchronize"};
  constexpr BlockingCall kEvent{Blocking::Synchronize, "event synchronize"};
  constexpr BlockingCall kCopy{Blocking::CopyWithHost};
  if (driver) {
    switch (cbid) {
      case CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize:
      case CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize_v2: return kContext;
      case CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize:
      case CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize_ptsz: return kStream;
      case CUPTI_DRIVER_TRACE_CBID_cuEventSynchronize: return kEvent;
      case CUPTI_DRIVER_TRACE_CBID_cuMemcpy:
      case CUPTI_DRIVER_TRACE_CBID_cuMemcpy_ptds:
      case CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD:
      case CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2:
      case CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2_ptds:
      case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH:
      case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2:
      case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2_ptds:
      case CUPTI_DRIVER_TRACE_CBID_cuMemcpy2D:
      case CUPTI_DRIVER_TRACE_CBID_cuMemcpy2D_v2:
      case CUPTI_DRIVER_TRACE_CBID_cuMemcpy2D_v2_ptds:
      case CUPTI_DRIVER_TRACE_CBID_cuMemcpy3D:
      case CUPTI_DRIVER_TRACE_CBID_cuMemcpy3D_v2:
      case CUPTI_DRIVER_TRACE_CBID_cuMemcpy3D_v2_ptds: return kCopy;
      default: return {};
    }
  }
  switch (cbid) {
    case CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaThreadSynchronize_v3020: return kContext;
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_ptsz_v7000: return kStream;
    case CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020: return kEvent;
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_ptds_v7000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2D_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2D_ptds_v7000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3D_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3D_ptds_v7000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToSymbol_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToSymbol_ptds_v7000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromSymbol_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromSymbol_ptds_v7000: return kCopy;
    default: return {};
  }
}

}  // namespace

uint64_t CuptiAggregator::phase_id(const std::string& phase) {
  auto [it, added] = ids_.emplace(phase, names_.size());
  if (added) names_.push_back(phase);
  return it->second;
}

void CuptiAggregator::phase_began(uint64_t id, int64_t at_ns) {
  open_phases_.push_back(id);
  transitions_.push_back({at_ns, id});
  began_at_[id].push_back(at_ns);
}

void CuptiAggregator::phase_ended(int64_t at_ns) {
  if (!open_phases_.empty()) open_phases_.pop_back();
  transitions_.push_back({at_ns, open_phases_.empty() ? 0 : open_phases_.back()});
}

void CuptiAggregator::set_trace(TraceRecorder* trace, ApiNamer namer) {
  trace_ = trace;
  api_namer_ = std::move(namer);
}

void CuptiAggregator::consume(const CUpti_Activity* record) {
  switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      Pending p{What::Kernel, k->correlationId, demangled(k->name)};
      set_time_and_place(p, *k);
      pending_.push_back(std::move(p));
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
      Pending p{What::Memcpy, m->correlationId, {}};
      switch (m->copyKind) {
        case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
          p.copy_kind = CopyKind::HostToDevice;
          p.host_pinned = host_kind_pinned(m->srcKind);
          break;
        case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
          p.copy_kind = CopyKind::DeviceToHost;
          p.host_pinned = host_kind_pinned(m->dstKind);
          break;
        case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
        case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: p.copy_kind = CopyKind::DeviceToDevice; break;
        default: return;  // host-to-host and array copies are not part of the contract
      }
      p.name = copy_name(p.copy_kind);
      p.cross_device = m->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_PTOP ||
                       (home_device_ >= 0 && static_cast<int>(m->deviceId) != home_device_);
      p.bytes = static_cast<int64_t>(m->bytes);
      p.copies = m->copyCount > 0 ? static_cast<int64_t>(m->copyCount) : 1;
      set_time_and_place(p, *m);
      pending_.push_back(std::move(p));
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY2: {
      // Peer-to-peer: device to device, between the two devices it names.
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpyPtoP4*>(record);
      Pending p{What::Memcpy, m->correlationId, copy_name(CopyKind::DeviceToDevice)};
      const auto foreign = [this](uint32_t device) {
        return home_device_ >= 0 && static_cast<int>(device) != home_device_;
      };
      p.cross_device =
          m->srcDeviceId != m->dstDeviceId || foreign(m->srcDeviceId) || foreign(m->dstDeviceId);
      p.bytes = static_cast<int64_t>(m->bytes);
      set_time_and_place(p, *m);
      pending_.push_back(std::move(p));
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
      Pending p{What::Memset, m->correlationId, "memset"};
      set_time_and_place(p, *m);
      pending_.push_back(std::move(p));
      break;
    }
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
      const auto* s = reinterpret_cast<const CUpti_ActivitySynchronization2*>(record);
      Pending p{What::Sync, s->correlationId, {}};
      switch (s->type) {
        case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE: p.name = "stream synchronize"; break;
        case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE: p.name = "context synchronize"; break;
        case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE: p.name = "event synchronize"; break;
        case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT:
          p.what = What::StreamWait;
          p.name = "stream wait event";
          break;
        default: return;  // queries and unknown types are not syncs
      }
      p.start = s->start;
      p.end = s->end;
      p.stream = s->streamId;
      pending_.push_back(std::move(p));
      break;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
      const auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(record);
      // A runtime call and the driver call inside it may share a correlationId: keep the outer.
      const bool driver = record->kind == CUPTI_ACTIVITY_KIND_DRIVER;
      auto [it, added] = api_calls_.try_emplace(a->correlationId,
                                                ApiCall{driver, a->cbid, a->start, a->end, a->threadId});
      if (!added && it->second.driver && !driver) it->second = {driver, a->cbid, a->start, a->end, a->threadId};
      break;
    }
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
      const auto* e = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(record);
      if (e->externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0) {
        external_of_[e->correlationId] = e->externalId;
      }
      break;
    }
    default: break;
  }
}

void CuptiAggregator::add_syncs_of_calls() {
  // What the device records say: the calls a SYNCHRONIZATION record is correlated to, and the
  // calls that copied between host and device.
  std::unordered_set<uint32_t> recorded;
  std::unordered_map<uint32_t, CopyKind> host_copies;
  for (const Pending& p : pending_) {
    if (p.what == What::Sync) recorded.insert(p.correlation);
    if (p.what == What::Memcpy && p.copy_kind != CopyKind::DeviceToDevice) {
      host_copies.emplace(p.correlation, p.copy_kind);
    }
  }
  // Runtime calls per thread, by start: the driver calls made inside one are part of it (kept
  // only when a driver call blocks: most windows have none).
  std::unordered_map<uint32_t, std::vector<std::pair<uint64_t, uint32_t>>> runtime_calls;
  const bool driver_blocks = std::any_of(api_calls_.begin(), api_calls_.end(), [](const auto& c) {
    return c.second.driver && blocking(true, c.second.cbid).how != Blocking::None;
  });
  if (driver_blocks) {
    for (const auto& [correlation, call] : api_calls_) {
      if (!call.driver) runtime_calls[call.thread].emplace_back(call.start, correlation);
    }
    for (auto& [thread, calls] : runtime_calls) std::sort(calls.begin(), calls.end());
  }
  const auto outer_call = [&](uint32_t correlation, const ApiCall& call) {
    if (!call.driver || (call.start == 0 && call.end == 0)) return correlation;  // untimed
    auto thread = runtime_calls.find(call.thread);
    if (thread == runtime_calls.end()) return correlation;
    const auto& calls = thread->second;
    auto after =
        std::upper_bound(calls.begin(), calls.end(), std::make_pair(call.start, UINT32_MAX));
    if (after == calls.begin()) return correlation;
    const uint32_t runtime = std::prev(after)->second;
    return api_calls_.at(runtime).end >= call.end ? runtime : correlation;
  };
  // One wait per outermost call: covered when a record is correlated to it or a call inside it.
  struct Wait {
    BlockingCall how;
    bool recorded = false;
    std::optional<CopyKind> host_copy;
  };
  std::map<uint32_t, Wait> waits;  // by the outermost call's correlation id
  for (const auto& [correlation, call] : api_calls_) {
    const BlockingCall how = blocking(call.driver, call.cbid);
    if (how.how == Blocking::None) continue;
    const uint32_t outer = outer_call(correlation, call);
    Wait& w = waits[outer];
    if (w.how.how == Blocking::None || outer == correlation) w.how = how;
    for (uint32_t id : {correlation, outer}) {
      if (recorded.count(id)) w.recorded = true;
      if (auto copy = host_copies.find(id); copy != host_copies.end()) w.host_copy = copy->second;
    }
  }
  for (const auto& [correlation, w] : waits) {
    if (w.recorded) continue;
    const char* site = w.how.site;
    if (w.how.how == Blocking::CopyWithHost) {
      if (!w.host_copy) continue;  // device to device (or no copy seen): the host did not wait
      site = *w.host_copy == CopyKind::HostToDevice ? "blocking copy H2D" : "blocking copy D2H";
    }
    const ApiCall& call = api_calls_.at(correlation);
    Pending p{What::Sync, correlation, site};
    p.from_call = true;
    p.start = call.start;
    p.end = call.end;
    pending_.push_back(std::move(p));
  }
}

uint64_t CuptiAggregator::phase_of(const Pending& p) const {
  if (auto ext = external_of_.find(p.correlation); ext != external_of_.end()) {
    return ext->second < names_.size() ? ext->second : 0;
  }
  auto call = api_calls_.find(p.correlation);
  if (call == api_calls_.end() || call->second.start == 0) return 0;
  const int64_t at = static_cast<int64_t>(call->second.start) + clock_offset_ns_;
  auto after = std::upper_bound(transitions_.begin(), transitions_.end(), at,
                                [](int64_t t, const Transition& x) { return t < x.at_ns; });
  return after == transitions_.begin() ? 0 : std::prev(after)->innermost;
}

int64_t CuptiAggregator::occurrence_of(const Pending& p, uint64_t id) const {
  auto begins = began_at_.find(id);
  if (begins == began_at_.end()) return INT64_MIN;
  auto call = api_calls_.find(p.correlation);
  const uint64_t issued =
      call != api_calls_.end() && call->second.start != 0 ? call->second.start : p.start;
  const int64_t at = static_cast<int64_t>(issued) + clock_offset_ns_;
  const std::vector<int64_t>& b = begins->second;
  auto after = std::upper_bound(b.begin(), b.end(), at);
  return after == b.begin() ? INT64_MIN : *std::prev(after);
}

void CuptiAggregator::trace_record(const Pending& p, const std::string& phase,
                                   std::unordered_set<uint32_t>& calls_traced) {
  if (p.start == 0 && p.end == 0) return;  // CUPTI could not time it
  const int64_t start = static_cast<int64_t>(p.start) + clock_offset_ns_;
  const int64_t end = static_cast<int64_t>(std::max(p.end, p.start)) + clock_offset_ns_;
  if (p.what == What::Sync) {
    TraceArgs args = {{"phase", phase}};
    if (p.from_call) {
      args["counted from"] = "api call, no record";
    } else {
      args["stream"] = p.stream;
    }
    trace_->add_span("syncs", p.name, "sync", start, end, std::move(args));
    return;
  }
  if (p.what == What::StreamWait) {
    trace_->add_span("syncs", p.name, "stream wait", start, end,
                     {{"phase", phase}, {"correlation", p.correlation}, {"stream", p.stream}});
    return;
  }
  TraceArgs args = {{"phase", phase}};
  std::string name = p.name;
  DeviceWork kind = DeviceWork::Kernel;
  if (p.what == What::Memcpy) {
    kind = DeviceWork::Memcpy;
    name = trace_memcpy_name(p.copy_kind, p.host_pinned, p.cross_device);
    args["bytes"] = p.bytes;
    args["host memory"] = p.host_pinned ? "pinned" : "pageable";
  } else if (p.what == What::Memset) {
    kind = DeviceWork::Memset;
    name = "Memset (Device)";
  }
  trace_->add_device_work(kind, name, static_cast<int>(p.device), p.stream, p.correlation, start,
                          end, std::move(args));
  auto call = api_calls_.find(p.correlation);
  if (call == api_calls_.end() || call->second.start == 0) return;
  if (!calls_traced.insert(p.correlation).second) return;  // one call, several records
  const ApiCall& c = call->second;
  const std::string api = api_namer_ ? api_namer_(c.driver, c.cbid)
                                     : (c.driver ? "driver cbid " : "runtime cbid ") +
                                           std::to_string(c.cbid);
  trace_->add_host_call("", api, p.correlation, static_cast<int64_t>(c.start) + clock_offset_ns_,
                        static_cast<int64_t>(std::max(c.end, c.start)) + clock_offset_ns_,
                        {{"phase", phase}, {"cbid", c.cbid}}, c.thread);
}

Counts CuptiAggregator::resolve() {
  Counts counts;
  std::unordered_set<uint32_t> calls_traced;
  const uint64_t uncounted = phase_id(kUncountedPhase);
  // Per phase: its device work's duration, whether a record of it had no time, and per
  // occurrence (phase, when it began) the first start and last end of its device work.
  std::map<std::string, int64_t> gpu_ns;
  std::set<std::string> untimed;
  std::map<std::pair<std::string, int64_t>, std::pair<uint64_t, uint64_t>> spans;
  add_syncs_of_calls();
  for (const Pending& p : pending_) {
    const uint64_t id = phase_of(p);
    if (id == uncounted) continue;
    const std::string& phase = names_[id];
    if (trace_) trace_record(p, phase, calls_traced);
    PhaseCounts& c = counts.phases[phase];
    if (!c.memsets) c.memsets = 0;  // measured: CUPTI records memsets
    const bool timed = (p.start != 0 || p.end != 0) && p.end >= p.start;
    const int64_t duration = timed ? static_cast<int64_t>(p.end - p.start) : kNotTimed;
    if (p.what == What::Kernel || p.what == What::Memcpy || p.what == What::Memset) {
      if (timed) {
        gpu_ns[phase] += duration;
        auto [span, added] = spans.try_emplace({phase, occurrence_of(p, id)}, p.start, p.end);
        if (!added) {
          span->second.first = std::min(span->second.first, p.start);
          span->second.second = std::max(span->second.second, p.end);
        }
      } else {
        untimed.insert(phase);
      }
    }
    switch (p.what) {
      case What::Kernel:
        c.launches += 1;
        c.launches_by_op[p.name] += 1;
        break;
      case What::Memcpy: {
        CopyTally& t = c.copies(p.copy_kind);
        t.count += p.copies;
        t.bytes += p.bytes;
        if (p.host_pinned) t.pinned += p.copies;
        if (p.cross_device) {
          c.cross_device.count += p.copies;
          c.cross_device.bytes += p.bytes;
        }
        break;
      }
      case What::Memset: *c.memsets += 1; break;
      case What::Sync:
        c.add_sync(duration);
        counts.sync_sites[{phase, "cuda", p.name}].add_sync(duration);
        break;
      case What::StreamWait: c.stream_waits += 1; break;
    }
  }
  for (const auto& [key, span] : spans) {
    std::optional<int64_t>& sum = counts.phases[key.first].gpu_span_ns;
    sum = sum.value_or(0) + static_cast<int64_t>(span.second - span.first);
  }
  // Every phase with a record was measured: what it has no device work of took 0 ns.
  // A phase with an untimed record has no figures: a sum without it would be too low.
  for (auto& [phase, c] : counts.phases) {
    if (untimed.count(phase)) {
      c.gpu_time_ns.reset();
      c.gpu_span_ns.reset();
      continue;
    }
    auto ns = gpu_ns.find(phase);
    c.gpu_time_ns = ns == gpu_ns.end() ? 0 : ns->second;
    if (!c.gpu_span_ns) c.gpu_span_ns = 0;
  }
  pending_.clear();
  external_of_.clear();
  api_calls_.clear();
  // Later records start after now: keep only the boundary that says what is open now, and when
  // the open phases began (so that what is kept does not grow with the run).
  transitions_ = {{INT64_MIN, open_phases_.empty() ? 0 : open_phases_.back()}};
  std::unordered_map<uint64_t, std::vector<int64_t>> open_began;
  for (uint64_t id : open_phases_) {
    auto b = began_at_.find(id);
    if (b != began_at_.end() && !b->second.empty()) open_began[id] = {b->second.back()};
  }
  began_at_ = std::move(open_began);
  return counts;
}

}  // namespace harness::cupti

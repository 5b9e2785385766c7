#include "harness/instrument/cupti/cupti_aggregator.h"

namespace harness::cupti {
namespace {

bool host_kind_pinned(uint8_t kind) { return kind == CUPTI_ACTIVITY_MEMORY_KIND_PINNED; }

}  // namespace

uint64_t CuptiAggregator::phase_id(const std::string& phase) {
  auto [it, added] = ids_.emplace(phase, names_.size());
  if (added) names_.push_back(phase);
  return it->second;
}

void CuptiAggregator::consume(const CUpti_Activity* record) {
  switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      pending_.push_back({What::Kernel, k->correlationId, k->name ? k->name : "(unnamed kernel)"});
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
      p.cross_device = m->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_PTOP ||
                       (home_device_ >= 0 && static_cast<int>(m->deviceId) != home_device_);
      p.bytes = static_cast<int64_t>(m->bytes);
      p.copies = m->copyCount > 0 ? static_cast<int64_t>(m->copyCount) : 1;
      pending_.push_back(std::move(p));
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
      pending_.push_back({What::Memset, m->correlationId, "memset"});
      break;
    }
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
      const auto* s = reinterpret_cast<const CUpti_ActivitySynchronization2*>(record);
      switch (s->type) {
        case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE:
          pending_.push_back({What::Sync, s->correlationId, "stream synchronize"});
          break;
        case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE:
          pending_.push_back({What::Sync, s->correlationId, "context synchronize"});
          break;
        case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE:
          pending_.push_back({What::Sync, s->correlationId, "event synchronize"});
          break;
        case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT:
          pending_.push_back({What::StreamWait, s->correlationId, "stream wait event"});
          break;
        default: break;  // queries and unknown types are not syncs
      }
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

Counts CuptiAggregator::resolve() {
  Counts counts;
  for (const Pending& p : pending_) {
    auto ext = external_of_.find(p.correlation);
    const std::string& phase = ext != external_of_.end() && ext->second < names_.size()
                                   ? names_[ext->second]
                                   : names_[0];
    PhaseCounts& c = counts.phases[phase];
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
      case What::Memset: c.memsets += 1; break;
      case What::Sync:
        c.syncs += 1;
        counts.sync_sites[{phase, "cuda", p.name}] += 1;
        break;
      case What::StreamWait: c.stream_waits += 1; break;
    }
  }
  pending_.clear();
  external_of_.clear();
  return counts;
}

}  // namespace harness::cupti

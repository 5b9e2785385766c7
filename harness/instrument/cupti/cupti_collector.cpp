// The live side of the CUPTI instrument: subscription, activity buffers, phase correlation.
// What the records mean is decided in cupti_aggregator.cpp.
#include "harness/instrument/cupti/cupti_collector.h"

#include <c10/core/DeviceType.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <cupti.h>

#include <cstdlib>
#include <optional>
#include <mutex>
#include <string>
#include <vector>

#include "harness/instrument/collector.h"
#include "harness/instrument/cupti/cupti_aggregator.h"
#include "harness/instrument/phase.h"
#include "harness/instrument/trace.h"

namespace harness::cupti {
namespace {

constexpr size_t kBufferBytes = 8 << 20;
constexpr size_t kBufferAlign = 8;
// MEMCPY2: peer-to-peer copies, which MEMCPY does not carry. RUNTIME and DRIVER: the calls, for
// the phase of other threads' records and the syncs CUPTI gives no SYNCHRONIZATION record for.
constexpr CUpti_ActivityKind kKinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
    CUPTI_ACTIVITY_KIND_MEMCPY2,           CUPTI_ACTIVITY_KIND_MEMSET,
    CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,   CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
    CUPTI_ACTIVITY_KIND_RUNTIME,           CUPTI_ACTIVITY_KIND_DRIVER};

std::string cupti_message(CUptiResult r) {
  const char* text = nullptr;
  cuptiGetResultString(r, &text);
  return text ? text : ("CUPTI error " + std::to_string(static_cast<int>(r)));
}


// CUPTI's buffer callbacks are plain functions: they reach the one live instrument through this.
std::mutex g_mu;
CuptiAggregator* g_aggregator = nullptr;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kBufferAlign, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream, uint8_t* buffer, size_t,
                               size_t valid) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    CUpti_Activity* record = nullptr;
    while (g_aggregator &&
           cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
      g_aggregator->consume(record);
    }
    size_t dropped = 0;
    if (g_aggregator && cuptiActivityGetNumDroppedRecords(context, stream, &dropped) ==
                            CUPTI_SUCCESS) {
      g_aggregator->add_dropped(dropped);
    }
  }
  std::free(buffer);
}

void CUPTIAPI on_callback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

// CUPTI stamps its records with the trace's clock, so records, phases and the trace share one
// time base (phases are placed on other threads' calls by time, see cupti_aggregator.h).
uint64_t CUPTIAPI trace_timestamp() { return static_cast<uint64_t>(trace_clock_ns()); }

// LibTorch's CUDA device interface (registered when libtorch_cuda is loaded).
const c10::impl::DeviceGuardImplInterface* cuda_runtime() {
  return c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
}

// "cudaLaunchKernel_v7000" -> "cudaLaunchKernel".
std::string api_name(bool driver, uint32_t cbid) {
  const char* name = nullptr;
  if (cuptiGetCallbackName(driver ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API, cbid,
                           &name) != CUPTI_SUCCESS ||
      name == nullptr) {
    return (driver ? "driver call " : "runtime call ") + std::to_string(cbid);
  }
  std::string out = name;
  const size_t v = out.rfind("_v");
  if (v != std::string::npos && v + 2 < out.size() &&
      out.find_first_not_of("0123456789", v + 2) == std::string::npos) {
    out.erase(v);
  }
  return out;
}

// Collectives are host-side calls (c10d through the counting backend), not CUDA activity: on
// cuda they come from the same EventCollector the sim device uses. Only their names and bytes are
// taken; the syncs and copies they cause are what CUPTI sees. A phase CUPTI saw no record in had
// no GPU work: 0 ns.
void add_collectives(Counts& into, const Counts& host) {
  for (const auto& [phase, c] : host.phases) {
    if (c.collectives.empty()) continue;
    auto [it, added] = into.phases.try_emplace(phase);
    if (added) {
      it->second.gpu_time_ns = 0;
      it->second.gpu_span_ns = 0;
    }
    for (const auto& [name, tally] : c.collectives) {
      CollectiveTally& t = it->second.collectives[name];
      t.count += tally.count;
      t.bytes += tally.bytes;
    }
  }
}

// cuptiSubscribe_v2 where the headers have it (CUDA 12.9+): the subscriber is named ("CUPTI for
// harness bench" in other tools' messages), and a refusal names the tool that holds CUPTI. From
// CUPTI 13.3 it also asks for multi-subscriber mode, so that bench counts beside nsys or
// torch.profiler instead of giving up (not tried on a GPU yet: no 13.3 toolkit here).
CUptiResult subscribe(CUpti_SubscriberHandle* handle, std::string* holder) {
#ifdef CUpti_SubscriberParams_STRUCT_SIZE
  char old_name[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN * 2] = {};
  CUpti_SubscriberParams params{};
  params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
  params.subscriberName = "harness bench";
  params.oldSubscriberName = old_name;
  params.oldSubscriberSize = sizeof old_name;
#if CUPTI_API_VERSION >= 130300
  params.allowMultipleSubscribers = 1;
#endif
  const CUptiResult r = cuptiSubscribe_v2(handle, &on_callback, nullptr, &params);
  old_name[sizeof old_name - 1] = '\0';
  *holder = old_name;
  return r;
#else
  holder->clear();
  return cuptiSubscribe(handle, &on_callback, nullptr);
#endif
}

class CuptiInstrument final : public Instrument, public PhaseListener {
 public:
  CuptiInstrument() {
    std::string holder;
    CUptiResult r = subscribe(&subscriber_, &holder);
    if (r != CUPTI_SUCCESS) {
      status_ = subscribe_failure_status(r, cupti_message(r), holder);
      return;
    }
    if (cuptiActivityRegisterTimestampCallback(&trace_timestamp) != CUPTI_SUCCESS) {
      uint64_t cupti_now = 0;
      cuptiGetTimestamp(&cupti_now);
      aggregator_.set_clock_offset(trace_clock_ns() - static_cast<int64_t>(cupti_now));
    }
    r = cuptiActivityRegisterCallbacks(&buffer_requested, &buffer_completed);
    if (r != CUPTI_SUCCESS) {
      status_ = "unavailable: cuptiActivityRegisterCallbacks: " + cupti_message(r);
      return;
    }
    {
      std::lock_guard<std::mutex> lock(g_mu);
      g_aggregator = &aggregator_;
    }
    add_phase_listener(this);
    available_ = true;
  }

  ~CuptiInstrument() override {
    if (available_) {
      stop();
      remove_phase_listener(this);
      std::lock_guard<std::mutex> lock(g_mu);
      g_aggregator = nullptr;
    }
    if (subscriber_) cuptiUnsubscribe(subscriber_);
  }

  std::string name() const override { return "cupti"; }
  std::string status() const override {
    uint64_t dropped = 0;
    {
      std::lock_guard<std::mutex> lock(g_mu);
      dropped = aggregator_.dropped();
    }
    if (available_ && dropped > 0) {
      return "degraded: " + std::to_string(dropped) + " activity records dropped";
    }
    return status_;
  }
  bool available() const override { return available_; }
  std::string version() const override {
    uint32_t v = 0;
    return cuptiGetVersion(&v) == CUPTI_SUCCESS ? std::to_string(v) : "";
  }
  bool measures_launches() const override { return available_; }

  void attach_trace(TraceRecorder* trace) override {
    std::lock_guard<std::mutex> lock(g_mu);
    aggregator_.set_trace(trace, &api_name);
  }

  // Activity kinds are switched on and off with the window; records are read out only in take()
  // (a flush per step would cost more than the step).
  void start() override {
    if (!available_ || enabled_) return;
    for (CUpti_ActivityKind kind : kKinds) {
      const CUptiResult r = cuptiActivityEnable(kind);
      if (r != CUPTI_SUCCESS) {
        status_ = "unavailable: cuptiActivityEnable: " + cupti_message(r);
        available_ = false;
        return;
      }
    }
    {
      std::lock_guard<std::mutex> lock(g_mu);
      aggregator_.set_home_device(cuda_runtime()->getDevice().index());
    }
    host_scope_.emplace(host_events_);
    enabled_ = true;
  }

  void stop() override {
    if (!enabled_) return;
    host_scope_.reset();
    for (CUpti_ActivityKind kind : kKinds) cuptiActivityDisable(kind);
    enabled_ = false;
  }

  // The device finishes what was issued; the wait is in kUncountedPhase, which is not counted.
  void drain() override {
    if (!available_) return;
    const c10::impl::DeviceGuardImplInterface* cuda = cuda_runtime();
    Phase uncounted(kUncountedPhase);
    cuda->synchronizeDevice(cuda->getDevice().index());
  }

  Counts take() override {
    if (available_) cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    Counts counts;
    {
      std::lock_guard<std::mutex> lock(g_mu);
      counts = aggregator_.resolve();
    }
    add_collectives(counts, host_events_.snapshot());
    host_events_.clear();
    return counts;
  }

  void on_phase_begin(const char* name) noexcept override {
    uint64_t id = 0;
    try {
      std::lock_guard<std::mutex> lock(g_mu);
      id = aggregator_.phase_id(name);
      aggregator_.phase_began(id, trace_clock_ns());
    } catch (...) {
      // Out of memory: this phase's records are filed under kNoPhase.
    }
    cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, id);
  }
  void on_phase_end(const char*) noexcept override {
    uint64_t ignored = 0;
    cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &ignored);
    try {
      std::lock_guard<std::mutex> lock(g_mu);
      aggregator_.phase_ended(trace_clock_ns());
    } catch (...) {
    }
  }

 private:
  CUpti_SubscriberHandle subscriber_ = nullptr;
  CuptiAggregator aggregator_;
  EventCollector host_events_;  // collectives (see add_collectives)
  std::optional<ScopedCollection> host_scope_;
  std::string status_ = "ok";
  bool available_ = false;
  bool enabled_ = false;
};

}  // namespace

std::string other_subscriber() {
  if (std::getenv("NSYS_PROFILING_SESSION_ID") || std::getenv("NSYS_TARGET_STD_REDIRECT_ACTIVE")) {
    return "Nsight Systems (nsys)";
  }
  if (const char* injection = std::getenv("CUDA_INJECTION64_PATH")) {
    if (*injection != '\0') return std::string("the injection library ") + injection;
  }
  return "another profiler (nsys, ncu, torch.profiler / kineto)";
}

std::string subscribe_failure_status(CUptiResult result, const std::string& cupti_text,
                                     const std::string& holder) {
  // 39 from CUPTI 11.x on; older CUPTI said MAX_LIMIT_REACHED for a second subscriber.
  if (result == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED ||
      result == CUPTI_ERROR_MAX_LIMIT_REACHED) {
    return "degraded: CUPTI is held by " + (holder.empty() ? other_subscriber() : holder) +
           (phases_are_nvtx_ranges()
                ? "; phases are still NVTX ranges, counts are not measured"
                : "; counts are not measured (this build has no NVTX: phases are not ranges "
                  "either)") +
           "; run bench with --nvtx-only under a profiler that needs CUPTI";
  }
  return "unavailable: cuptiSubscribe: " + cupti_text;
}

std::unique_ptr<Instrument> make_cupti_instrument() {
  return std::make_unique<CuptiInstrument>();
}

}  // namespace harness::cupti

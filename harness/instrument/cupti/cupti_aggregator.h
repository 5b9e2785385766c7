#pragma once
// CuptiAggregator: turns CUPTI activity records into Counts, by harness phase, and (when a trace
// is attached) into trace events: kernels, memcpys and memsets on their streams, syncs, the API
// calls that caused them, and a flow arrow from each call to its device work.
//
// Which phase a record belongs to: device records (kernels, memcpys, memsets, synchronizations)
// carry the correlationId of the API call that caused them.
//   1. The collector pushes an external correlation id (kind CUSTOM0) per phase; CUPTI then emits
//      an EXTERNAL_CORRELATION record linking the call to the phase that was on top. Exact, but
//      CUPTI keeps that stack per thread: only calls from the thread that opens phases get one.
//   2. Calls from other threads (the autograd engine runs CUDA backward ops on its own device
//      thread) are placed by time: the phase innermost when the call started, from the phase
//      boundaries the collector reports (phases are process-wide, see phase.h).
// Records arrive in any order, so everything is buffered until resolve(). Kept apart from the
// live collector (cupti_collector.cpp) so that unit tests can feed it synthetic records.
//
// Syncs: SYNCHRONIZATION records of stream, context and event synchronize, cross-checked with the
// runtime and driver API records: a call that makes the host wait (cudaDeviceSynchronize,
// cudaStreamSynchronize, cudaEventSynchronize, their cu* driver forms, and a synchronous memcpy
// between host and device such as cudaMemcpy) without a SYNCHRONIZATION record correlated to it
// is one sync as well, timed by the call itself. CUPTI 13.0 before its Update 1 (API version
// 130000) gives no record for cudaDeviceSynchronize and cuCtxSynchronize_v2, and none gives one
// for a synchronous memcpy. A driver call made inside a runtime call on the same thread (the
// runtime's cudaDeviceSynchronize calls cuCtxSynchronize) is part of it: one sync, covered by a
// record correlated to either.
//
// Copies: MEMCPY records by copy kind; peer-to-peer copies come as MEMCPY2 records
// (CUpti_ActivityMemcpyPtoP4): D2D, cross-device when source and destination differ or either is
// not the home device.
//
// Times: a sync's wait is its SYNCHRONIZATION record's end - start (a sync from a call: the
// call's). A phase's GPU time is the sum of its kernels', memcpys' and memsets' durations; its GPU
// span, summed over its occurrences, is each occurrence's first start to last end, an occurrence
// being the phase's latest begin before the call that issued the record started (or, without the
// call, before the record started).
#include <cupti_activity.h>

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "harness/instrument/counts.h"

namespace harness {
class TraceRecorder;
}

namespace harness::cupti {

// The name of a runtime (driver == false) or driver API function, for the trace.
using ApiNamer = std::function<std::string(bool driver, uint32_t cbid)>;

class CuptiAggregator {
 public:
  // The external id of a phase name (stable for the process); 0 is never used.
  uint64_t phase_id(const std::string& phase);
  // Phase boundaries, on the trace clock (trace_clock_ns()).
  void phase_began(uint64_t id, int64_t at_ns);
  void phase_ended(int64_t at_ns);

  // Takes one activity record of any kind; kinds it does not use are ignored.
  void consume(const CUpti_Activity* record);
  void add_dropped(uint64_t records) { dropped_ += records; }

  // CUPTI timestamp + offset = trace clock (0 when CUPTI already uses the trace clock).
  void set_clock_offset(int64_t ns) { clock_offset_ns_ = ns; }
  // Also put resolved records on this timeline (nullptr: counts only).
  void set_trace(TraceRecorder* trace, ApiNamer namer);

  // Attributes the buffered records to phases and returns their counts; clears the buffer.
  // Records in kUncountedPhase are dropped.
  Counts resolve();
  uint64_t dropped() const { return dropped_; }
  // The GPU this process (rank) owns: a memcpy on another device is cross-device; -1: none, and
  // only peer-to-peer copies are.
  void set_home_device(int device) { home_device_ = device; }

 private:
  enum class What { Kernel, Memcpy, Memset, Sync, StreamWait };
  struct Pending {
    What what;
    uint32_t correlation;
    std::string name;        // kernel name, or the kind of synchronize
    CopyKind copy_kind = CopyKind::DeviceToDevice;
    int64_t bytes = 0;
    int64_t copies = 1;      // copyCount of a memcpy record (batched copies)
    bool host_pinned = false;
    bool cross_device = false;
    bool from_call = false;       // a sync counted from its API call (no SYNCHRONIZATION record)
    uint64_t start = 0, end = 0;  // CUPTI timestamps
    uint32_t device = 0, stream = 0;
  };
  struct ApiCall {
    bool driver;
    uint32_t cbid;
    uint64_t start, end;
    uint32_t thread;
  };
  struct Transition {
    int64_t at_ns;
    uint64_t innermost;  // phase id after the boundary (0: none)
  };

  // Adds a sync for each blocking API call no SYNCHRONIZATION record covers (see the top).
  void add_syncs_of_calls();
  uint64_t phase_of(const Pending& p) const;
  // When the occurrence of phase `id` that issued `p` began (INT64_MIN: before what is kept).
  int64_t occurrence_of(const Pending& p, uint64_t id) const;
  void trace_record(const Pending& p, const std::string& phase,
                    std::unordered_set<uint32_t>& calls_traced);

  std::vector<Pending> pending_;
  std::unordered_map<uint32_t, uint64_t> external_of_;  // correlationId -> external id
  std::unordered_map<uint32_t, ApiCall> api_calls_;     // correlationId -> the call
  std::unordered_map<std::string, uint64_t> ids_;
  std::vector<std::string> names_ = {kNoPhase};  // external id -> phase name
  std::vector<uint64_t> open_phases_;            // the phase stack, as ids
  std::vector<Transition> transitions_;          // sorted by time
  // Phase id -> when it began, in order (the open phases' latest after resolve()).
  std::unordered_map<uint64_t, std::vector<int64_t>> began_at_;
  uint64_t dropped_ = 0;
  int home_device_ = -1;
  int64_t clock_offset_ns_ = 0;
  TraceRecorder* trace_ = nullptr;
  ApiNamer api_namer_;
};

}  // namespace harness::cupti

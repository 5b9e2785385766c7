#pragma once
// CuptiAggregator: turns CUPTI activity records into Counts, by harness phase.
//
// Phases reach CUPTI as external correlation ids (kind CUSTOM0): the collector pushes the id of
// a phase when it opens and pops it when it closes, and CUPTI emits an EXTERNAL_CORRELATION record
// linking each API call's correlationId to the id that was on top. Device records (kernels,
// memcpys, memsets, synchronizations) carry the correlationId of the call that caused them, and
// records arrive in any order, so the aggregator buffers them until resolve(). Kept apart from the
// live collector (cupti_collector.cpp) so that unit tests can feed it synthetic records.
#include <cupti_activity.h>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "harness/instrument/counts.h"

namespace harness::cupti {

class CuptiAggregator {
 public:
  // The external id of a phase name (stable for the process); 0 is never used.
  uint64_t phase_id(const std::string& phase);

  // Takes one activity record of any kind; kinds it does not count are ignored.
  void consume(const CUpti_Activity* record);
  void add_dropped(uint64_t records) { dropped_ += records; }

  // Attributes the buffered records to phases and returns their counts; clears the buffer.
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
  };

  std::vector<Pending> pending_;
  std::unordered_map<uint32_t, uint64_t> external_of_;  // correlationId -> external id
  std::unordered_map<std::string, uint64_t> ids_;
  std::vector<std::string> names_ = {kNoPhase};  // external id -> phase name
  uint64_t dropped_ = 0;
  int home_device_ = -1;
};

}  // namespace harness::cupti

// The CUPTI instrument's counting, fed synthetic activity records (no GPU needed).
#include <gtest/gtest.h>

#include "harness/instrument/cupti/cupti_aggregator.h"

namespace harness::cupti {
namespace {

template <class Record>
void feed(CuptiAggregator& a, Record& r) {
  a.consume(reinterpret_cast<const CUpti_Activity*>(&r));
}

void correlate(CuptiAggregator& a, uint32_t correlation, const std::string& phase) {
  CUpti_ActivityExternalCorrelation e{};
  e.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
  e.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
  e.externalId = a.phase_id(phase);
  e.correlationId = correlation;
  feed(a, e);
}

void kernel(CuptiAggregator& a, uint32_t correlation, const char* name) {
  CUpti_ActivityKernel10 k{};
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.correlationId = correlation;
  k.name = name;
  feed(a, k);
}

void memcpy_record(CuptiAggregator& a, uint32_t correlation, uint8_t kind, uint8_t src,
                   uint8_t dst, uint64_t bytes, uint64_t copies) {
  CUpti_ActivityMemcpy6 m{};
  m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  m.correlationId = correlation;
  m.copyKind = kind;
  m.srcKind = src;
  m.dstKind = dst;
  m.bytes = bytes;
  m.copyCount = copies;
  feed(a, m);
}

void sync_record(CuptiAggregator& a, uint32_t correlation, CUpti_ActivitySynchronizationType t) {
  CUpti_ActivitySynchronization2 s{};
  s.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
  s.correlationId = correlation;
  s.type = t;
  feed(a, s);
}

TEST(CuptiAggregator, KernelsGoToThePhaseOfTheirLaunch) {
  CuptiAggregator a;
  kernel(a, 7, "multi_tensor_apply_kernel");  // the device record may come first
  correlate(a, 7, "optimizer.step");
  kernel(a, 8, "ampere_sgemm");
  correlate(a, 8, "train.forward");
  kernel(a, 99, "orphan");  // no external correlation: outside every phase
  const Counts c = a.resolve();
  EXPECT_EQ(c.phases.at("optimizer.step").launches, 1);
  EXPECT_EQ(c.phases.at("optimizer.step").launches_by_op.at("multi_tensor_apply_kernel"), 1);
  EXPECT_EQ(c.phases.at("train.forward").launches, 1);
  EXPECT_EQ(c.phases.at(kNoPhase).launches, 1);
  EXPECT_EQ(a.resolve().total().launches, 0);  // resolve() empties the buffer
}

TEST(CuptiAggregator, MemcpysByKindSumCopyCountAndTellPinnedFromPageable) {
  CuptiAggregator a;
  correlate(a, 1, "train.data");
  memcpy_record(a, 1, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, CUPTI_ACTIVITY_MEMORY_KIND_PINNED,
                CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 4096, 3);
  memcpy_record(a, 1, CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
                CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE, 4, 1);
  memcpy_record(a, 1, CUPTI_ACTIVITY_MEMCPY_KIND_DTOD, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
                CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 64, 1);
  memcpy_record(a, 1, CUPTI_ACTIVITY_MEMCPY_KIND_PTOP, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
                CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 64, 1);
  memcpy_record(a, 1, CUPTI_ACTIVITY_MEMCPY_KIND_HTOH, CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE,
                CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE, 8, 1);  // not part of the contract
  const PhaseCounts c = a.resolve().phases.at("train.data");
  EXPECT_EQ(c.h2d.count, 3);
  EXPECT_EQ(c.h2d.bytes, 4096);
  EXPECT_EQ(c.h2d.pinned, 3);
  EXPECT_EQ(c.d2h.count, 1);
  EXPECT_EQ(c.d2h.pinned, 0);
  EXPECT_EQ(c.d2d.count, 2);
  EXPECT_EQ(c.d2d.bytes, 128);
  EXPECT_EQ(c.launches, 0);
}

TEST(CuptiAggregator, OnlySynchronizeCallsAreSyncsAndStreamWaitsAreApart) {
  CuptiAggregator a;
  correlate(a, 3, "optimizer.step");
  sync_record(a, 3, CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE);
  sync_record(a, 3, CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE);
  sync_record(a, 3, CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE);
  sync_record(a, 3, CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT);
  sync_record(a, 3, CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_UNKNOWN);
  const Counts counts = a.resolve();
  const PhaseCounts& c = counts.phases.at("optimizer.step");
  EXPECT_EQ(c.syncs, 3);
  EXPECT_EQ(c.stream_waits, 1);
  EXPECT_EQ(counts.sync_sites.size(), 3u);
  EXPECT_EQ(counts.sync_sites.at({"optimizer.step", "cuda", "stream synchronize"}), 1);
}

TEST(CuptiAggregator, MemsetsAreCountedApartFromLaunches) {
  CuptiAggregator a;
  CUpti_ActivityMemset4 m{};
  m.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  m.correlationId = 5;
  feed(a, m);
  const PhaseCounts c = a.resolve().total();
  EXPECT_EQ(c.memsets, 1);
  EXPECT_EQ(c.launches, 0);
}

TEST(CuptiAggregator, PhaseIdsAreStableAndNeverZero) {
  CuptiAggregator a;
  const uint64_t id = a.phase_id("train.backward");
  EXPECT_NE(id, 0u);
  EXPECT_EQ(a.phase_id("train.backward"), id);
  EXPECT_NE(a.phase_id("optimizer.step"), id);
  a.add_dropped(2);
  EXPECT_EQ(a.dropped(), 2u);
}

}  // namespace
}  // namespace harness::cupti

#include "harness/instrument/cupti/cupti_collector.h"

namespace harness::cupti {
namespace {

// Without a GPU (CI), CUPTI refuses: the instrument must say so and measure nothing, never zeros.
TEST(CuptiInstrument, ReportsWhyItCannotRunInsteadOfZeros) {
  auto instrument = make_cupti_instrument();
  EXPECT_EQ(instrument->name(), "cupti");
  instrument->start();
  instrument->stop();
  (void)instrument->take();
  if (!instrument->available()) {
    const std::string status = instrument->status();
    EXPECT_TRUE(status.rfind("unavailable: ", 0) == 0 || status.rfind("degraded: ", 0) == 0)
        << status;
    EXPECT_FALSE(instrument->measures_launches());
  } else {
    EXPECT_EQ(instrument->status(), "ok");
  }
}

}  // namespace
}  // namespace harness::cupti

// The CUPTI instrument's counting, fed synthetic activity records (no GPU needed).
#include <gtest/gtest.h>

#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>
#include <map>
#include <set>

#include "harness/instrument/cupti/cupti_aggregator.h"
#include "harness/instrument/trace.h"

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

void kernel(CuptiAggregator& a, uint32_t correlation, const char* name, uint64_t start = 0,
            uint64_t end = 0, uint32_t stream = 7) {
  CUpti_ActivityKernel10 k{};
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.correlationId = correlation;
  k.name = name;
  k.start = start;
  k.end = end;
  k.streamId = stream;
  feed(a, k);
}

void api_call(CuptiAggregator& a, uint32_t correlation, uint64_t start, uint64_t end,
              uint32_t thread, uint32_t cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000) {
  CUpti_ActivityAPI r{};
  r.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
  r.cbid = cbid;
  r.correlationId = correlation;
  r.start = start;
  r.end = end;
  r.threadId = thread;
  feed(a, r);
}

void memcpy_record(CuptiAggregator& a, uint32_t correlation, uint8_t kind, uint8_t src,
                   uint8_t dst, uint64_t bytes, uint64_t copies, uint64_t start = 0,
                   uint64_t end = 0) {
  CUpti_ActivityMemcpy6 m{};
  m.start = start;
  m.end = end;
  m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  m.correlationId = correlation;
  m.copyKind = kind;
  m.srcKind = src;
  m.dstKind = dst;
  m.bytes = bytes;
  m.copyCount = copies;
  feed(a, m);
}

void sync_record(CuptiAggregator& a, uint32_t correlation, CUpti_ActivitySynchronizationType t,
                 uint64_t start = 0, uint64_t end = 0) {
  CUpti_ActivitySynchronization2 s{};
  s.start = start;
  s.end = end;
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
  EXPECT_EQ(counts.sync_sites.at({"optimizer.step", "cuda", "stream synchronize"}).count, 1);
}

TEST(CuptiAggregator, MemsetsAreCountedApartFromLaunches) {
  CuptiAggregator a;
  CUpti_ActivityMemset4 m{};
  m.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  m.correlationId = 5;
  feed(a, m);
  const PhaseCounts c = a.resolve().total();
  EXPECT_EQ(c.memsets, std::optional<int64_t>(1));
  EXPECT_EQ(c.launches, 0);
}

// Calls from a thread that never saw the phase's external correlation id (the autograd engine's
// device thread during backward) are placed by when they started.
TEST(CuptiAggregator, CallsFromOtherThreadsGoToThePhaseOpenWhenTheyStarted) {
  CuptiAggregator a;
  a.phase_began(a.phase_id("train.step"), 100);
  a.phase_began(a.phase_id("train.backward"), 200);
  a.phase_ended(300);
  a.phase_ended(400);
  kernel(a, 11, "backward_kernel");
  api_call(a, 11, 250, 260, /*thread=*/2);
  kernel(a, 12, "after_backward");
  api_call(a, 12, 350, 360, 2);
  kernel(a, 13, "outside");
  api_call(a, 13, 450, 460, 2);
  kernel(a, 14, "before_every_phase");
  api_call(a, 14, 50, 60, 2);
  const Counts c = a.resolve();
  EXPECT_EQ(c.phases.at("train.backward").launches_by_op.at("backward_kernel"), 1);
  EXPECT_EQ(c.phases.at("train.step").launches_by_op.at("after_backward"), 1);
  EXPECT_EQ(c.phases.at(kNoPhase).launches, 2);
}

TEST(CuptiAggregator, ExternalCorrelationWinsOverTime) {
  CuptiAggregator a;
  a.phase_began(a.phase_id("optimizer.step"), 100);
  kernel(a, 21, "k");
  api_call(a, 21, 150, 160, 1);
  correlate(a, 21, "train.forward");
  EXPECT_EQ(a.resolve().phases.at("train.forward").launches, 1);
}

TEST(CuptiAggregator, TheHarnessOwnWaitIsNotCounted) {
  CuptiAggregator a;
  correlate(a, 31, kUncountedPhase);
  sync_record(a, 31, CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE);
  correlate(a, 32, "optimizer.step");
  sync_record(a, 32, CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE);
  const Counts c = a.resolve();
  EXPECT_EQ(c.total().syncs, 1);
  EXPECT_EQ(c.phases.count(kUncountedPhase), 0u);
}

TEST(CuptiAggregator, KernelNamesAreDemangled) {
  CuptiAggregator a;
  kernel(a, 41, "_ZN2at6native12_GLOBAL__N_118multi_tensor_applyEv");
  kernel(a, 42, "plain_c_kernel");
  const PhaseCounts c = a.resolve().total();
  EXPECT_EQ(c.launches_by_op.count("at::native::(anonymous namespace)::multi_tensor_apply()"), 1u);
  EXPECT_EQ(c.launches_by_op.count("plain_c_kernel"), 1u);
}

// The trace: kernels on their stream's track, the launch call on its thread's track, an arrow
// from one to the other; syncs on the syncs track; names escaped.
TEST(CuptiAggregator, TraceHasKernelsCallsAndLaunchFlows) {
  TraceRecorder trace;
  CuptiAggregator a;
  a.set_trace(&trace, [](bool driver, uint32_t cbid) {
    return std::string(driver ? "drv" : "cudaLaunch\\\"Kernel\"") + std::to_string(cbid);
  });
  const int64_t t0 = trace_clock_ns();
  const uint64_t base = static_cast<uint64_t>(t0);
  a.phase_began(a.phase_id("train.forward"), t0);
  api_call(a, 51, base + 1000, base + 3000, /*thread=*/9);
  kernel(a, 51, "gemm", base + 5000, base + 9000, /*stream=*/7);
  kernel(a, 51, "gemm_epilogue", base + 9000, base + 9500, 7);  // one call, two kernels
  api_call(a, 52, base + 10000, base + 20000, 9,
           CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020);
  sync_record(a, 52, CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE);
  const Counts c = a.resolve();
  EXPECT_EQ(c.phases.at("train.forward").launches, 2);
  EXPECT_EQ(c.phases.at("train.forward").syncs, 1);

  const nlohmann::json doc = nlohmann::json::parse(trace.to_json());
  std::map<int, std::string> tracks;
  std::vector<nlohmann::json> spans, starts, finishes;
  for (const auto& e : doc.at("traceEvents")) {
    const std::string ph = e.at("ph");
    if (ph == "M" && e.at("name") == "thread_name") tracks[e.at("tid")] = e.at("args").at("name");
    if (ph == "X") spans.push_back(e);
    if (ph == "s") starts.push_back(e);
    if (ph == "f") finishes.push_back(e);
  }
  int kernels = 0, calls = 0;
  for (const auto& e : spans) {
    const std::string track = tracks.at(e.at("tid"));
    if (track == "gpu 0 stream 7") {
      ++kernels;
      EXPECT_EQ(e.at("args").at("phase"), "train.forward");
    }
    if (track == "host thread 2") {  // not the thread that made the recorder
      ++calls;
      EXPECT_EQ(e.at("name"), std::string("cudaLaunch\\\"Kernel\"") +
                                  std::to_string(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000));
      EXPECT_NEAR(e.at("dur").get<double>(), 2.0, 1e-6);  // microseconds
    }
  }
  EXPECT_EQ(kernels, 2);
  EXPECT_EQ(calls, 1);  // the call is drawn once, with an arrow to each of its kernels
  ASSERT_EQ(starts.size(), 2u);
  ASSERT_EQ(finishes.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(starts[i].at("id"), finishes[i].at("id"));
    EXPECT_EQ(tracks.at(starts[i].at("tid")), "host thread 2");
    EXPECT_EQ(tracks.at(finishes[i].at("tid")), "gpu 0 stream 7");
    EXPECT_EQ(finishes[i].at("bp"), "e");
  }
  EXPECT_NE(starts[0].at("id"), starts[1].at("id"));
  // Launch at +1 us, kernel at +5 us: the arrow spans 4 us on the trace's clock.
  EXPECT_NEAR(finishes[0].at("ts").get<double>() - starts[0].at("ts").get<double>(), 4.0, 1e-6);
}

void memset_record(CuptiAggregator& a, uint32_t correlation, uint64_t start, uint64_t end) {
  CUpti_ActivityMemset4 m{};
  m.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  m.correlationId = correlation;
  m.start = start;
  m.end = end;
  feed(a, m);
}

// GPU time: a phase's kernels, memcpys and memsets' durations summed; its span: per occurrence
// (the phase's begin before the issuing call), first start to last end, summed.
TEST(CuptiAggregator, GpuTimeAndSpanPerPhaseFromDeviceRecords) {
  CuptiAggregator a;
  const uint64_t forward = a.phase_id("train.forward");
  const uint64_t step = a.phase_id("optimizer.step");
  // train.forward twice; optimizer.step once, between them.
  a.phase_began(forward, 1000);
  a.phase_ended(1900);
  a.phase_began(step, 1950);
  a.phase_ended(1990);
  a.phase_began(forward, 10000);
  a.phase_ended(10900);
  // First occurrence: a kernel and a memcpy, issued at 1100 and 1200.
  correlate(a, 1, "train.forward");
  api_call(a, 1, 1100, 1150, 1);
  kernel(a, 1, "gemm", 2000, 2500);
  correlate(a, 2, "train.forward");
  api_call(a, 2, 1200, 1250, 1);
  memcpy_record(a, 2, CUPTI_ACTIVITY_MEMCPY_KIND_DTOD, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
                CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 64, 1, 2600, 2900);
  // Second occurrence: a kernel and a memset; the memset's call is unknown, so its own start
  // (11500, after the begin at 10000) places it.
  correlate(a, 3, "train.forward");
  api_call(a, 3, 10100, 10150, 1);
  kernel(a, 3, "gemm", 11000, 11400);
  correlate(a, 4, "train.forward");
  memset_record(a, 4, 11500, 11600);
  // optimizer.step: a kernel that runs after the second forward began (the GPU lags): its call,
  // at 1960, says which occurrence it belongs to.
  correlate(a, 5, "optimizer.step");
  api_call(a, 5, 1960, 1970, 1);
  kernel(a, 5, "adam", 10500, 10800);
  // A phase with a sync only: it had no GPU work (0 ns, measured).
  correlate(a, 6, "checkpoint.load");
  sync_record(a, 6, CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE, 12000, 12700);
  // The harness's own wait is not counted.
  correlate(a, 7, kUncountedPhase);
  kernel(a, 7, "uncounted", 13000, 14000);

  const Counts c = a.resolve();
  const PhaseCounts& f = c.phases.at("train.forward");
  EXPECT_EQ(f.gpu_time_ns, 500 + 300 + 400 + 100);
  EXPECT_EQ(f.gpu_span_ns, (2900 - 2000) + (11600 - 11000));
  const PhaseCounts& o = c.phases.at("optimizer.step");
  EXPECT_EQ(o.gpu_time_ns, 300);
  EXPECT_EQ(o.gpu_span_ns, 300);
  const PhaseCounts& load = c.phases.at("checkpoint.load");
  EXPECT_EQ(load.gpu_time_ns, 0);
  EXPECT_EQ(load.gpu_span_ns, 0);
  EXPECT_EQ(c.total().gpu_time_ns, 1300 + 300);

  // As measurements: gpu_time per step and in total and phases; gpu_span in phases only.
  std::map<std::string, std::optional<double>> total, phase;
  for (const Measurement& m : to_measurements(c.total(), 2.0)) total[m.name] = m.value;
  for (const Measurement& m : phase_only_measurements(f)) phase[m.name] = m.value;
  EXPECT_EQ(total.at("gpu_time"), 800.0);
  EXPECT_EQ(phase.at("gpu_span"), 1500.0);
  EXPECT_EQ(total.count("gpu_span"), 0u);
}

// A sync's wait on cuda: its SYNCHRONIZATION record's end - start, by site; a record CUPTI could
// not time makes its site's wait unknown.
TEST(CuptiAggregator, SyncWaitIsTheSynchronizationRecordsDuration) {
  CuptiAggregator a;
  correlate(a, 1, "optimizer.step");
  sync_record(a, 1, CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE, 5000, 5700);
  correlate(a, 2, "optimizer.step");
  sync_record(a, 2, CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE, 6000, 6050);
  correlate(a, 3, "optimizer.step");
  sync_record(a, 3, CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT, 6100, 9000);
  correlate(a, 4, "checkpoint.save");
  sync_record(a, 4, CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE);  // no times
  const Counts c = a.resolve();
  const PhaseCounts& step = c.phases.at("optimizer.step");
  EXPECT_EQ(step.syncs, 2);
  EXPECT_EQ(step.timed_syncs, 2);
  EXPECT_EQ(step.sync_wait_ns, 750);  // stream-wait-event is device-side: no host wait
  const SyncSiteTally& site = c.sync_sites.at({"optimizer.step", "cuda", "stream synchronize"});
  EXPECT_EQ(site.count, 2);
  EXPECT_EQ(site.wait_ns, 750);
  const std::vector<SyncSite> sites = to_sync_sites(c);
  ASSERT_EQ(sites.size(), 2u);
  EXPECT_EQ(sites[0].phase, "checkpoint.save");
  EXPECT_EQ(sites[0].wait_ns, std::nullopt);
  EXPECT_EQ(sites[1].wait_ns, 750);
  std::map<std::string, std::optional<double>> save;
  for (const Measurement& m : to_measurements(c.phases.at("checkpoint.save")))
    save[m.name] = m.value;
  EXPECT_EQ(save.at("sync.wait_time"), std::nullopt);
  EXPECT_EQ(save.at("sync.count"), 1.0);
}

// A kernel CUPTI could not time leaves its phase's GPU time unknown, not short.
TEST(CuptiAggregator, AnUntimedDeviceRecordMakesGpuTimeUnknown) {
  CuptiAggregator a;
  correlate(a, 1, "train.backward");
  kernel(a, 1, "timed", 100, 200);
  correlate(a, 2, "train.backward");
  kernel(a, 2, "untimed");
  const Counts c = a.resolve();
  EXPECT_EQ(c.phases.at("train.backward").launches, 2);
  EXPECT_EQ(c.phases.at("train.backward").gpu_time_ns, std::nullopt);
  EXPECT_EQ(c.phases.at("train.backward").gpu_span_ns, std::nullopt);
}

void driver_call(CuptiAggregator& a, uint32_t correlation, uint64_t start, uint64_t end,
                 uint32_t thread, uint32_t cbid) {
  CUpti_ActivityAPI r{};
  r.kind = CUPTI_ACTIVITY_KIND_DRIVER;
  r.cbid = cbid;
  r.correlationId = correlation;
  r.start = start;
  r.end = end;
  r.threadId = thread;
  feed(a, r);
}

void peer_copy(CuptiAggregator& a, uint32_t correlation, uint32_t src, uint32_t dst, uint64_t bytes,
               uint64_t start = 0, uint64_t end = 0) {
  CUpti_ActivityMemcpyPtoP4 m{};
  m.kind = CUPTI_ACTIVITY_KIND_MEMCPY2;
  m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_PTOP;
  m.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  m.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  m.correlationId = correlation;
  m.deviceId = src;
  m.srcDeviceId = src;
  m.dstDeviceId = dst;
  m.bytes = bytes;
  m.start = start;
  m.end = end;
  feed(a, m);
}

constexpr uint32_t kDeviceSynchronize = CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020;
constexpr uint32_t kStreamSynchronize = CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020;

// Syncs are SYNCHRONIZATION records, cross-checked with the calls: a record alone is one sync.
TEST(CuptiAggregator, ASynchronizationRecordAloneIsOneSync) {
  CuptiAggregator a;
  correlate(a, 1, "optimizer.step");
  sync_record(a, 1, CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE, 1000, 1300);
  const Counts c = a.resolve();
  EXPECT_EQ(c.phases.at("optimizer.step").syncs, 1);
  EXPECT_EQ(c.phases.at("optimizer.step").sync_wait_ns, 300);
  EXPECT_EQ(c.sync_sites.at({"optimizer.step", "cuda", "context synchronize"}).count, 1);
}

// CUPTI 13.0 before Update 1 gives no record for cudaDeviceSynchronize / cuCtxSynchronize_v2: the
// call alone is one sync, timed by the call, at the site a record would have named.
TEST(CuptiAggregator, ASynchronizingCallWithoutARecordIsOneSync) {
  CuptiAggregator a;
  correlate(a, 1, "optimizer.step");
  api_call(a, 1, 1000, 1600, /*thread=*/1, kDeviceSynchronize);
  correlate(a, 2, "checkpoint.save");
  api_call(a, 2, 2000, 2100, 1, CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020);
  // A driver call made directly (not inside a runtime call): Triton, NCCL.
  correlate(a, 3, "checkpoint.save");
  driver_call(a, 3, 3000, 3050, 1, CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize_v2);
  correlate(a, 4, "checkpoint.save");
  driver_call(a, 4, 4000, 4070, 1, CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize);
  // Calls that do not make the host wait.
  correlate(a, 5, "checkpoint.save");
  api_call(a, 5, 5000, 5010, 1, CUPTI_RUNTIME_TRACE_CBID_cudaStreamQuery_v3020);
  correlate(a, 6, "checkpoint.save");
  api_call(a, 6, 6000, 6010, 1, CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_v3020);
  correlate(a, 7, "checkpoint.save");
  api_call(a, 7, 7000, 7010, 1);  // cudaLaunchKernel
  const Counts c = a.resolve();
  const PhaseCounts& step = c.phases.at("optimizer.step");
  EXPECT_EQ(step.syncs, 1);
  EXPECT_EQ(step.timed_syncs, 1);
  EXPECT_EQ(step.sync_wait_ns, 600);
  EXPECT_EQ(c.sync_sites.at({"optimizer.step", "cuda", "context synchronize"}).wait_ns, 600);
  const PhaseCounts& save = c.phases.at("checkpoint.save");
  EXPECT_EQ(save.syncs, 3);
  EXPECT_EQ(save.sync_wait_ns, 100 + 50 + 70);
  EXPECT_EQ(c.sync_sites.at({"checkpoint.save", "cuda", "event synchronize"}).count, 1);
  EXPECT_EQ(c.sync_sites.at({"checkpoint.save", "cuda", "context synchronize"}).count, 1);
  EXPECT_EQ(c.sync_sites.at({"checkpoint.save", "cuda", "stream synchronize"}).count, 1);
  EXPECT_EQ(c.total().stream_waits, 0);
}

// Update 1 and later give both: one sync, timed by the record.
TEST(CuptiAggregator, ACallAndItsRecordAreOneSync) {
  CuptiAggregator a;
  correlate(a, 1, "optimizer.step");
  api_call(a, 1, 4990, 5710, 1, kDeviceSynchronize);
  sync_record(a, 1, CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE, 5000, 5700);
  correlate(a, 2, "optimizer.step");
  sync_record(a, 2, CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE, 6000, 6100);
  api_call(a, 2, 5990, 6110, 1, kStreamSynchronize);  // the call's record may come later
  const Counts c = a.resolve();
  EXPECT_EQ(c.phases.at("optimizer.step").syncs, 2);
  EXPECT_EQ(c.phases.at("optimizer.step").sync_wait_ns, 700 + 100);
  EXPECT_EQ(c.sync_sites.at({"optimizer.step", "cuda", "context synchronize"}).count, 1);
  EXPECT_EQ(c.sync_sites.at({"optimizer.step", "cuda", "stream synchronize"}).count, 1);
}

// The runtime's call and the driver call inside it (same thread, within its time) are one sync,
// whichever of them a record is correlated to; a driver call on another thread is its own.
TEST(CuptiAggregator, ADriverCallInsideARuntimeCallIsTheSameSync) {
  CuptiAggregator a;
  // CUPTI links every call of the phase's thread to the phase, the driver's too.
  correlate(a, 10, "optimizer.step");
  api_call(a, 10, 100, 900, /*thread=*/1, kDeviceSynchronize);
  correlate(a, 11, "optimizer.step");
  driver_call(a, 11, 120, 880, 1, CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize_v2);
  EXPECT_EQ(a.resolve().phases.at("optimizer.step").syncs, 1);

  correlate(a, 20, "optimizer.step");
  api_call(a, 20, 1000, 1900, 1, kDeviceSynchronize);
  correlate(a, 21, "optimizer.step");
  driver_call(a, 21, 1020, 1880, 1, CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize_v2);
  sync_record(a, 21, CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE, 1030, 1870);
  driver_call(a, 22, 1100, 1200, /*thread=*/2, CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize);
  correlate(a, 22, "optimizer.step");
  const Counts c = a.resolve();
  EXPECT_EQ(c.phases.at("optimizer.step").syncs, 2);
  EXPECT_EQ(c.phases.at("optimizer.step").sync_wait_ns, 840 + 100);
}

// A synchronous cudaMemcpy between host and device waits for the device without a
// SYNCHRONIZATION record: a copy and a sync. Device to device it does not block the host.
// PyTorch's blocking copy (cudaMemcpyAsync, then cudaStreamSynchronize) is one sync: the record's.
TEST(CuptiAggregator, ASynchronousMemcpyWithTheHostIsACopyAndASync) {
  CuptiAggregator a;
  correlate(a, 1, "train.data");
  api_call(a, 1, 100, 400, 1, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020);
  memcpy_record(a, 1, CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
                CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE, 4, 1, 200, 300);
  correlate(a, 2, "train.data");
  api_call(a, 2, 500, 700, 1, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020);
  memcpy_record(a, 2, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, CUPTI_ACTIVITY_MEMORY_KIND_PINNED,
                CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 64, 1, 550, 650);
  correlate(a, 3, "train.data");
  api_call(a, 3, 800, 820, 1, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020);
  memcpy_record(a, 3, CUPTI_ACTIVITY_MEMCPY_KIND_DTOD, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
                CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 64, 1, 900, 950);
  correlate(a, 4, "optimizer.step");
  api_call(a, 4, 1000, 1010, 1, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020);
  memcpy_record(a, 4, CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
                CUPTI_ACTIVITY_MEMORY_KIND_PINNED, 4, 1, 1100, 1110);
  correlate(a, 5, "optimizer.step");
  api_call(a, 5, 1020, 1200, 1, kStreamSynchronize);
  sync_record(a, 5, CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE, 1030, 1190);
  const Counts c = a.resolve();
  const PhaseCounts& data = c.phases.at("train.data");
  EXPECT_EQ(data.d2h.count, 1);
  EXPECT_EQ(data.h2d.count, 1);
  EXPECT_EQ(data.d2d.count, 1);
  EXPECT_EQ(data.syncs, 2);
  EXPECT_EQ(data.sync_wait_ns, 300 + 200);
  EXPECT_EQ(c.sync_sites.at({"train.data", "cuda", "blocking copy D2H"}).count, 1);
  EXPECT_EQ(c.sync_sites.at({"train.data", "cuda", "blocking copy H2D"}).count, 1);
  const PhaseCounts& step = c.phases.at("optimizer.step");
  EXPECT_EQ(step.d2h.count, 1);
  EXPECT_EQ(step.d2h.pinned, 1);
  EXPECT_EQ(step.syncs, 1);
  EXPECT_EQ(c.sync_sites.at({"optimizer.step", "cuda", "stream synchronize"}).count, 1);
}

// The harness's own wait (its device synchronize in kUncountedPhase) is not counted, with or
// without a record.
TEST(CuptiAggregator, TheHarnessOwnSynchronizeCallIsNotCounted) {
  CuptiAggregator a;
  correlate(a, 1, kUncountedPhase);
  api_call(a, 1, 100, 200, 1, kDeviceSynchronize);
  correlate(a, 2, "optimizer.step");
  api_call(a, 2, 300, 400, 1, kDeviceSynchronize);
  const Counts c = a.resolve();
  EXPECT_EQ(c.total().syncs, 1);
  EXPECT_EQ(c.phases.count(kUncountedPhase), 0u);
}

// A call from another thread (no external correlation) is placed by when it started.
TEST(CuptiAggregator, ASyncFromACallOnAnotherThreadGoesToThePhaseOpenWhenItStarted) {
  CuptiAggregator a;
  a.phase_began(a.phase_id("train.backward"), 100);
  a.phase_ended(500);
  api_call(a, 1, 200, 300, /*thread=*/2, kStreamSynchronize);
  EXPECT_EQ(a.resolve().phases.at("train.backward").syncs, 1);
}

// On the trace, a sync counted from its call says so (scripts/gpu_reference.sh counts them).
TEST(CuptiAggregator, TheTraceTellsASyncCountedFromItsCall) {
  TraceRecorder trace;
  CuptiAggregator a;
  a.set_trace(&trace, nullptr);
  const uint64_t base = static_cast<uint64_t>(trace_clock_ns());
  correlate(a, 1, "optimizer.step");
  api_call(a, 1, base + 1000, base + 2000, 1, kDeviceSynchronize);
  correlate(a, 2, "optimizer.step");
  api_call(a, 2, base + 3000, base + 4000, 1, kStreamSynchronize);
  sync_record(a, 2, CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE, base + 3100,
              base + 3900);
  EXPECT_EQ(a.resolve().total().syncs, 2);
  std::map<std::string, nlohmann::json> syncs;
  const nlohmann::json doc = nlohmann::json::parse(trace.to_json());
  for (const auto& e : doc.at("traceEvents")) {
    if (e.value("cat", "") == "sync") syncs[e.at("name").get<std::string>()] = e.at("args");
  }
  ASSERT_EQ(syncs.size(), 2u);
  EXPECT_EQ(syncs.at("context synchronize").at("counted from"), "api call, no record");
  EXPECT_EQ(syncs.at("stream synchronize").count("counted from"), 0u);
}

// Peer-to-peer copies come as MEMCPY2 records: D2D with bytes, cross-device when they leave the
// home device, in the phase of their call.
TEST(CuptiAggregator, PeerToPeerCopiesAreDeviceToDevice) {
  CuptiAggregator a;
  a.set_home_device(0);
  correlate(a, 1, "setup.broadcast");
  peer_copy(a, 1, /*src=*/0, /*dst=*/1, 4096, 1000, 1400);
  correlate(a, 2, "setup.broadcast");
  peer_copy(a, 2, 1, 0, 1024, 1500, 1600);
  correlate(a, 3, "train.forward");
  peer_copy(a, 3, 0, 0, 256, 2000, 2050);  // within the home device
  correlate(a, 4, "train.forward");
  peer_copy(a, 4, 1, 1, 128, 2100, 2110);  // on another device
  const Counts c = a.resolve();
  const PhaseCounts& b = c.phases.at("setup.broadcast");
  EXPECT_EQ(b.d2d.count, 2);
  EXPECT_EQ(b.d2d.bytes, 4096 + 1024);
  EXPECT_EQ(b.d2d.pinned, 0);
  EXPECT_EQ(b.cross_device.count, 2);
  EXPECT_EQ(b.cross_device.bytes, 4096 + 1024);
  EXPECT_EQ(b.gpu_time_ns, 400 + 100);
  EXPECT_EQ(b.launches, 0);
  EXPECT_EQ(b.syncs, 0);
  const PhaseCounts& f = c.phases.at("train.forward");
  EXPECT_EQ(f.d2d.count, 2);
  EXPECT_EQ(f.cross_device.count, 1);
  EXPECT_EQ(f.cross_device.bytes, 128);
  EXPECT_EQ(c.total().h2d.count + c.total().d2h.count, 0);

  // Without a home device only a copy between two devices is cross-device.
  CuptiAggregator no_home;
  peer_copy(no_home, 5, 0, 0, 8);
  peer_copy(no_home, 6, 0, 1, 8);
  const PhaseCounts t = no_home.resolve().total();
  EXPECT_EQ(t.d2d.count, 2);
  EXPECT_EQ(t.cross_device.count, 1);
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

#include <filesystem>

namespace harness::cupti {
namespace {

// Without a GPU (CI), CUPTI refuses: the instrument must say so and measure nothing, never zeros.
// Whether a GPU is there is decided apart from CUPTI (the driver's device node), so the test
// fails if the instrument claims to work without one or gives up with one.
TEST(CuptiInstrument, ReportsWhyItCannotRunInsteadOfZeros) {
  const bool gpu_driver = std::filesystem::exists("/dev/nvidiactl");
  auto instrument = make_cupti_instrument();
  EXPECT_EQ(instrument->name(), "cupti");
  instrument->start();
  instrument->stop();
  const Counts counts = instrument->take();
  if (gpu_driver) {
    EXPECT_EQ(instrument->status(), "ok");
    EXPECT_TRUE(instrument->available());
    return;
  }
  EXPECT_FALSE(instrument->available());
  const std::string status = instrument->status();
  EXPECT_EQ(status.rfind("unavailable: ", 0), 0u) << status;
  EXPECT_FALSE(instrument->measures_launches());
  EXPECT_TRUE(counts.phases.empty()) << "an unavailable instrument reported counts";
}

}  // namespace
}  // namespace harness::cupti

#include <cstdlib>

namespace harness::cupti {
namespace {

// Another subscriber (nsys, torch.profiler) degrades the instrument and is named; any other
// refusal makes it unavailable with CUPTI's own message.
TEST(CuptiInstrument, SubscribeFailuresAreNamedNeverSilent) {
  ::unsetenv("NSYS_PROFILING_SESSION_ID");
  ::unsetenv("NSYS_TARGET_STD_REDIRECT_ACTIVE");
  ::unsetenv("CUDA_INJECTION64_PATH");
  const std::string held = subscribe_failure_status(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED,
                                                    "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED");
  EXPECT_EQ(held.rfind("degraded: CUPTI is held by another profiler", 0), 0u) << held;
  EXPECT_NE(held.find("NVTX"), std::string::npos);

  ::setenv("NSYS_PROFILING_SESSION_ID", "7", 1);
  EXPECT_NE(subscribe_failure_status(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED, "")
                .find("Nsight Systems (nsys)"),
            std::string::npos);
  ::unsetenv("NSYS_PROFILING_SESSION_ID");
  ::setenv("CUDA_INJECTION64_PATH", "/opt/tool/libinject.so", 1);
  EXPECT_EQ(other_subscriber(), "the injection library /opt/tool/libinject.so");
  ::unsetenv("CUDA_INJECTION64_PATH");

  EXPECT_EQ(subscribe_failure_status(CUPTI_ERROR_NOT_INITIALIZED, "CUPTI_ERROR_NOT_INITIALIZED"),
            "unavailable: cuptiSubscribe: CUPTI_ERROR_NOT_INITIALIZED");
}

// The name cuptiSubscribe_v2 reports for the holder wins over the environment's guess; older
// CUPTI's MAX_LIMIT_REACHED for a second subscriber is the same case; the status says what to do.
TEST(CuptiInstrument, TheHolderCuptiNamesIsReported) {
  ::setenv("NSYS_PROFILING_SESSION_ID", "7", 1);
  const std::string named = subscribe_failure_status(
      CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED, "", "CUPTI for Nsight Systems 2026.1");
  ::unsetenv("NSYS_PROFILING_SESSION_ID");
  EXPECT_EQ(named.rfind("degraded: CUPTI is held by CUPTI for Nsight Systems 2026.1;", 0), 0u)
      << named;
  EXPECT_NE(named.find("--nvtx-only"), std::string::npos) << named;
  const std::string old_cupti =
      subscribe_failure_status(CUPTI_ERROR_MAX_LIMIT_REACHED, "CUPTI_ERROR_MAX_LIMIT_REACHED", "");
  EXPECT_EQ(old_cupti.rfind("degraded: CUPTI is held by ", 0), 0u) << old_cupti;
}

// A window of synthetic CUPTI records as both trace shapes: kernels (one call issuing two), a
// pinned and a pageable copy, a memset, a stream synchronize, a call on another thread, inside
// phases and a measured step. Checked here for the links; with HARNESS_TRACE_DUMP_DIR set, the
// documents are also written there for the trace validator (ctest trace_check,
// tests/cli/test_trace.py).
TEST(CuptiAggregator, TraceFilesFromSyntheticRecords) {
  TraceRecorder trace;
  trace.set_device(0, "gpu", "NVIDIA (synthetic records)");
  trace.set_process(1, "bench", 0, 1, "nccl");
  CuptiAggregator a;
  a.set_trace(&trace, [](bool driver, uint32_t cbid) {
    if (driver) return std::string("cuDriver") + std::to_string(cbid);
    switch (cbid) {
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000: return std::string("cudaLaunchKernel");
      case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020: return std::string("cudaMemcpyAsync");
      case CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020: return std::string("cudaMemsetAsync");
      default: return std::string("cudaStreamSynchronize");
    }
  });
  const int64_t t0 = trace_clock_ns();
  const uint64_t base = static_cast<uint64_t>(t0);
  const uint64_t main_thread = trace_thread_id();
  trace.section_begin("synthetic variant");
  trace.step_begin(1);
  trace.on_phase_begin("train.forward");
  a.phase_began(a.phase_id("train.forward"), t0);
  correlate(a, 1, "train.forward");
  api_call(a, 1, base + 1000, base + 3000, main_thread);
  kernel(a, 1, "ampere_sgemm", base + 5000, base + 9000, 7);
  kernel(a, 1, "ampere_sgemm_epilogue", base + 9000, base + 9500, 7);
  correlate(a, 2, "train.forward");
  api_call(a, 2, base + 10000, base + 11000, main_thread,
           CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020);
  memcpy_record(a, 2, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, CUPTI_ACTIVITY_MEMORY_KIND_PINNED,
                CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 4096, 1, base + 11500, base + 12500);
  correlate(a, 3, "train.forward");
  api_call(a, 3, base + 13000, base + 14000, main_thread,
           CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020);
  memset_record(a, 3, base + 14500, base + 15000);
  api_call(a, 4, base + 16000, base + 17000, /*thread=*/main_thread + 1);  // the autograd thread
  kernel(a, 4, "backward_kernel", base + 17500, base + 19000, 7);
  correlate(a, 5, "train.forward");
  api_call(a, 5, base + 20000, base + 30000, main_thread,
           CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020);
  memcpy_record(a, 5, CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
                CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE, 8, 1, base + 20500, base + 21000);
  correlate(a, 6, "train.forward");
  api_call(a, 6, base + 30500, base + 40000, main_thread,
           CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020);
  sync_record(a, 6, CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE, base + 30600,
              base + 39900);
  a.phase_ended(t0 + 50000);
  const Counts c = a.resolve();
  EXPECT_EQ(c.total().launches, 3);
  EXPECT_EQ(c.total().h2d.count + c.total().d2h.count, 2);
  // Phases and the step end after the records they hold.
  while (trace_clock_ns() < t0 + 60000) {
  }
  trace.on_phase_end("train.forward");
  trace.step_end();
  trace.section_end("synthetic variant");

  const std::string chrome = trace.to_json();
  const std::string kineto = trace.to_kineto_json();
  const nlohmann::json k = nlohmann::json::parse(kineto);
  std::map<std::string, int> cats;
  std::set<int64_t> calls, work;
  for (const auto& e : k.at("traceEvents")) {
    if (e.at("ph") != "X") continue;
    cats[e.at("cat").get<std::string>()] += 1;
    if (e.at("cat") == "cuda_runtime" && e.at("args").contains("correlation")) {
      calls.insert(e.at("args").at("correlation").get<int64_t>());
    }
    if (e.at("args").contains("stream") && e.at("cat") != "cuda_runtime") {
      work.insert(e.at("args").at("correlation").get<int64_t>());
    }
  }
  EXPECT_EQ(cats["kernel"], 3);
  EXPECT_EQ(cats["gpu_memcpy"], 2);
  EXPECT_EQ(cats["gpu_memset"], 1);
  EXPECT_EQ(work, (std::set<int64_t>{1, 2, 3, 4, 5}));
  for (int64_t id : work) EXPECT_EQ(calls.count(id), 1u) << id;
  if (const char* dir = std::getenv("HARNESS_TRACE_DUMP_DIR")) {
    std::ofstream(std::string(dir) + "/cupti.chrome.json") << chrome;
    std::ofstream(std::string(dir) + "/cupti.kineto.json") << kineto;
  }
}

}  // namespace
}  // namespace harness::cupti

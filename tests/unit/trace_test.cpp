// The Chrome trace: valid JSON whatever the names, phases nested, times in microseconds.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "harness/instrument/collector.h"
#include "harness/instrument/phase.h"
#include "harness/instrument/trace.h"

namespace harness {
namespace {

TEST(Trace, NamesWithQuotesAndBackslashesStayValidJson) {
  TraceRecorder trace;
  const std::string odd = "we\"ird\\name\n\ttab";
  const int64_t t0 = trace_clock_ns();
  trace.add_span("device ops", odd, "kernel", t0, t0 + 2500,
                 {{"arg \"q\"", "C:\\path"}});
  trace.section_begin(odd);
  trace.section_end(odd);
  const nlohmann::json doc = nlohmann::json::parse(trace.to_json({{"k\"", "v\\"}}));
  bool found = false;
  for (const auto& e : doc.at("traceEvents")) {
    if (e.at("ph") == "X") {
      EXPECT_EQ(e.at("name"), odd);
      EXPECT_EQ(e.at("args").at("arg \"q\""), "C:\\path");
      EXPECT_NEAR(e.at("dur").get<double>(), 2.5, 1e-9);  // microseconds
      found = true;
    }
  }
  EXPECT_TRUE(found);
  EXPECT_EQ(doc.at("otherData").at("k\""), "v\\");
}

// harness_sim's run knows which step was the last only when the program ends: its sections
// begin and end at times already past, and take their place among the events recorded since.
TEST(Trace, SectionsAtPastTimesSortIntoPlace) {
  TraceRecorder trace;
  const int64_t t0 = trace_clock_ns();
  trace.add_span("device ops", "inside", "kernel", t0 + 1000, t0 + 2000);
  trace.add_span("device ops", "after", "kernel", t0 + 4000, t0 + 5000);
  trace.section_begin("steps", t0);
  trace.section_end("steps", t0 + 3000);
  trace.section_begin("after the last step", t0 + 3000);
  trace.section_end("after the last step", t0 + 6000);
  std::vector<std::pair<std::string, double>> order;
  const nlohmann::json doc = nlohmann::json::parse(trace.to_json());
  for (const auto& e : doc.at("traceEvents")) {
    if (e.at("ph") == "M") continue;
    order.emplace_back(e.at("ph").get<std::string>() + " " + e.at("name").get<std::string>(),
                       e.at("ts").get<double>());
  }
  const double base = static_cast<double>(t0 - trace.origin_ns()) / 1000.0;
  const std::vector<std::pair<std::string, double>> want = {
      {"B steps", base},         {"X inside", base + 1},
      {"E steps", base + 3},     {"B after the last step", base + 3},
      {"X after", base + 4},     {"E after the last step", base + 6}};
  ASSERT_EQ(order.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(order[i].first, want[i].first) << i;
    EXPECT_NEAR(order[i].second, want[i].second, 1e-6) << i;
  }
}

TEST(Trace, PhasesAndCountedEventsAppearWithTheirPhase) {
  TraceRecorder trace;
  trace.set_device(0, "sim", "sim");
  EventCollector collector;
  collector.set_trace(&trace);
  add_phase_listener(&trace);
  {
    ScopedCollection scope(collector);
    Phase outer("optimizer.step");
    events::record_launch("aten::add_", events::begin_time());
    events::record_copy(CopyKind::DeviceToHost, 4, false);
    events::record_sync("aten::_local_scalar_dense", "item");
  }
  remove_phase_listener(&trace);
  const nlohmann::json doc = nlohmann::json::parse(trace.to_json());
  std::map<std::string, int> by_ph;
  std::map<int, std::string> thread_names;
  std::map<std::string, nlohmann::json> by_cat;
  for (const auto& e : doc.at("traceEvents")) {
    by_ph[e.at("ph").get<std::string>()] += 1;
    if (e.at("ph") == "M" && e.at("name") == "thread_name") {
      thread_names[e.at("tid").get<int>()] = e.at("args").at("name").get<std::string>();
    }
    if (e.at("ph") == "X" || e.at("ph") == "i") {
      EXPECT_EQ(e.at("args").at("phase"), "optimizer.step") << e.dump();
      by_cat[e.at("cat").get<std::string>()] = e;
    }
  }
  EXPECT_EQ(by_ph["B"], 1);
  EXPECT_EQ(by_ph["E"], 1);
  EXPECT_EQ(by_ph["X"], 4);  // the launch and the copy: each a host call and a device slice
  EXPECT_EQ(by_ph["s"], 2);  // an arrow from each call to its slice
  EXPECT_EQ(by_ph["f"], 2);
  EXPECT_EQ(by_ph["i"], 1);  // the sync (untimed)
  EXPECT_EQ(by_cat.at("launch").at("name"), "aten::add_");
  EXPECT_EQ(by_cat.at("launch").at("args").at("api"), "cudaLaunchKernel");
  EXPECT_EQ(by_cat.at("kernel").at("name"), "aten::add_");
  EXPECT_EQ(by_cat.at("kernel").at("args").at("stream"), kSimComputeStream);
  EXPECT_EQ(by_cat.at("cuda api").at("name"), "cudaMemcpyAsync");
  EXPECT_EQ(by_cat.at("memcpy").at("name"), "Memcpy DtoH (Device -> Pageable)");
  EXPECT_EQ(by_cat.at("memcpy").at("args").at("bytes"), 4);  // a number, not "4"
  EXPECT_EQ(by_cat.at("kernel").at("args").at("correlation"),
            by_cat.at("launch").at("args").at("correlation"));
  std::set<std::string> names;
  for (const auto& [_, n] : thread_names) names.insert(n);
  EXPECT_EQ(names, (std::set<std::string>{"phases", "host", "sim 0 stream 7", "syncs"}));
}

// A collective is a span on its stream from issue to completion, with NCCL's arguments; those on
// one stream run one after another; one on CPU tensors is on the collectives track.
TEST(Trace, CollectivesAreSpansFromIssueToCompletion) {
  TraceRecorder trace;
  trace.set_device(1, "sim", "sim");
  EventCollector collector;
  collector.set_trace(&trace);
  const int64_t t = trace_clock_ns();
  CollectiveTrace c;
  c.op = "all_reduce";
  c.bytes = 64;
  c.in_nelems = c.out_nelems = 16;
  c.dtype = "Float";
  c.group_size = 2;
  c.rank = 1;
  c.thread = trace_thread_id();
  c.issued_ns = t;
  c.call_end_ns = t + 1000;
  c.done_ns = t + 50000;
  CollectiveTrace second = c;  // issued before the first completed: it starts when that ends
  second.op = "broadcast";
  second.issued_ns = t + 2000;
  second.call_end_ns = t + 3000;
  second.done_ns = t + 80000;
  CollectiveTrace host = c;
  host.op = "barrier";
  host.on_device = false;
  {
    ScopedCollection scope(collector);
    events::record_collective_trace(c);
    events::record_collective_trace(second);
    events::record_collective_trace(host);
  }
  const nlohmann::json doc = nlohmann::json::parse(trace.to_json());
  std::map<std::string, nlohmann::json> spans;
  for (const auto& e : doc.at("traceEvents")) {
    if (e.at("ph") == "X" && e.at("cat") == "collective") spans[e.at("name")] = e;
  }
  ASSERT_EQ(spans.size(), 3u);
  const nlohmann::json& first = spans.at("ncclDevKernel_AllReduce");
  EXPECT_NEAR(first.at("dur").get<double>(), 50.0, 1e-6);  // microseconds, issue to completion
  EXPECT_EQ(first.at("args").at("Collective name"), "all_reduce");
  EXPECT_EQ(first.at("args").at("In msg nelems"), 16);
  EXPECT_EQ(first.at("args").at("Group size"), 2);
  EXPECT_EQ(first.at("args").at("dtype"), "Float");
  const nlohmann::json& next = spans.at("ncclDevKernel_Broadcast");
  EXPECT_NEAR(next.at("ts").get<double>(),
              first.at("ts").get<double>() + first.at("dur").get<double>(), 1e-6);
  EXPECT_NEAR(next.at("dur").get<double>(), 30.0, 1e-6);
  EXPECT_EQ(next.at("tid"), first.at("tid"));
  EXPECT_NE(spans.at("gloo:barrier").at("tid"), first.at("tid"));
}

// Every track has the same id (and sort index) in every rank's process, whatever each rank used
// first or at all.
TEST(Trace, TracksHaveTheSameIdsOnEveryRank) {
  auto tids = [](const TraceRecorder& trace) {
    std::map<std::string, int> ids;
    const nlohmann::json doc = nlohmann::json::parse(trace.to_json());
    for (const auto& e : doc.at("traceEvents")) {
      if (e.at("name") == "thread_name") {
        ids[e.at("args").at("name").get<std::string>()] = e.at("tid").get<int>();
      }
      if (e.at("name") == "thread_sort_index") EXPECT_EQ(e.at("args").at("sort_index"), e.at("tid"));
    }
    return ids;
  };
  const int64_t t = trace_clock_ns();
  TraceRecorder rank0, rank1;
  rank0.set_process(0, "rank 0", 0, 2);
  rank1.set_process(1, "rank 1", 1, 2);
  rank0.add_span("syncs", "s", "sync", t, t + 10);
  rank0.section_begin("v");
  rank0.section_end("v");
  rank0.on_phase_begin("p");
  rank0.on_phase_end("p");
  rank1.on_phase_begin("p");  // another order, no sync
  rank1.on_phase_end("p");
  rank1.section_begin("v");
  rank1.section_end("v");
  const std::map<std::string, int> a = tids(rank0), b = tids(rank1);
  for (const std::string track : {"variants", "phases"}) EXPECT_EQ(a.at(track), b.at(track));
  EXPECT_LT(a.at("variants"), a.at("phases"));
  EXPECT_LT(a.at("phases"), a.at("syncs"));
}

// The Kineto shape: what HTA reads (see trace_kineto.cpp).
TEST(Trace, KinetoShapeLinksCallsToDeviceWorkAndNamesSteps) {
  TraceRecorder trace;
  trace.set_process(1, "rank 1", 1, 2, "gloo");
  trace.set_device(1, "sim", "sim");
  EventCollector collector;
  collector.set_trace(&trace);
  add_phase_listener(&trace);
  {
    ScopedCollection scope(collector);
    trace.step_begin(7);
    Phase outer("optimizer.step");
    events::record_launch("aten::add_", events::begin_time());
    events::record_copy(CopyKind::HostToDevice, 16, true, events::begin_time());
    events::record_sync("aten::_local_scalar_dense", "item", 100);
  }
  trace.step_end();
  remove_phase_listener(&trace);
  const nlohmann::json doc = nlohmann::json::parse(trace.to_kineto_json({{"tool", "t"}}));
  EXPECT_EQ(doc.at("schemaVersion"), 1);
  EXPECT_EQ(doc.at("distributedInfo").at("rank"), 1);
  EXPECT_EQ(doc.at("distributedInfo").at("world_size"), 2);
  EXPECT_EQ(doc.at("deviceProperties").at(0).at("id"), 1);
  std::map<std::string, std::vector<nlohmann::json>> by_cat;
  for (const auto& e : doc.at("traceEvents")) {
    if (e.at("ph") == "X") by_cat[e.at("cat")].push_back(e);
  }
  ASSERT_EQ(by_cat["cpu_op"].size(), 1u);
  ASSERT_EQ(by_cat["cuda_runtime"].size(), 3u);  // the launch, the copy, the sync
  ASSERT_EQ(by_cat["kernel"].size(), 1u);
  ASSERT_EQ(by_cat["gpu_memcpy"].size(), 1u);
  const nlohmann::json& kernel = by_cat["kernel"][0];
  EXPECT_EQ(kernel.at("pid"), 1);  // the device's process
  EXPECT_EQ(kernel.at("tid"), kSimComputeStream);
  EXPECT_EQ(kernel.at("args").at("stream"), kSimComputeStream);
  std::set<int64_t> launch_correlations;
  for (const auto& call : by_cat["cuda_runtime"]) {
    if (call.at("name") == "cudaLaunchKernel" || call.at("name") == "cudaMemcpyAsync") {
      launch_correlations.insert(call.at("args").at("correlation").get<int64_t>());
      EXPECT_FALSE(call.at("args").contains("stream"));  // host side, for HTA
    } else {
      EXPECT_EQ(call.at("name"), "cudaStreamSynchronize");
    }
  }
  EXPECT_EQ(launch_correlations,
            (std::set<int64_t>{kernel.at("args").at("correlation").get<int64_t>(),
                               by_cat["gpu_memcpy"][0].at("args").at("correlation").get<int64_t>()}));
  EXPECT_EQ(by_cat["gpu_memcpy"][0].at("name"), "Memcpy HtoD (Pinned -> Device)");
  EXPECT_EQ(by_cat["cpu_op"][0].at("args").at("External id"), kernel.at("args").at("External id"));
  std::set<std::string> annotations;
  for (const auto& e : by_cat["user_annotation"]) annotations.insert(e.at("name"));
  EXPECT_EQ(annotations, (std::set<std::string>{"ProfilerStep#0", "optimizer.step"}));
}

// HTA rounds a nanosecond trace's slices to whole microseconds, start up and end down: device
// work that crosses no whole microsecond (the sim's copies and small kernels) is written long
// enough to reach one, so that none has a negative duration to HTA; starts stay as they were.
TEST(Trace, KinetoDeviceSlicesStayNonNegativeWhenHtaRoundsThem) {
  TraceRecorder trace;
  trace.set_origin(1'000'000);
  const std::vector<std::pair<int64_t, int64_t>> slices = {
      {1'000'100, 1'000'100},   // 0 ns at 0.1 µs
      {1'002'200, 1'002'900},   // 700 ns within one microsecond
      {1'005'000, 1'005'000},   // 0 ns on a whole microsecond
      {1'007'300, 1'010'400}};  // 3.1 µs: as it is
  uint64_t correlation = 0;
  for (const auto& [begin, end] : slices) {
    trace.add_device_work(DeviceWork::Memcpy, "Memcpy DtoH (Device -> Pinned)", 0,
                          kSimComputeStream, ++correlation, begin, end);
  }
  const nlohmann::json doc = nlohmann::json::parse(trace.to_kineto_json());
  std::vector<std::pair<double, double>> written;  // (ts, dur) in µs
  for (const auto& e : doc.at("traceEvents")) {
    if (e.value("cat", "") == "gpu_memcpy") written.emplace_back(e.at("ts"), e.at("dur"));
  }
  ASSERT_EQ(written.size(), slices.size());
  for (size_t i = 0; i < written.size(); ++i) {
    const auto [ts, dur] = written[i];
    EXPECT_DOUBLE_EQ(ts, (slices[i].first - 1'000'000) / 1000.0);  // the start as it was
    EXPECT_GE(dur, (slices[i].second - slices[i].first) / 1000.0);
    // HTA: ceil(ts), floor(ts + dur), dur = their difference.
    EXPECT_GE(std::floor(ts + dur) - std::ceil(ts), 0.0) << i;
  }
  EXPECT_NEAR(written[0].second, 0.9, 1e-9);
  EXPECT_NEAR(written[1].second, 0.8, 1e-9);
  EXPECT_EQ(written[2].second, 0.0);
  EXPECT_NEAR(written[3].second, 3.1, 1e-9);
}

// A sync whose wait was measured is a span of that length on the syncs track, ending when it
// was recorded; one whose wait was not is an instant.
TEST(Trace, ATimedSyncIsASpanOfItsWait) {
  TraceRecorder trace;
  EventCollector collector;
  collector.set_trace(&trace);
  {
    ScopedCollection scope(collector);
    events::record_sync("aten::_local_scalar_dense", "item", 2500);
    events::record_sync("device.synchronize", "device synchronize");
  }
  const nlohmann::json doc = nlohmann::json::parse(trace.to_json());
  int spans = 0, instants = 0;
  for (const auto& e : doc.at("traceEvents")) {
    if (e.value("cat", "") != "sync") continue;
    if (e.at("ph") == "X") {
      ++spans;
      EXPECT_EQ(e.at("name"), "aten::_local_scalar_dense");
      EXPECT_NEAR(e.at("dur").get<double>(), 2.5, 1e-9);  // microseconds
      EXPECT_EQ(e.at("args").at("reason"), "item");
    } else {
      ++instants;
      EXPECT_EQ(e.at("ph"), "i");
      EXPECT_EQ(e.at("name"), "device.synchronize");
    }
  }
  EXPECT_EQ(spans, 1);
  EXPECT_EQ(instants, 1);
}

TEST(Trace, RanksMergeIntoOneDocumentOnOneClock) {
  TraceRecorder rank0;
  rank0.set_process(0, "rank 0", 0, 2);
  TraceRecorder rank1;  // started later: its times move by the difference of the origins
  rank1.set_process(1, "rank 1", 1, 2);
  const int64_t t = trace_clock_ns();
  rank0.add_span("device ops", "op", "kernel", t, t + 1000);
  rank1.add_span("device ops", "op", "kernel", t, t + 1000);
  rank0.add_flow("launch", 1, "a", t, "b", t);
  rank1.add_flow("launch", 1, "a", t, "b", t);
  const nlohmann::json doc = nlohmann::json::parse(merge_traces({rank0.to_json(), rank1.to_json()}));
  std::map<int, double> span_ts;
  std::set<uint64_t> flow_ids;
  std::map<int, std::string> process_names;
  for (const auto& e : doc.at("traceEvents")) {
    if (e.at("ph") == "X") span_ts[e.at("pid").get<int>()] = e.at("ts").get<double>();
    if (e.at("ph") == "s") flow_ids.insert(e.at("id").get<uint64_t>());
    if (e.at("name") == "process_name") {
      process_names[e.at("pid").get<int>()] = e.at("args").at("name").get<std::string>();
    }
  }
  EXPECT_EQ(process_names, (std::map<int, std::string>{{0, "rank 0"}, {1, "rank 1"}}));
  ASSERT_EQ(span_ts.size(), 2u);
  EXPECT_NEAR(span_ts[0], span_ts[1], 1e-3);  // the same instant, on rank 0's clock
  EXPECT_EQ(flow_ids.size(), 2u);             // flow ids kept apart across ranks
  EXPECT_THROW(merge_traces({rank0.to_json(), "{\"traceEvents\": 3}"}), std::invalid_argument);
}

}  // namespace
}  // namespace harness

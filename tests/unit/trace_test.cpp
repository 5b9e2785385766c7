// The Chrome trace: valid JSON whatever the names, phases nested, times in microseconds.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <map>
#include <set>

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

TEST(Trace, PhasesAndCountedEventsAppearWithTheirPhase) {
  TraceRecorder trace;
  EventCollector collector;
  collector.set_trace(&trace);
  add_phase_listener(&trace);
  {
    ScopedCollection scope(collector);
    Phase outer("optimizer.step");
    events::record_launch("aten::add_", events::begin_time());
    events::record_copy(CopyKind::DeviceToHost, 4, false);
    events::record_sync("aten::_local_scalar_dense", "item");
    events::record_collective("broadcast", 64);
  }
  remove_phase_listener(&trace);
  const nlohmann::json doc = nlohmann::json::parse(trace.to_json());
  std::map<std::string, int> by_ph;
  std::map<int, std::string> thread_names;
  for (const auto& e : doc.at("traceEvents")) {
    by_ph[e.at("ph").get<std::string>()] += 1;
    if (e.at("ph") == "M" && e.at("name") == "thread_name") {
      thread_names[e.at("tid").get<int>()] = e.at("args").at("name").get<std::string>();
    }
    if (e.at("ph") == "i") {
      EXPECT_EQ(e.at("args").at("phase"), "optimizer.step");
      if (e.at("cat") == "collective") {
        EXPECT_EQ(e.at("name"), "broadcast");
        EXPECT_EQ(e.at("args").at("bytes"), "64");
      } else {
        EXPECT_EQ(e.at("name"), "aten::_local_scalar_dense");
      }
    }
  }
  EXPECT_EQ(by_ph["B"], 1);
  EXPECT_EQ(by_ph["E"], 1);
  EXPECT_EQ(by_ph["X"], 2);  // the launch and the copy
  EXPECT_EQ(by_ph["i"], 2);  // the sync and the collective
  std::set<std::string> names;
  for (const auto& [_, n] : thread_names) names.insert(n);
  EXPECT_EQ(names, (std::set<std::string>{"phases", "device ops", "copies", "syncs", "collectives"}));
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
  rank0.set_process(0, "rank 0");
  TraceRecorder rank1;  // started later: its times move by the difference of the origins
  rank1.set_process(1, "rank 1");
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

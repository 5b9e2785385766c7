// Google Benchmark JSON: the fields its tools read, one entry per variant or per step, no NaN.
#include <gtest/gtest.h>

#include <cmath>

#include "harness/report/io/gbench_json.h"
#include "test_support.h"

namespace harness {
namespace {

GbenchContext context() {
  GbenchContext c;
  c.date = "2026-11-23T12:00:00+00:00";
  c.host_name = "ci-host";
  c.executable = "bench";
  c.num_cpus = 2;
  c.mhz_per_cpu = 2445.4;
  c.library_build_type = "release";
  return c;
}

RunReport with_times() {
  RunReport r = sample_report();
  VariantResult& v = sample_variant(r, "fresh/foreach");
  v.timing.push_back({"step_cpu_time.mean", 1100000, "ns", "cpu"});
  v.samples["step_cpu_time"] = {1100000, 1000000, 1200000, 1100000, 1100000};
  sample_variant(r, "fresh/forloop").per_step.push_back(
      {"collective.count", std::nullopt, "count", "not measured"});
  return r;
}

TEST(GbenchJson, ContextHasWhatTheToolsRequire) {
  const ReportJson j = gbench_json(with_times(), context(), false);
  const ReportJson& c = j["context"];
  EXPECT_EQ(c["json_schema_version"], 1);
  EXPECT_TRUE(c["caches"].is_array());  // Bencher requires the key, even empty
  EXPECT_EQ(c["mhz_per_cpu"], 2445);
  EXPECT_EQ(c["library_build_type"], "release");
  EXPECT_EQ(c["harness_git_sha"], "abc1234");
}

TEST(GbenchJson, OneEntryPerVariantWithCountersAndErrors) {
  const ReportJson j = gbench_json(with_times(), context(), false);
  const ReportJson& b = j["benchmarks"];
  ASSERT_EQ(b.size(), 5u);  // every variant, the failed one as an error
  const ReportJson& fresh = b[0];
  EXPECT_EQ(fresh["name"], "resume_adam/fresh/foreach");
  EXPECT_EQ(fresh["run_type"], "iteration");
  EXPECT_EQ(fresh["iterations"], 5);
  EXPECT_DOUBLE_EQ(fresh["real_time"].get<double>(), 1234567 * 1.01);  // the mean
  EXPECT_DOUBLE_EQ(fresh["cpu_time"].get<double>(), 1100000);
  EXPECT_EQ(fresh["time_unit"], "ns");
  EXPECT_DOUBLE_EQ(fresh["d2h.count"].get<double>(), 4);
  const ReportJson& failed = b[3];
  EXPECT_EQ(failed["name"], "resume_adam/resume_rebuild/foreach");
  EXPECT_EQ(failed["error_occurred"], true);
  EXPECT_EQ(failed["error_message"], "checkpoint not found");
  EXPECT_FALSE(b[4].contains("collective.count"));  // null: left out, never NaN
  EXPECT_EQ(b[4]["cpu_time"], 0);                    // no CPU time measured: 0, not null
  const std::string text = j.dump();
  EXPECT_EQ(text.find("NaN"), std::string::npos);
  EXPECT_EQ(text.find("null"), std::string::npos);
}

TEST(GbenchJson, RepetitionsAreOneEntryPerStepThenAggregates) {
  const ReportJson j = gbench_json(with_times(), context(), true);
  const ReportJson& b = j["benchmarks"];
  // fresh/foreach: 5 steps + mean, median, stddev.
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(b[i]["name"], "resume_adam/fresh/foreach");
    EXPECT_EQ(b[i]["repetitions"], 5);
    EXPECT_EQ(b[i]["repetition_index"], i);
    EXPECT_EQ(b[i]["iterations"], 1);
  }
  EXPECT_DOUBLE_EQ(b[3]["real_time"].get<double>(), 1234567.5);
  EXPECT_DOUBLE_EQ(b[1]["cpu_time"].get<double>(), 1000000);
  EXPECT_EQ(b[5]["name"], "resume_adam/fresh/foreach_mean");
  EXPECT_EQ(b[5]["run_type"], "aggregate");
  EXPECT_EQ(b[5]["aggregate_name"], "mean");
  EXPECT_EQ(b[5]["run_name"], "resume_adam/fresh/foreach");
  EXPECT_DOUBLE_EQ(b[6]["real_time"].get<double>(), 1234567.5);  // median
  EXPECT_EQ(b[7]["aggregate_name"], "stddev");
}

}  // namespace
}  // namespace harness

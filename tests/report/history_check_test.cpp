// bench history check (harness/report/history/check.h): which step-time shifts are the code's.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "harness/report/history/check.h"

namespace harness::history {
namespace {

// A step-time series: one point per (commit, value), a day apart.
Series times(const std::vector<std::pair<std::string, double>>& runs) {
  Series s{"resume_adam", "fresh/foreach", "timing.step_time.median", "ns", MetricKind::Time, {}};
  for (size_t i = 0; i < runs.size(); ++i) {
    Run run{static_cast<int64_t>(i + 1), runs[i].first, "main", "2026-01-" + std::to_string(i + 10)};
    s.points.push_back({run, runs[i].second});
  }
  return s;
}

// Small deterministic noise (about 1 %) around `level`.
double at(double level, size_t i) { return level * (1 + ((i * 7919) % 23 - 11.0) / 1100); }

CheckOptions options() {
  CheckOptions o;
  o.since = 5;
  return o;
}

TEST(HistoryCheck, AShiftBetweenRunsOfOneCommitIsTheMachinesNotARegression) {
  std::vector<std::pair<std::string, double>> runs;
  for (size_t i = 0; i < 12; ++i) runs.push_back({"c1", at(i < 8 ? 700e3 : 1700e3, i)});
  const std::vector<Finding> f = series_findings(times(runs), options());
  ASSERT_EQ(f.size(), 1u);
  EXPECT_TRUE(f[0].regression);
  EXPECT_TRUE(f[0].recent);
  EXPECT_TRUE(f[0].within_one_build);
  EXPECT_FALSE(f[0].fails());
  const CheckResult result = check_history({times(runs)}, 12, options());
  EXPECT_FALSE(result.failed());
  EXPECT_NE(check_text(result, options()).find("within one build"), std::string::npos);
}

TEST(HistoryCheck, AShiftAtANewCommitIsARegression) {
  std::vector<std::pair<std::string, double>> runs;
  for (size_t i = 0; i < 12; ++i) runs.push_back({i < 8 ? "c1" : "c2", at(i < 8 ? 700e3 : 1700e3, i)});
  const std::vector<Finding> f = series_findings(times(runs), options());
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].index, 8u);
  EXPECT_EQ(f[0].run.commit, "c2");
  EXPECT_FALSE(f[0].within_one_build);
  EXPECT_TRUE(f[0].fails());
}

// A commit whose own runs sit at two levels: the step up to its first run is its regression; the
// further step between its runs is the machine's.
TEST(HistoryCheck, AStepWithinTheSlowerCommitIsTheMachinesAndTheStepToItIsARegression) {
  std::vector<std::pair<std::string, double>> runs;
  for (size_t i = 0; i < 12; ++i) runs.push_back({i < 7 ? "c1" : "c2", at(i < 7 ? 700e3 : 1700e3, i)});
  runs[7].second = 1450e3;
  const std::vector<Finding> f = series_findings(times(runs), options());
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].index, 7u);
  EXPECT_EQ(f[0].run.commit, "c2");
  EXPECT_FALSE(f[0].within_one_build);
  EXPECT_TRUE(f[0].fails());
  EXPECT_EQ(f[1].index, 8u);
  EXPECT_TRUE(f[1].within_one_build);
  EXPECT_FALSE(f[1].fails());
}

TEST(HistoryCheck, CountChangesAreNeverExcused) {
  Series s{"resume_adam", "fresh/foreach", "per_step.sync.count", "count", MetricKind::Count, {}};
  for (size_t i = 0; i < 6; ++i) {
    s.points.push_back({history::Run{static_cast<int64_t>(i + 1), "c1", "main", "2026-01-1" + std::to_string(i)},
                        i < 4 ? 20.0 : 21.0});
  }
  const std::vector<Finding> f = series_findings(s, options());
  ASSERT_EQ(f.size(), 1u);
  EXPECT_FALSE(f[0].within_one_build);
  EXPECT_TRUE(f[0].fails());
}

}  // namespace
}  // namespace harness::history

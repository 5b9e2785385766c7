// bench history check (harness/report/history/check.h): which step-time shifts are the code's.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "harness/report/history/check.h"
#include "harness/report/history/significance.h"

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

// The variant's machine in each run: (probe median in ns, share of time waiting for a CPU; < 0:
// not reported).
std::vector<Series> machine(const std::vector<std::pair<double, double>>& runs) {
  Series probe{"resume_adam", "fresh/foreach", kMachineProbeMetric, "ns", MetricKind::Time, {}};
  Series wait{"resume_adam", "fresh/foreach", kCpuWaitMetric, "ratio", MetricKind::Time, {}};
  for (size_t i = 0; i < runs.size(); ++i) {
    const Run run{static_cast<int64_t>(i + 1), "", "", ""};
    probe.points.push_back({run, runs[i].first});
    if (runs[i].second >= 0) wait.points.push_back({run, runs[i].second});
  }
  return {probe, wait};
}

// Twelve runs of twelve commits with unchanged code; the last one slower by `factor`.
std::vector<std::pair<std::string, double>> last_slower(double factor, size_t runs = 12) {
  std::vector<std::pair<std::string, double>> out;
  for (size_t i = 0; i < runs; ++i) {
    out.push_back({"c" + std::to_string(i), at(i + 1 < runs ? 700e3 : 700e3 * factor, i)});
  }
  return out;
}

std::vector<std::pair<double, double>> quiet_machine(size_t runs = 12) {
  return std::vector<std::pair<double, double>>(runs, {30e3, 0.02});
}

// Issue 43: the last of 12 runs taken beside two busy processes, +187 %; its threads waited for
// a CPU 45 % of the time and its probe took 2.5x as long.
TEST(HistoryCheck, ALastRunOnABusyMachineIsNotARegression) {
  std::vector<std::pair<double, double>> load = quiet_machine();
  load.back() = {75e3, 0.45};
  const CheckResult r = check_history({times(last_slower(2.87))}, 12, options(), {}, machine(load));
  ASSERT_EQ(r.findings.size(), 1u);
  const Finding& f = r.findings[0];
  EXPECT_TRUE(f.regression);
  EXPECT_EQ(f.runs_at_new_level, 1u);
  EXPECT_EQ(f.confirming_runs, 0u);
  ASSERT_EQ(f.machine.size(), 1u);
  EXPECT_NE(f.machine[0].find("run 12 (2026-01-21): its threads waited for a CPU 45%"),
            std::string::npos)
      << f.machine[0];
  EXPECT_FALSE(r.failed());
  EXPECT_NE(check_text(r, options()).find("the machine explains 1 of the 1 run at the new level"),
            std::string::npos);
}

// A report without the wait (before schema 1.4): the probe alone. Scaled by its probe, the
// run's time is 2.87 / 2.5 = 1.15x the old level: nearer the old level than the new.
TEST(HistoryCheck, ALastRunWhoseProbeSawTheLoadIsNotARegression) {
  std::vector<std::pair<double, double>> load(12, {30e3, -1});
  load.back().first = 75e3;
  const CheckResult r = check_history({times(last_slower(2.87))}, 12, options(), {}, machine(load));
  ASSERT_EQ(r.findings.size(), 1u);
  ASSERT_EQ(r.findings[0].machine.size(), 1u);
  EXPECT_NE(r.findings[0].machine[0].find("its machine probe took 2.50x"), std::string::npos);
  EXPECT_FALSE(r.failed());
}

// Without a machine to blame, one run is one draw: the change waits for a second run (HUD's two
// breaches), and fails with it.
TEST(HistoryCheck, OneSlowerRunIsNotYetARegressionTwoAre) {
  CheckResult r = check_history({times(last_slower(1.3))}, 12, options(), {}, machine(quiet_machine()));
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_EQ(r.findings[0].confirming_runs, 1u);
  EXPECT_FALSE(r.failed());
  EXPECT_NE(check_text(r, options()).find("only 1 run at the new level"), std::string::npos);

  std::vector<std::pair<std::string, double>> runs = last_slower(1.3, 13);
  runs[11].second = at(700e3 * 1.3, 11);
  r = check_history({times(runs)}, 13, options(), {}, machine(quiet_machine(13)));
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_EQ(r.findings[0].index, 11u);
  EXPECT_EQ(r.findings[0].confirming_runs, 2u);
  EXPECT_TRUE(r.failed());
}

// A slower commit first measured on a busy machine: the busy run does not confirm it, the quiet
// ones after it do.
TEST(HistoryCheck, ARealRegressionIsConfirmedByTheQuietRunsAfterABusyOne) {
  std::vector<std::pair<std::string, double>> runs;
  for (size_t i = 0; i < 14; ++i) runs.push_back({"c" + std::to_string(i), at(i < 11 ? 700e3 : 910e3, i)});
  runs[11].second = at(910e3 * 1.6, 11);
  std::vector<std::pair<double, double>> load = quiet_machine(14);
  load[11] = {48e3, 0.40};
  const CheckResult r = check_history({times(runs)}, 14, options(), {}, machine(load));
  ASSERT_FALSE(r.findings.empty());
  EXPECT_TRUE(r.failed()) << check_text(r, options());
}

TEST(HistoryCheck, OptionsOfOneRunFailAtOnce) {
  CheckOptions o = options();
  o.min_runs = 1;
  EXPECT_TRUE(check_history({times(last_slower(1.3))}, 12, o, {}, machine(quiet_machine())).failed());
}

// Benjamini and Hochberg (1995)'s own example: 15 p-values at q = 0.05 keep the first four.
TEST(BenjaminiHochberg, KeepsTheLargestPBelowItsLine) {
  const std::vector<double> p = {0.0001, 0.0004, 0.0019, 0.0095, 0.0201, 0.0278, 0.0298, 0.0344,
                                 0.0459, 0.3240, 0.4262, 0.5719, 0.6528, 0.7590, 1.0};
  EXPECT_EQ(benjamini_hochberg_cutoff(p, p.size(), 0.05), 0.0095);
  // More tests than p-values (series without a change point): stricter.
  EXPECT_EQ(benjamini_hochberg_cutoff(p, 100, 0.05), 0.0004);
  EXPECT_EQ(benjamini_hochberg_cutoff({0.01}, 10, 0.05), std::nullopt);
  EXPECT_EQ(benjamini_hochberg_cutoff({}, 10, 0.05), std::nullopt);
}

}  // namespace
}  // namespace harness::history

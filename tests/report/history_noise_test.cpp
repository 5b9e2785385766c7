// bench history check on pure noise (harness/report/history/check.h): histories of 100 runs of 200
// step-time series, each run an independent draw, must not fail at the default settings. The
// series are made here from fixed seeds, so the tallies are exact.
#include <gtest/gtest.h>

#include <cstdint>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "harness/report/history/check.h"

namespace harness::history {
namespace {

constexpr size_t kRuns = 100;
constexpr size_t kSeries = 200;
constexpr size_t kHistories = 20;

// Uniform in [-1, 1) from a fixed generator (uniform_real_distribution differs between libraries).
double uniform(std::mt19937_64& gen) {
  return static_cast<double>(gen() >> 11) * 0x1.0p-53 * 2 - 1;
}

// One history: kSeries median step times of about 1 ms, each run off by up to +-`noise`.
std::vector<Series> noise_history(uint64_t seed, double noise) {
  std::mt19937_64 gen(seed);
  std::vector<Series> out;
  for (size_t s = 0; s < kSeries; ++s) {
    Series series{"scale", "v" + std::to_string(s / 2), s % 2 ? "timing.step_cpu_time.median"
                                                              : "timing.step_time.median",
                  "ns", MetricKind::Time, {}};
    for (size_t i = 0; i < kRuns; ++i) {
      const Run run{static_cast<int64_t>(i + 1), "c" + std::to_string(i), "main",
                    "2026-01-01T00:00:" + std::to_string(10 + i / 10) + "Z"};
      series.points.push_back({run, 1e6 * (1 + noise * uniform(gen))});
    }
    out.push_back(std::move(series));
  }
  return out;
}

struct Tally {
  size_t failed = 0;       // histories whose check fails
  size_t changes = 0;      // time change points reported, over all histories
  size_t regressions = 0;  // of those, rises that fail
};

Tally tally(double noise, const CheckOptions& options) {
  Tally t;
  for (uint64_t seed = 1; seed <= kHistories; ++seed) {
    const CheckResult r = check_history(noise_history(seed, noise), kRuns, options);
    t.failed += r.failed();
    t.changes += r.findings.size();
    for (const Finding& f : r.findings) t.regressions += f.fails();
  }
  std::cout << "noise +-" << noise * 100 << "%: " << t.failed << " of " << kHistories
            << " histories fail, " << t.changes << " change points, " << t.regressions
            << " failing regressions\n";
  return t;
}

TEST(HistoryNoise, NoiseOf2Point5PercentNeverFailsAtTheDefaults) {
  const Tally t = tally(0.025, CheckOptions{});
  EXPECT_EQ(t.failed, 0u);
  EXPECT_EQ(t.changes, 0u);
}

// Noise wider than the minimum effect: only the correction over all series keeps it quiet.
TEST(HistoryNoise, NoiseOf10PercentNeverFailsAtTheDefaults) {
  const Tally t = tally(0.10, CheckOptions{});
  EXPECT_EQ(t.failed, 0u);
}

}  // namespace
}  // namespace harness::history

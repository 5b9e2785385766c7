#pragma once
// Statistics for times measured on a noisy machine: the one-sided Mann-Whitney U test and the
// Hodges-Lehmann ratio with its distribution-free confidence interval, and compare_times, the
// decision that `bench compare` and the gates' statistical time rules share.
//
// Written here, not taken from a library: Debian packages no maintained C++ library with an exact
// Mann-Whitney U (Boost.Math has the distributions, not rank tests; GSL has neither; ALGLIB's
// `mannwhitneyutest` approximates). The exact null distribution of U is Harding's (1984)
// generating-function recurrence; the asymptotic one follows scipy.stats.mannwhitneyu (normal
// approximation, tie correction, continuity correction), and the tests pin scipy's p-values.
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace harness {

// The median of `values` (0 when empty).
double median_of(std::vector<double> values);

// The exact null distribution of U for samples of sizes m and n (no ties): P(U = u), u = 0..m*n.
std::vector<double> mann_whitney_pmf(size_t m, size_t n);

// The one-sided Mann-Whitney U test of `head` against `base`.
struct MannWhitney {
  size_t n_head = 0;
  size_t n_base = 0;
  double u_head = 0;       // pairs (h, b) with h > b, ties counting one half
  double p_greater = 1;    // P-value of "head tends to be larger than base"
  double p_less = 1;       // P-value of "head tends to be smaller than base"
  double min_p = 1;        // the smallest one-sided p-value these sizes can give: 1 / C(m+n, m)
  bool exact = false;      // exact distribution (else normal approximation with tie correction)
};

// Exact when the samples are small enough for the exact distribution to be cheap (m*n*min(m,n)
// up to 1e8: 460 steps a side), else asymptotic. With ties the exact test uses floor(U), as
// scipy does (conservative). Empty samples give p = 1.
MannWhitney mann_whitney_u(const std::vector<double>& head, const std::vector<double>& base);

// The Hodges-Lehmann estimate of head / base: the median of the m*n ratios h/b, and its
// distribution-free confidence interval: the k-th smallest and k-th largest ratio, k taken from
// U's null distribution so that P(U < k) <= (1 - confidence) / 2. The interval is absent when the
// samples are too small for that confidence (or a time is not positive).
struct RatioEstimate {
  std::optional<double> ratio;  // absent: an empty sample, or a time that is not positive
  std::optional<double> low;
  std::optional<double> high;
};
RatioEstimate hodges_lehmann_ratio(const std::vector<double>& head, const std::vector<double>& base,
                                   double confidence = 0.95);

// "1.135 [1.062, 1.207]" (no interval: "1.135"; no ratio: ""), as messages and tables show it.
std::string format_ratio_estimate(const RatioEstimate& estimate);
// "3.0e-04" below 0.001, else "0.253".
std::string format_p_value(double p);

// What the time of head says against the time of base.
enum class TimeVerdict { Regression, Improvement, Unchanged, Inconclusive };
const char* to_string(TimeVerdict verdict);  // "regression", "improvement", ...

struct TimeTestOptions {
  double alpha = 0.01;      // significance of each one-sided test
  double max_ratio = 1.10;  // slower than this (Hodges-Lehmann ratio) and significant: regression
  size_t min_samples = 10;  // per side, else inconclusive
  // Between two runs: fresh processes per side (bench --repetitions), else inconclusive.
  size_t min_processes = 3;
};

// The fresh processes whose steps make up each side's samples (VariantResult::processes), for a
// comparison between two runs.
struct ProcessCounts {
  size_t head = 1;
  size_t base = 1;
};

// The median of each process's part of `samples` (`processes` consecutive, equal parts).
std::vector<double> process_medians(const std::vector<double>& samples, size_t processes);

struct TimeComparison {
  TimeVerdict verdict = TimeVerdict::Inconclusive;
  MannWhitney test;
  RatioEstimate ratio;
  std::string reason;  // one line: why this verdict, with the numbers
};

// Regression: head is slower with p_greater < alpha and the ratio is above max_ratio.
// Improvement: head is faster with p_less < alpha and the ratio is below 1 / max_ratio.
// Inconclusive: fewer than min_samples on a side, or these sizes cannot reach p < alpha.
// Unchanged otherwise (a significant change smaller than max_ratio is unchanged, said in reason).
// The ratio is the Hodges-Lehmann estimate; where a time is 0 (a wait that rose from nothing),
// the ratio of the medians, infinite from a median of 0.
//
// `between_runs` (head and base are two runs, not two variants of one): the steps of one process
// share its memory layout, clocks and caches, so they cannot show how far a second process of the
// same code lands (seen here: +66 % between two runs of one build, every step of one slower). A
// regression or improvement then also needs at least min_processes processes a side, and every
// process of head beyond every process of base by more than max_ratio (the medians of their
// steps); else it is inconclusive, and the reason gives the processes' spread.
TimeComparison compare_times(const std::vector<double>& head, const std::vector<double>& base,
                             const TimeTestOptions& options,
                             const std::optional<ProcessCounts>& between_runs = std::nullopt);

// Why a time verdict of `ratio` (head / base, beyond max_ratio either way) between two runs is the
// machine's rather than the code's, from the machine probe timed after each step of both
// (samples "machine_probe"): the probe itself moved, significantly by the one-sided U test at
// options.alpha, and `ratio` divided by the probe's Hodges-Lehmann ratio lies within
// [1 / max_ratio, max_ratio]. "" when not (no probe on a side, fewer than min_samples, a probe
// that did not move, or a change beyond the machine's).
std::string machine_drift(double ratio, const std::vector<double>* head_probe,
                          const std::vector<double>* base_probe, const TimeTestOptions& options);

}  // namespace harness

#pragma once
// Change points of a noisy series: E-Divisive means with a Student t-test, as Apache Otava does it
// (docs/MATH.md of apache/otava; Fleming et al., "Hunter: Using Change Point Detection to Hunt for
// Performance Regressions", ICPE 2023). Deterministic: no permutation test.
//
//   1. Split: over overlapping windows of `window` points (stepping by half a window, or to the
//      last point found), E-Divisive (Matteson and James) finds candidates: the split (tau, kappa)
//      of an interval that maximises the energy divergence Q-hat of [start, tau) and [tau, kappa);
//      a candidate is kept while a two-sided Student t-test of the two sides it splits has
//      p <= a relaxed threshold (10 x max_pvalue below 0.05). The union of all windows' points
//      are the "weak" change points.
//   2. Merge: the weakest point (largest p; when every p < max_pvalue, the smallest relative
//      change, kept if above min_magnitude) is removed and its neighbours re-tested against their
//      new neighbours, until every point passes.
// A change point's index is the first point of the new segment (never 0). Written here, not taken
// from a library: no maintained C++ implementation exists; tests pin apache-otava's own results
// (tests/report/fixtures/otava_change_points.json, made by scripts/otava_fixture.py).
#include <cstddef>
#include <vector>

namespace harness::history {

struct ChangePointOptions {
  size_t window = 50;          // Otava's window_len (>= 2)
  double max_pvalue = 0.001;   // significance of the final change points
  double min_magnitude = 0.0;  // a significant point is kept only above this relative change
};

struct ChangePoint {
  size_t index = 0;  // first point after the change
  double pvalue = 1;  // two-sided Student t-test of the segments on either side (NaN: undefined)
  double mean_before = 0;
  double mean_after = 0;
  double stddev_before = 0;  // population standard deviations (ddof 0), as Otava's
  double stddev_after = 0;

  double forward_change() const;  // mean_after / mean_before - 1; 0 when mean_before is 0
  double magnitude() const;       // the larger of |forward| and |backward| relative change
};

std::vector<ChangePoint> find_change_points(const std::vector<double>& series,
                                            const ChangePointOptions& options);

// The two segments' statistics and the p-value of Student's two-sided t-test (pooled variance)
// from their means, population standard deviations and sizes, as Otava passes them to
// scipy.stats.ttest_ind_from_stats. p is 1 for fewer than 3 points, NaN when both segments are
// constant and equal.
ChangePoint compare_segments(const double* left, size_t n_left, const double* right,
                             size_t n_right);

// P(T > t) for Student's t distribution with `df` degrees of freedom (df > 0).
double student_t_sf(double t, double df);

}  // namespace harness::history

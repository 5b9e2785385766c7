// E-Divisive means with a Student t-test (see change_points.h).
#include "harness/report/history/change_points.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

namespace harness::history {
namespace {

// The regularised incomplete beta function I_x(a, b) by its continued fraction (modified Lentz),
// on the side of x where it converges fast.
double incomplete_beta(double a, double b, double x) {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const double log_front =
      std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) + b * std::log1p(-x);
  if (x > (a + 1) / (a + b + 2)) return 1 - incomplete_beta(b, a, 1 - x);
  constexpr double kTiny = 1e-300;
  constexpr double kEps = 1e-16;
  double c = 1, d = 1 - (a + b) * x / (a + 1);
  if (std::fabs(d) < kTiny) d = kTiny;
  d = 1 / d;
  double f = d;
  for (int m = 1; m <= 10000; ++m) {
    for (int pass = 0; pass < 2; ++pass) {
      const double num = pass == 0 ? m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m))
                                   : -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1));
      d = 1 + num * d;
      if (std::fabs(d) < kTiny) d = kTiny;
      c = 1 + num / c;
      if (std::fabs(c) < kTiny) c = kTiny;
      d = 1 / d;
      const double delta = c * d;
      f *= delta;
      if (pass == 1 && std::fabs(delta - 1) < kEps) return std::exp(log_front) * f / a;
    }
  }
  return std::exp(log_front) * f / a;
}

double mean(const double* v, size_t n) {
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += v[i];
  return sum / static_cast<double>(n);
}

double population_stddev(const double* v, size_t n, double m) {
  if (n < 2) return 0;
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += (v[i] - m) * (v[i] - m);
  return std::sqrt(sum / static_cast<double>(n));
}

struct Candidate {
  size_t index = 0;
  double qhat = 0;
};

// [start, stop) of a series, and the segments that change points (sorted) cut it into.
struct Interval {
  size_t start = 0;
  size_t stop = 0;
};
std::vector<Interval> intervals_between(const std::vector<ChangePoint>& points, size_t size) {
  std::vector<Interval> out;
  size_t start = 0;
  for (const ChangePoint& p : points) {
    if (p.index != start) out.push_back({start, p.index});
    start = p.index;
  }
  if (start != size) out.push_back({start, size});
  return out;
}

// The split of z[start, stop) that maximises Q-hat (alpha = 1) over start < tau < kappa <= stop.
// Ties go to the smallest tau, then kappa, as Otava's argmax over its (tau, kappa) matrix does; that
// matrix holds 0 where kappa <= tau, which can win when every admissible Q-hat is negative.
Candidate best_split(const std::vector<double>& z, Interval interval) {
  const size_t a = interval.start, len = interval.stop - interval.start;
  // within[i][j]: the sum of |z_k - z_l| over pairs k < l of z[a+i, a+j).
  std::vector<std::vector<double>> within(len + 1, std::vector<double>(len + 1, 0.0));
  for (size_t j = 1; j <= len; ++j) {
    double column = 0;  // sum of |z_k - z_{a+j-1}| over k in [a+i, a+j-1)
    for (size_t i = j; i-- > 0;) {
      within[i][j] = within[i][j - 1] + column;
      if (i > 0) column += std::fabs(z[a + i - 1] - z[a + j - 1]);
    }
  }
  Candidate best;
  bool first = true;
  for (size_t row = 0; row + 1 < len; ++row) {
    const size_t tau = row + 1;  // relative to a
    for (size_t col = 0; col + 1 < len; ++col) {
      const size_t kappa = col + 2;
      double q = 0;
      if (kappa > tau) {
        const double n = static_cast<double>(tau), m = static_cast<double>(kappa - tau);
        const double cross = within[0][kappa] - within[0][tau] - within[tau][kappa];
        q = 2 / (n + m) * cross;
        if (tau > 1) q -= 2 * m / ((n + m) * (n - 1)) * within[0][tau];
        if (kappa - tau > 1) q -= 2 * n / ((n + m) * (m - 1)) * within[tau][kappa];
      }
      if (first || q > best.qhat) best = {a + tau, q};
      first = false;
    }
  }
  return best;
}

// E-Divisive with the t-test on one window: candidates while they are significant at `max_p`.
std::vector<ChangePoint> divisive(const std::vector<double>& z, double max_p) {
  std::vector<ChangePoint> points;
  for (;;) {
    const std::vector<Interval> intervals = intervals_between(points, z.size());
    std::optional<Candidate> best;
    Interval home{};
    for (const Interval& interval : intervals) {
      if (interval.stop - interval.start < 2) continue;
      const Candidate c = best_split(z, interval);
      if (!best || c.qhat > best->qhat) best = c, home = interval;
    }
    if (!best) break;
    ChangePoint point = compare_segments(z.data() + home.start, best->index - home.start,
                                         z.data() + best->index, home.stop - best->index);
    point.index = best->index;
    if (!(point.pvalue <= max_p)) break;
    points.insert(std::upper_bound(points.begin(), points.end(), point,
                                   [](const ChangePoint& x, const ChangePoint& y) {
                                     return x.index < y.index;
                                   }),
                  point);
  }
  return points;
}

// A change point's statistics against its neighbours (the segments between the points around it).
ChangePoint retest(const std::vector<double>& z, const std::vector<ChangePoint>& points, size_t i) {
  const size_t from = i == 0 ? 0 : points[i - 1].index;
  const size_t at = points[i].index;
  const size_t to = i + 1 == points.size() ? z.size() : points[i + 1].index;
  ChangePoint out = compare_segments(z.data() + from, at - from, z.data() + at, to - at);
  out.index = at;
  return out;
}

std::vector<ChangePoint> split(const std::vector<double>& z, size_t window, double max_p) {
  std::vector<ChangePoint> weak;
  const size_t step = window / 2;
  for (size_t start = 0; start < z.size();) {
    const size_t end = std::min(start + window, z.size());
    const std::vector<double> part(z.begin() + static_cast<std::ptrdiff_t>(start),
                                   z.begin() + static_cast<std::ptrdiff_t>(end));
    std::vector<ChangePoint> found = divisive(part, max_p);
    for (ChangePoint& p : found) p.index += start;
    start = std::max(found.empty() ? size_t{0} : found.back().index, start + step);
    for (const ChangePoint& p : found) {
      if (std::none_of(weak.begin(), weak.end(),
                       [&](const ChangePoint& w) { return w.index == p.index; })) {
        weak.push_back(p);
      }
    }
  }
  std::sort(weak.begin(), weak.end(),
            [](const ChangePoint& x, const ChangePoint& y) { return x.index < y.index; });
  std::vector<ChangePoint> out;
  for (size_t i = 0; i < weak.size(); ++i) out.push_back(retest(z, weak, i));
  return out;
}

void merge(const std::vector<double>& z, std::vector<ChangePoint>& points, double max_p,
           double min_magnitude) {
  while (!points.empty()) {
    // The first largest p (a NaN p is never larger, and is kept only when first).
    size_t weakest = 0;
    for (size_t i = 1; i < points.size(); ++i) {
      if (points[i].pvalue > points[weakest].pvalue) weakest = i;
    }
    if (points[weakest].pvalue < max_p) {
      weakest = 0;
      for (size_t i = 1; i < points.size(); ++i) {
        if (points[i].magnitude() < points[weakest].magnitude()) weakest = i;
      }
      if (points[weakest].magnitude() > min_magnitude) return;
    }
    points.erase(points.begin() + static_cast<std::ptrdiff_t>(weakest));
    // Re-tested as Otava 0.8 does: the point that took the removed one's place and the one after
    // it. (The point before it keeps its old p-value although its right segment grew.)
    for (size_t i = weakest; i < points.size() && i <= weakest + 1; ++i) {
      points[i] = retest(z, points, i);
    }
  }
}

}  // namespace

double ChangePoint::forward_change() const {
  return mean_before == 0 ? 0 : mean_after / mean_before - 1;
}

double ChangePoint::magnitude() const {
  const double backward = mean_after == 0 ? 0 : mean_before / mean_after - 1;
  return std::max(std::fabs(forward_change()), std::fabs(backward));
}

double student_t_sf(double t, double df) {
  if (std::isnan(t)) return t;
  if (std::isinf(t)) return t > 0 ? 0 : 1;
  const double tail = 0.5 * incomplete_beta(df / 2, 0.5, df / (df + t * t));
  return t > 0 ? tail : 1 - tail;
}

ChangePoint compare_segments(const double* left, size_t n_left, const double* right,
                             size_t n_right) {
  ChangePoint out;
  out.mean_before = mean(left, n_left);
  out.mean_after = mean(right, n_right);
  out.stddev_before = population_stddev(left, n_left, out.mean_before);
  out.stddev_after = population_stddev(right, n_right, out.mean_after);
  if (n_left + n_right <= 2) return out;  // p = 1
  const double n1 = static_cast<double>(n_left), n2 = static_cast<double>(n_right);
  const double df = n1 + n2 - 2;
  const double pooled = ((n1 - 1) * out.stddev_before * out.stddev_before +
                         (n2 - 1) * out.stddev_after * out.stddev_after) /
                        df;
  const double se = std::sqrt(pooled * (1 / n1 + 1 / n2));
  const double diff = out.mean_before - out.mean_after;
  if (se == 0) {
    out.pvalue = diff == 0 ? std::numeric_limits<double>::quiet_NaN() : 0.0;
    return out;
  }
  out.pvalue = std::min(1.0, 2 * student_t_sf(std::fabs(diff / se), df));
  return out;
}

std::vector<ChangePoint> find_change_points(const std::vector<double>& series,
                                            const ChangePointOptions& options) {
  const double p = options.max_pvalue;
  const double first_pass = p < 0.05 ? p * 10 : p < 0.5 ? p * 2 : p;
  std::vector<ChangePoint> points = split(series, std::max<size_t>(options.window, 2), first_pass);
  merge(series, points, p, options.min_magnitude);
  return points;
}

}  // namespace harness::history

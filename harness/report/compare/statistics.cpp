// The Mann-Whitney U test, the Hodges-Lehmann ratio and the time verdict built on them.
#include "harness/report/compare/statistics.h"

#include "harness/report/text/format.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>

namespace harness {
namespace {

// Above this m*n*min(m,n), the exact distribution costs too much and the normal approximation is
// accurate anyway.
constexpr double kExactWork = 1e8;

bool exact_is_cheap(size_t m, size_t n) {
  return static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(std::min(m, n)) <=
         kExactWork;
}

// 1 / C(m+n, m).
double inverse_binomial(size_t m, size_t n) {
  const double log_c = std::lgamma(static_cast<double>(m + n) + 1) -
                       std::lgamma(static_cast<double>(m) + 1) -
                       std::lgamma(static_cast<double>(n) + 1);
  return std::exp(-log_c);
}

double normal_sf(double z) { return 0.5 * std::erfc(z / std::sqrt(2.0)); }

// z with normal_sf(z) = p, by bisection (p in (0, 1)).
double normal_isf(double p) {
  double lo = -40, hi = 40;
  for (int i = 0; i < 200; ++i) {
    const double mid = 0.5 * (lo + hi);
    (normal_sf(mid) > p ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

// Midranks of the pooled sample (head first), and the tie term sum(t^3 - t).
struct Ranked {
  double rank_sum_head = 0;
  double tie_term = 0;
};

Ranked rank(const std::vector<double>& head, const std::vector<double>& base) {
  std::vector<std::pair<double, bool>> pooled;  // value, is head
  pooled.reserve(head.size() + base.size());
  for (double h : head) pooled.emplace_back(h, true);
  for (double b : base) pooled.emplace_back(b, false);
  std::sort(pooled.begin(), pooled.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  Ranked out;
  for (size_t i = 0; i < pooled.size();) {
    size_t j = i;
    while (j < pooled.size() && pooled[j].first == pooled[i].first) ++j;
    const double midrank = 0.5 * static_cast<double>(i + 1 + j);  // ranks i+1 .. j
    const double t = static_cast<double>(j - i);
    out.tie_term += t * t * t - t;
    for (size_t k = i; k < j; ++k) {
      if (pooled[k].second) out.rank_sum_head += midrank;
    }
    i = j;
  }
  return out;
}

// P(U >= k) from the pmf.
double upper_tail(const std::vector<double>& pmf, double k) {
  if (k <= 0) return 1.0;
  double p = 0;
  for (size_t u = static_cast<size_t>(k); u < pmf.size(); ++u) p += pmf[u];
  return std::min(1.0, std::max(0.0, p));
}

// The number of ratios h/b (sorted inputs, all positive) that are <= t.
size_t ratios_at_most(const std::vector<double>& h, const std::vector<double>& b, double t) {
  size_t count = 0, i = 0;
  for (double bj : b) {  // t * bj rises with bj: the count of h below it only grows
    const double limit = t * bj;
    while (i < h.size() && h[i] <= limit) ++i;
    count += i;
  }
  return count;
}

// The k-th smallest (1-based) of the m*n ratios h/b, without forming them: the least t with
// ratios_at_most(t) >= k, found by bisection down to adjacent doubles.
double ratio_order_statistic(const std::vector<double>& h, const std::vector<double>& b, size_t k) {
  double lo = h.front() / b.back() * (1 - 1e-15);  // below the least ratio
  double hi = h.back() / b.front() * (1 + 1e-15);  // at or above the largest
  while (true) {
    const double mid = lo + 0.5 * (hi - lo);
    if (mid <= lo || mid >= hi) break;
    (ratios_at_most(h, b, mid) >= k ? hi : lo) = mid;
  }
  return hi;
}

std::string fixed(double value, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, value);
  return buf;
}


}  // namespace

double median_of(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : 0.5 * (values[mid - 1] + values[mid]);
}

std::string format_p_value(double p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, p < 0.001 ? "%.1e" : "%.3f", p);
  return buf;
}

std::string format_ratio_estimate(const RatioEstimate& e) {
  if (!e.ratio) return "";
  std::string out = fixed(*e.ratio, 3);
  if (e.low && e.high) out += " [" + fixed(*e.low, 3) + ", " + fixed(*e.high, 3) + "]";
  return out;
}

std::vector<double> mann_whitney_pmf(size_t m, size_t n) {
  if (m > n) std::swap(m, n);
  // Harding (1984): the generating function of U is prod_{i=1..m} (1 - q^(n+i)) / (1 - q^i).
  // Step i divides by (1 - q^i) first (a running sum of positive terms: stable), then multiplies
  // by (1 - q^(n+i)), keeping the coefficients of degree <= i*n (the division is exact overall,
  // so higher terms never reach the result). The subtraction loses accuracy only where the result
  // is tiny, in the upper tail; each step's distribution is symmetric about i*n/2, so the upper
  // half is copied from the accurate lower half before the errors can spread. Each step is
  // normalised so that the coefficients sum to 1 (C(m+n, m) overflows a double from m = n = 514).
  std::vector<long double> c(m * n + 1, 0.0L);
  c[0] = 1;
  for (size_t i = 1; i <= m; ++i) {
    const size_t top = i * n, shift = n + i;
    for (size_t k = i; k <= top; ++k) c[k] += c[k - i];
    for (size_t k = top; k >= shift && k <= top; --k) c[k] -= c[k - shift];
    const long double scale = static_cast<long double>(i) / static_cast<long double>(n + i);
    for (size_t k = 0; k <= top / 2; ++k) c[k] *= scale;
    for (size_t k = top / 2 + 1; k <= top; ++k) c[k] = c[top - k];
  }
  std::vector<double> pmf(c.size());
  for (size_t k = 0; k < c.size(); ++k) pmf[k] = std::max(0.0, static_cast<double>(c[k]));
  return pmf;
}

MannWhitney mann_whitney_u(const std::vector<double>& head, const std::vector<double>& base) {
  MannWhitney out;
  const size_t m = head.size(), n = base.size();
  out.n_head = m;
  out.n_base = n;
  if (m == 0 || n == 0) return out;
  const double mn = static_cast<double>(m) * static_cast<double>(n);
  const Ranked r = rank(head, base);
  out.u_head = r.rank_sum_head - static_cast<double>(m) * static_cast<double>(m + 1) / 2;
  const double u_base = mn - out.u_head;
  out.min_p = inverse_binomial(m, n);
  out.exact = exact_is_cheap(m, n);
  if (out.exact) {
    const std::vector<double> pmf = mann_whitney_pmf(m, n);
    out.p_greater = upper_tail(pmf, std::floor(out.u_head));
    out.p_less = upper_tail(pmf, std::floor(u_base));
    return out;
  }
  const double total = static_cast<double>(m + n);
  const double sigma =
      std::sqrt(mn / 12 * ((total + 1) - r.tie_term / (total * (total - 1))));
  if (!(sigma > 0)) return out;  // every value equal: no evidence either way
  out.p_greater = normal_sf((out.u_head - mn / 2 - 0.5) / sigma);
  out.p_less = normal_sf((u_base - mn / 2 - 0.5) / sigma);
  return out;
}

RatioEstimate hodges_lehmann_ratio(const std::vector<double>& head, const std::vector<double>& base,
                                   double confidence) {
  RatioEstimate out;
  if (head.empty() || base.empty()) return out;
  std::vector<double> h = head, b = base;
  std::sort(h.begin(), h.end());
  std::sort(b.begin(), b.end());
  if (!(h.front() > 0) || !(b.front() > 0) || !std::isfinite(h.back()) ||
      !std::isfinite(b.back())) {
    return out;
  }
  const size_t m = h.size(), n = b.size(), pairs = m * n;
  out.ratio = pairs % 2 == 1 ? ratio_order_statistic(h, b, pairs / 2 + 1)
                             : 0.5 * (ratio_order_statistic(h, b, pairs / 2) +
                                      ratio_order_statistic(h, b, pairs / 2 + 1));
  // k: the largest with P(U <= k-1) <= (1 - confidence) / 2.
  const double tail = (1 - confidence) / 2;
  size_t k = 0;
  if (exact_is_cheap(m, n)) {
    const std::vector<double> pmf = mann_whitney_pmf(m, n);
    double cdf = 0;
    for (size_t u = 0; u < pmf.size(); ++u) {
      cdf += pmf[u];
      if (cdf > tail * (1 + 1e-12)) break;
      k = u + 1;
    }
  } else {
    const double mn = static_cast<double>(pairs);
    const double sigma = std::sqrt(mn * static_cast<double>(m + n + 1) / 12);
    const double u = std::floor(mn / 2 - 0.5 - sigma * normal_isf(tail));
    if (u >= 0) k = static_cast<size_t>(u) + 1;
  }
  if (k >= 1 && k <= pairs / 2) {
    out.low = ratio_order_statistic(h, b, k);
    out.high = ratio_order_statistic(h, b, pairs + 1 - k);
  }
  return out;
}

const char* to_string(TimeVerdict verdict) {
  switch (verdict) {
    case TimeVerdict::Regression: return "regression";
    case TimeVerdict::Improvement: return "improvement";
    case TimeVerdict::Unchanged: return "unchanged";
    case TimeVerdict::Inconclusive: return "inconclusive";
  }
  return "?";
}

std::vector<double> process_medians(const std::vector<double>& samples, size_t processes) {
  std::vector<double> out;
  for (size_t p = 0; p < processes; ++p) {
    const size_t begin = samples.size() * p / processes;
    const size_t end = samples.size() * (p + 1) / processes;
    if (begin < end) out.push_back(median_of({samples.begin() + begin, samples.begin() + end}));
  }
  return out;
}

namespace {

// head / base from the medians, where a time of 0 leaves no Hodges-Lehmann ratio: a rise from 0
// is infinite, 0 on both sides is 1.
std::optional<double> median_ratio(const std::vector<double>& head,
                                   const std::vector<double>& base) {
  const double h = median_of(head), b = median_of(base);
  if (!std::isfinite(h) || !std::isfinite(b) || h < 0 || b < 0) return std::nullopt;
  if (b == 0) return h == 0 ? 1.0 : std::numeric_limits<double>::infinity();
  return h / b;
}

std::string format_spread(const std::vector<double>& medians) {
  const auto [low, high] = std::minmax_element(medians.begin(), medians.end());
  return format_number(*low) + ".." + format_number(*high) + " ns";
}

// A verdict between two runs stands when the processes of the two sides do not overlap by
// max_ratio: every head process's median beyond every base process's (see compare_times).
void check_between_runs(TimeComparison& out, const std::vector<double>& head,
                        const std::vector<double>& base, const TimeTestOptions& options,
                        const ProcessCounts& processes) {
  if (out.verdict != TimeVerdict::Regression && out.verdict != TimeVerdict::Improvement) return;
  const std::string counts = std::to_string(processes.head) + " vs " +
                             std::to_string(processes.base) + " process(es)";
  if (processes.head < options.min_processes || processes.base < options.min_processes) {
    out.verdict = TimeVerdict::Inconclusive;
    out.reason = counts + ", fewer than min_processes " + std::to_string(options.min_processes) +
                 " a side: one process's steps cannot show the shift between runs (memory "
                 "layout, clocks, caches; bench --repetitions 3 on both sides measures it); " +
                 out.reason;
    return;
  }
  const std::vector<double> h = process_medians(head, processes.head);
  const std::vector<double> b = process_medians(base, processes.base);
  const bool slower = out.verdict == TimeVerdict::Regression;
  // The closest pair: the fastest head process against the slowest base one, or the reverse.
  const double near_head = slower ? *std::min_element(h.begin(), h.end())
                                  : *std::max_element(h.begin(), h.end());
  const double near_base = slower ? *std::max_element(b.begin(), b.end())
                                  : *std::min_element(b.begin(), b.end());
  const bool apart = slower ? near_head > near_base * options.max_ratio
                            : near_head * options.max_ratio < near_base;
  const std::string spread = "process medians head " + format_spread(h) + ", base " +
                             format_spread(b);
  if (apart) {
    out.reason += "; every process apart by more than " + fixed(options.max_ratio, 2) + "x (" +
                  counts + ": " + spread + ")";
    return;
  }
  out.verdict = TimeVerdict::Inconclusive;
  out.reason = counts + " overlap within " + fixed(options.max_ratio, 2) + "x (" + spread +
               "): within the variation between runs; " + out.reason;
}

}  // namespace

TimeComparison compare_times(const std::vector<double>& head, const std::vector<double>& base,
                             const TimeTestOptions& options,
                             const std::optional<ProcessCounts>& between_runs) {
  TimeComparison out;
  out.test = mann_whitney_u(head, base);
  out.ratio = hodges_lehmann_ratio(head, base);
  const std::string sizes = std::to_string(head.size()) + " vs " + std::to_string(base.size());
  if (head.size() < options.min_samples || base.size() < options.min_samples) {
    out.reason = sizes + " timed steps: fewer than min_samples " +
                 std::to_string(options.min_samples) + " on a side";
    return out;
  }
  if (!(out.test.min_p < options.alpha)) {
    out.reason = sizes + " timed steps cannot reach p < " + fixed(options.alpha, 3) +
                 " (smallest possible p " + format_p_value(out.test.min_p) + ")";
    return out;
  }
  std::string estimate;
  std::optional<double> effect = out.ratio.ratio;
  if (effect) {
    estimate = "ratio " + format_ratio_estimate(out.ratio);
  } else {
    effect = median_ratio(head, base);  // a time of 0: the medians say how far apart
    if (!effect) {
      out.reason = "a time is not a number >= 0: no ratio";
      return out;
    }
    estimate = std::isinf(*effect) ? "from 0 to a median of " + format_number(median_of(head)) +
                                         " ns"
                                   : "ratio of medians " + fixed(*effect, 3);
  }
  const double ratio = *effect;
  const std::string limit = fixed(options.max_ratio, 2);
  if (out.test.p_greater < options.alpha && ratio > options.max_ratio) {
    out.verdict = TimeVerdict::Regression;
    out.reason = estimate + ", slower with p " + format_p_value(out.test.p_greater) + " < " +
                 fixed(options.alpha, 3) + " and ratio > " + limit;
  } else if (out.test.p_less < options.alpha && ratio < 1 / options.max_ratio) {
    out.verdict = TimeVerdict::Improvement;
    out.reason = estimate + ", faster with p " + format_p_value(out.test.p_less) + " < " +
                 fixed(options.alpha, 3) + " and ratio < 1/" + limit;
  } else {
    out.verdict = TimeVerdict::Unchanged;
    const bool slower = ratio >= 1;
    const double p = slower ? out.test.p_greater : out.test.p_less;
    out.reason = estimate + ", " + (slower ? "slower" : "faster") + " p " + format_p_value(p) +
                 (p < options.alpha ? ": significant but within " + limit + "x"
                                    : ": not significant");
  }
  if (between_runs) check_between_runs(out, head, base, options, *between_runs);
  return out;
}

std::string machine_drift(double ratio, const std::vector<double>* head_probe,
                          const std::vector<double>* base_probe, const TimeTestOptions& options) {
  if (head_probe == nullptr || base_probe == nullptr) return "";
  if (head_probe->size() < options.min_samples || base_probe->size() < options.min_samples) {
    return "";
  }
  const MannWhitney test = mann_whitney_u(*head_probe, *base_probe);
  const RatioEstimate machine = hodges_lehmann_ratio(*head_probe, *base_probe);
  if (!machine.ratio || !(*machine.ratio > 0)) return "";
  const bool slower = *machine.ratio >= 1;
  const double p = slower ? test.p_greater : test.p_less;
  if (!(p < options.alpha)) return "";
  const double relative = ratio / *machine.ratio;
  if (relative > options.max_ratio || relative < 1 / options.max_ratio) return "";
  return std::string("the machine itself was ") + (slower ? "slower" : "faster") +
         " in head's run: the machine probe timed after each step moved " +
         format_ratio_estimate(machine) + " (p " + format_p_value(p) + "), and the time's ratio " +
         fixed(ratio, 3) + " is " + fixed(relative, 3) + "x that, within " +
         fixed(options.max_ratio, 2) + "x: drift of the machine, not a change of the code";
}

}  // namespace harness

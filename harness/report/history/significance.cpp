// The correction over all series and persistence beyond the machine (see significance.h).
#include "harness/report/history/significance.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "harness/report/model/result.h"
#include "harness/report/text/format.h"

namespace harness::history {
namespace {

const Series* machine_series(const std::vector<Series>& machine, const Series& of,
                             const char* metric) {
  for (const Series& s : machine) {
    if (s.scenario == of.scenario && s.variant == of.variant && s.metric == metric) return &s;
  }
  return nullptr;
}

std::optional<double> in_run(const Series* s, int64_t run_id) {
  if (s == nullptr) return std::nullopt;
  for (const Point& p : s->points) {
    if (p.run.id == run_id) return p.value;
  }
  return std::nullopt;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// bench compare's verdict on a variant's wait for a CPU ("" when it was not contended).
std::string contended(double cpu_wait_share) {
  VariantResult v;
  v.timing.push_back({kCpuWaitShare, cpu_wait_share, "ratio", ""});
  return contention(v);
}

std::string ratio_text(double ratio) {
  char out[32];
  std::snprintf(out, sizeof out, "%.2fx", ratio);
  return out;
}

}  // namespace

std::optional<double> benjamini_hochberg_cutoff(std::vector<double> pvalues, size_t tests, double q) {
  std::sort(pvalues.begin(), pvalues.end());
  const double m = static_cast<double>(std::max(tests, pvalues.size()));
  std::optional<double> out;
  for (size_t i = 0; i < pvalues.size(); ++i) {
    if (pvalues[i] <= static_cast<double>(i + 1) * q / m) out = pvalues[i];
  }
  return out;
}

NewLevel judge_new_level(const Series& series, const std::vector<size_t>& at,
                         const std::vector<double>& values, Segments seg,
                         const std::vector<Series>& machine) {
  NewLevel out;
  if (seg.begin == 0 || seg.begin >= seg.end) {  // no old level to judge against
    out.runs = out.confirming = seg.end - seg.begin;
    return out;
  }
  if (seg.from >= seg.begin) seg.from = 0;
  const Series* probe = machine_series(machine, series, kMachineProbeMetric);
  const Series* wait = machine_series(machine, series, kCpuWaitMetric);
  auto run_of = [&](size_t k) -> const Run& { return series.points[at[k]].run; };
  std::vector<double> earlier;  // the probe of the runs before the change
  for (size_t k = seg.from; k < seg.begin; ++k) {
    if (const auto p = in_run(probe, run_of(k).id)) earlier.push_back(*p);
  }
  const std::optional<double> base = earlier.empty() ? std::nullopt : std::optional(median(earlier));
  // Medians: a busy run among them moves them little.
  const double old_level = median({values.begin() + seg.from, values.begin() + seg.begin});
  const double new_level = median({values.begin() + seg.begin, values.begin() + seg.end});
  const double middle = (old_level + new_level) / 2, direction = new_level > old_level ? 1 : -1;
  auto beyond = [&](double v) { return (v - middle) * direction > 0; };
  for (size_t k = seg.begin; k < values.size(); ++k) {
    const Run& run = run_of(k);
    std::string why;
    if (const auto share = in_run(wait, run.id)) why = contended(*share);
    const std::optional<double> p = in_run(probe, run.id);
    const double scaled = base && p && *p > 0 && *base > 0 ? values[k] * *base / *p : values[k];
    if (why.empty() && !beyond(values[k])) break;  // back at the old level
    ++out.runs;
    if (why.empty() && !beyond(scaled)) {
      why = "its machine probe took " + ratio_text(*p / *base) +
            " the time it took before the change; scaled by it, its step time is " +
            format_duration_ns(scaled) + ", nearer the old level";
    }
    if (why.empty()) {
      ++out.confirming;
    } else {
      out.machine.push_back("run " + std::to_string(at[k] + 1) + " (" + run.date + "): " + why);
    }
  }
  return out;
}

}  // namespace harness::history

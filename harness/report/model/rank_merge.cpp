#include "harness/report/model/rank_merge.h"

#include "harness/errors.h"
#include "harness/report/io/json_report.h"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>

namespace harness {
namespace {

// Times that add up over ranks as counts do (time every rank spent waiting, or its GPU busy);
// other times (statistics, a phase's span) are the slowest rank's.
bool summed_time(const Measurement& m) {
  return m.name == "sync.wait_time" || m.name == "gpu_time";
}

// Sums `from` into `into` by measurement name (times, unit "ns": the slowest rank's, but for
// summed_time); a name missing or null on either side is null.
void add_measurements(std::vector<Measurement>& into, const std::vector<Measurement>& from) {
  std::map<std::string, const Measurement*> by_name;
  for (const Measurement& m : from) by_name[m.name] = &m;
  for (Measurement& m : into) {
    auto it = by_name.find(m.name);
    if (it == by_name.end() || !it->second->value || !m.value) {
      m.value.reset();
    } else if (m.unit == "ns" && !summed_time(m)) {
      m.value = std::max(*m.value, *it->second->value);
    } else {
      *m.value += *it->second->value;
    }
  }
}

double median_step_time(const VariantResult& v) {
  const Measurement* m = find_metric(v, "timing.step_time.median");
  return m && m->value ? *m->value : -1.0;
}

VariantResult merge_variant(const std::vector<const VariantResult*>& ranks) {
  const VariantResult& first = *ranks.front();
  VariantResult merged = first;
  merged.axes["ranks"] = std::to_string(ranks.size());
  merged.sync_sites.clear();
  merged.copy_sites.clear();
  merged.event_sites.clear();
  merged.error.clear();
  merged.warnings.clear();
  std::map<std::tuple<std::string, std::string, std::string, std::string, std::string, std::string>,
           SyncSite>
      sites;
  std::map<std::tuple<std::string, std::string, std::string, std::string, std::string>, CopySite>
      copy_sites;
  std::map<std::tuple<std::string, std::string, std::string, std::string, std::string>, EventSite>
      event_sites;
  size_t slowest = 0;
  bool any_failed_check = false;
  std::string details;
  for (size_t r = 0; r < ranks.size(); ++r) {
    const VariantResult& v = *ranks[r];
    if (!v.ran) {
      merged.ran = false;
      if (merged.error.empty()) merged.error = "rank " + std::to_string(r) + ": " + v.error;
    }
    // Failed as expected only if every rank did.
    if (!v.failed_as_expected()) merged.expected_failure.clear();
    if (r > 0) {
      add_measurements(merged.per_step, v.per_step);
      add_measurements(merged.total, v.total);
      for (auto& [phase, values] : merged.phases) {
        auto it = v.phases.find(phase);
        if (it == v.phases.end()) continue;
        add_measurements(values, it->second);
      }
      for (const auto& [phase, values] : v.phases) {
        if (!merged.phases.count(phase)) merged.phases[phase] = values;
      }
      for (const auto& [op, n] : v.launches_by_op) merged.launches_by_op[op] += n;
    }
    for (const SyncSite& s : v.sync_sites) {
      auto [it, added] =
          sites.try_emplace({s.phase, s.op, s.reason, s.frame, s.library, s.allowed}, s);
      if (added) continue;
      SyncSite& sum = it->second;  // waits summed, as counts; unknown on a rank: unknown
      sum.count += s.count;
      sum.wait_ns = sum.wait_ns && s.wait_ns ? std::optional<int64_t>(*sum.wait_ns + *s.wait_ns)
                                             : std::nullopt;
    }
    for (const CopySite& s : v.copy_sites) {
      auto [it, added] = copy_sites.try_emplace({s.phase, s.kind, s.how, s.frame, s.library}, s);
      if (added) continue;
      it->second.count += s.count;
      it->second.bytes += s.bytes;
    }
    for (const EventSite& s : v.event_sites) {
      auto [it, added] = event_sites.try_emplace({s.kind, s.phase, s.what, s.frame, s.library}, s);
      if (!added) it->second.count += s.count;
    }
    if (median_step_time(v) > median_step_time(*ranks[slowest])) slowest = r;
    if (v.correctness.checked) {
      merged.correctness.checked = true;
      any_failed_check = any_failed_check || !v.correctness.passed;
      details += (details.empty() ? "" : "; ") + ("rank " + std::to_string(r) + ": ") +
                 v.correctness.detail;
    }
    for (const std::string& w : v.warnings) merged.warnings.push_back("rank " + std::to_string(r) + ": " + w);
  }
  for (const auto& [key, site] : sites) merged.sync_sites.push_back(site);
  for (const auto& [key, site] : copy_sites) merged.copy_sites.push_back(site);
  for (const auto& [key, site] : event_sites) merged.event_sites.push_back(site);
  if (merged.correctness.checked) {
    merged.correctness.passed = !any_failed_check;
    merged.correctness.detail = details;
  }
  merged.timing = ranks[slowest]->timing;
  merged.samples = ranks[slowest]->samples;
  merged.timing.push_back({"slowest_rank", static_cast<double>(slowest), "rank",
                           "the rank with the largest median step time (its timing is shown)"});
  return merged;
}

}  // namespace

ScenarioResult merge_rank_results(const std::vector<ScenarioResult>& per_rank) {
  if (per_rank.empty()) throw std::invalid_argument("merge_rank_results: no ranks");
  ScenarioResult merged = per_rank.front();
  merged.variants.clear();
  const size_t world = per_rank.size();
  auto alone = [](const VariantResult& v) {
    auto it = v.axes.find("ranks");
    return it != v.axes.end() && it->second == "1";
  };
  for (const VariantResult& v : per_rank.front().variants) {
    if (alone(v)) {
      merged.variants.push_back(v);  // rank 0 ran it by itself
      continue;
    }
    std::vector<const VariantResult*> ranks;
    for (size_t r = 0; r < world; ++r) {
      const VariantResult* found = find_variant(per_rank[r], v.name);
      if (found == nullptr) {
        throw std::runtime_error("rank " + std::to_string(r) + " has no result for variant '" +
                                 v.name + "' of " + merged.name);
      }
      ranks.push_back(found);
    }
    merged.variants.push_back(merge_variant(ranks));
  }
  if (world > 1) {
    for (const VariantResult& v : per_rank.front().variants) {
      if (alone(v)) continue;
      for (size_t r = 0; r < world; ++r) {
        VariantResult own = *find_variant(per_rank[r], v.name);
        own.name = "rank" + std::to_string(r) + "/" + v.name;
        own.axes["rank"] = std::to_string(r);
        merged.variants.push_back(std::move(own));
      }
    }
  }
  return merged;
}

ScenarioResult parse_rank_result(const std::string& text, const std::string& source) {
  RunReport report = parse_report_text(text, source);
  if (report.scenarios.size() != 1) {
    throw InputError(source + " holds " + std::to_string(report.scenarios.size()) +
                     " scenarios, not one");
  }
  return std::move(report.scenarios.front());
}

}  // namespace harness

#include "harness/report/model/result.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>

#include "harness/report/model/pattern.h"

namespace harness {

std::string new_process_id() {
  std::random_device device;
  const uint64_t id = (static_cast<uint64_t>(device()) << 32) ^ device();
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(id));
  return text;
}

bool is_event_kind(const std::string& kind) {
  return kind == kGraphBreak || kind == kRecompile || kind == kCaptureBlocker ||
         kind == kValueNotComputed;
}
namespace {

const Measurement* find_by_name(const std::vector<Measurement>& list, const std::string& name) {
  auto it =
      std::find_if(list.begin(), list.end(), [&](const Measurement& m) { return m.name == name; });
  return it == list.end() ? nullptr : &*it;
}


}  // namespace

const Measurement* find_metric(const VariantResult& variant, const std::string& path) {
  const std::pair<std::string, const std::vector<Measurement>*> lists[] = {
      {"per_step.", &variant.per_step},
      {"total.", &variant.total},
      {"timing.", &variant.timing},
  };
  for (const auto& [prefix, list] : lists) {
    if (starts_with(path, prefix)) {
      return find_by_name(*list, path.substr(prefix.size()));
    }
  }
  // "phase[<phase>].<name>": phase names contain dots, measurement names never contain "]".
  static const std::string kPhasePrefix = "phase[";
  const size_t close = path.rfind("].");
  if (!starts_with(path, kPhasePrefix) || close == std::string::npos ||
      close < kPhasePrefix.size()) {
    return nullptr;
  }
  auto phase = variant.phases.find(path.substr(kPhasePrefix.size(), close - kPhasePrefix.size()));
  if (phase == variant.phases.end()) return nullptr;
  return find_by_name(phase->second, path.substr(close + 2));
}

const std::vector<double>* find_samples(const VariantResult& variant, const std::string& path) {
  if (!starts_with(path, kSamplesPrefix)) return nullptr;
  auto it = variant.samples.find(path.substr(std::string(kSamplesPrefix).size()));
  return it == variant.samples.end() ? nullptr : &it->second;
}

const std::vector<double>* machine_probe_samples(const VariantResult& variant) {
  auto it = variant.samples.find(kMachineProbe);
  return it == variant.samples.end() ? nullptr : &it->second;
}

std::vector<std::string> metric_paths(const VariantResult& variant) {
  std::vector<std::string> paths;
  for (const auto& m : variant.per_step) paths.push_back("per_step." + m.name);
  for (const auto& m : variant.total) paths.push_back("total." + m.name);
  for (const auto& m : variant.timing) paths.push_back("timing." + m.name);
  for (const auto& [phase, list] : variant.phases) {
    for (const auto& m : list) paths.push_back("phase[" + phase + "]." + m.name);
  }
  for (const auto& [name, values] : variant.samples) paths.push_back(kSamplesPrefix + name);
  return paths;
}

const VariantResult* find_variant(const ScenarioResult& scenario, const std::string& name) {
  for (const auto& v : scenario.variants) {
    if (v.name == name) return &v;
  }
  return nullptr;
}

const ScenarioResult* find_scenario(const RunReport& report, const std::string& name) {
  for (const auto& s : report.scenarios) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

std::string contention(const VariantResult& variant) {
  const Measurement* m = find_metric(variant, std::string("timing.") + kCpuWaitShare);
  if (m == nullptr || !m->value || *m->value <= kContendedCpuWait) return "";
  return "its threads waited for a CPU " + std::to_string(std::lround(*m->value * 100)) +
         "% of the time (other work held the cores; more than " +
         std::to_string(std::lround(kContendedCpuWait * 100)) +
         "%), so a change of its times may be the load";
}

std::string oversubscription(const Provenance& run, int ranks) {
  ranks = std::min(ranks, run.ranks_per_host);
  if (run.cpu_count <= 0 || ranks <= 1 || ranks < run.cpu_count) return "";
  return std::to_string(ranks) + " ranks on " + std::to_string(run.cpu_count) +
         " CPU(s): the ranks and Gloo's threads compete for cores, so step times are not "
         "comparable between runs";
}

}  // namespace harness

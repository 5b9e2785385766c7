#include <algorithm>
#include <cstdio>

#include "harness/report/model/pattern.h"
#include "harness/scenario.h"

namespace harness {

ScenarioRegistry& ScenarioRegistry::instance() {
  static ScenarioRegistry registry;
  return registry;
}

void ScenarioRegistry::add(ScenarioInfo info) {
  if (find(info.name) != nullptr) {
    duplicates_.push_back(info.name + " (" + info.source_file + ")");
    return;
  }
  infos_.push_back(std::move(info));
}

const ScenarioInfo* ScenarioRegistry::find(const std::string& name) const {
  for (const auto& info : infos_) {
    if (info.name == name) return &info;
  }
  return nullptr;
}

std::vector<const ScenarioInfo*> ScenarioRegistry::all() const {
  std::vector<const ScenarioInfo*> out;
  for (const auto& info : infos_) out.push_back(&info);
  std::sort(out.begin(), out.end(), [](auto* a, auto* b) { return a->name < b->name; });
  return out;
}

ScenarioRegistrar::ScenarioRegistrar(const char* name, const char* description,
                                     std::function<std::unique_ptr<Scenario>()> factory,
                                     const char* file) {
  ScenarioRegistry::instance().add({name, description, std::move(factory), file});
}

c10::Device RunContext::rank_device() const { return device.device(local_rank); }

bool RunContext::wants_variant(const std::string& name) const {
  if (options.variant_filters.empty()) return true;
  return std::any_of(options.variant_filters.begin(), options.variant_filters.end(),
                     [&](const std::string& f) { return glob_match(f, name); });
}

void Progress::variant_started(const std::string& scenario, const std::string& variant,
                               size_t index, size_t total) {
  if (quiet_) return;
  std::fprintf(stderr, "[%s %zu/%zu] %s ...\n", scenario.c_str(), index, total, variant.c_str());
  std::fflush(stderr);
}

void Progress::variant_finished(const VariantResult& result, double seconds) {
  if (quiet_) return;
  const std::string outcome = result.ran                   ? "done"
                              : result.failed_as_expected() ? "failed as expected: " + result.error
                                                            : "FAILED: " + result.error;
  std::fprintf(stderr, "    %s %s in %.2f s\n", result.name.c_str(), outcome.c_str(), seconds);
  std::fflush(stderr);
}

}  // namespace harness

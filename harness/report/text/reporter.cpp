#include "harness/report/text/reporter.h"

#include <utility>

#include "harness/report/io/json_report.h"

namespace harness {

Reporter::~Reporter() = default;

void MultiReporter::add(std::unique_ptr<Reporter> reporter) {
  reporters_.push_back(std::move(reporter));
}

void MultiReporter::on_run_start(const Provenance& provenance) {
  for (auto& r : reporters_) r->on_run_start(provenance);
}

void MultiReporter::on_scenario_start(const std::string& name, size_t variant_count) {
  for (auto& r : reporters_) r->on_scenario_start(name, variant_count);
}

void MultiReporter::on_variant_done(const std::string& scenario, const VariantResult& variant) {
  for (auto& r : reporters_) r->on_variant_done(scenario, variant);
}

void MultiReporter::on_scenario_done(const ScenarioResult& scenario) {
  for (auto& r : reporters_) r->on_scenario_done(scenario);
}

void MultiReporter::on_run_done(const RunReport& report) {
  for (auto& r : reporters_) r->on_run_done(report);
}

JsonReporter::JsonReporter(std::string path) : path_(std::move(path)) {}

void JsonReporter::on_run_done(const RunReport& report) { write_report_file(path_, report); }

}  // namespace harness

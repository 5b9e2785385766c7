#pragma once
// Reporters: what turns results into output. They only read results; the run calls them in order:
//   on_run_start -> (on_scenario_start -> on_variant_done* -> on_scenario_done)* -> on_run_done
// Human text goes to a stream (the terminal), machine output to the files they were given.
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "harness/report/model/result.h"

namespace harness {

// The interface, with no-op defaults: a reporter overrides only the events it needs.
class Reporter {
 public:
  virtual ~Reporter();
  virtual void on_run_start(const Provenance& /*provenance*/) {}
  virtual void on_scenario_start(const std::string& /*name*/, size_t /*variant_count*/) {}
  virtual void on_variant_done(const std::string& /*scenario*/, const VariantResult& /*variant*/) {}
  virtual void on_scenario_done(const ScenarioResult& /*scenario*/) {}
  virtual void on_run_done(const RunReport& /*report*/) {}
};

// Owns several reporters and forwards every event to each, in the order they were added.
class MultiReporter : public Reporter {
 public:
  void add(std::unique_ptr<Reporter> reporter);
  bool empty() const { return reporters_.empty(); }

  void on_run_start(const Provenance& provenance) override;
  void on_scenario_start(const std::string& name, size_t variant_count) override;
  void on_variant_done(const std::string& scenario, const VariantResult& variant) override;
  void on_scenario_done(const ScenarioResult& scenario) override;
  void on_run_done(const RunReport& report) override;

 private:
  std::vector<std::unique_ptr<Reporter>> reporters_;
};

// Human-readable text on a stream it does not own: a header with the provenance that matters for
// trust (device, instrument, build), per scenario an aligned table of variants (counts per step,
// median step time, correctness; failed variants with their error), the scenario's tables and its
// sync sites, and at the end the report's warnings as "***WARNING*** ..." lines.
class ConsoleReporter : public Reporter {
 public:
  // `show_phases`: also a table per variant of each phase's counts and host time (--phases).
  explicit ConsoleReporter(std::ostream& out, bool show_phases = false);
  void on_run_start(const Provenance& provenance) override;
  void on_scenario_done(const ScenarioResult& scenario) override;
  void on_run_done(const RunReport& report) override;

 private:
  std::ostream& out_;
  bool show_phases_;
};

// Writes the whole JSON report (json_report.h) to `path`, atomically, when the run is done.
class JsonReporter : public Reporter {
 public:
  explicit JsonReporter(std::string path);
  void on_run_done(const RunReport& report) override;

 private:
  std::string path_;
};

// Writes a markdown summary to `path`, atomically, when the run is done: provenance, warnings and a
// table per scenario (for pull-request comments and CI job summaries).

// The run as a markdown summary (bench --markdown writes it, with the gates' outcomes after it).
std::string render_markdown(const RunReport& report);

}  // namespace harness

// Writing reports: RunReport -> JSON, and the report files themselves (atomic write, checked read).
#include "harness/report/io/json_report.h"


#include <cmath>
#include <cstdint>
#include <cstring>

#include "harness/errors.h"
#include "harness/report/io/input_file.h"

namespace harness {

ReportJson value_json(const std::optional<double>& value) {
  constexpr double kExactIntegerLimit = 9007199254740992.0;  // 2^53
  if (!value || !std::isfinite(*value)) return nullptr;
  if (std::floor(*value) == *value && std::fabs(*value) < kExactIntegerLimit) {
    return static_cast<int64_t>(*value);
  }
  return *value;
}

namespace {

// Writes measurement lists as {name: value} and owns the "measurements" dictionary that holds the
// unit and description of each name, taken from its first occurrence. A measurement whose unit or
// description differs from that entry is written inline as {"value", "unit", "description"}, so
// nothing is lost in a round trip.
class MeasurementWriter {
 public:
  ReportJson list(const std::vector<Measurement>& measurements) {
    ReportJson out = ReportJson::object();
    for (const auto& m : measurements) out[m.name] = value(m);
    return out;
  }

  const ReportJson& dictionary() const { return dictionary_; }

 private:
  ReportJson value(const Measurement& m) {
    auto entry = dictionary_.find(m.name);
    if (entry == dictionary_.end()) {
      dictionary_[m.name] = {{"unit", m.unit}, {"description", m.description}};
    } else if ((*entry)["unit"] != m.unit || (*entry)["description"] != m.description) {
      return {{"value", value_json(m.value)}, {"unit", m.unit}, {"description", m.description}};
    }
    return value_json(m.value);
  }

  ReportJson dictionary_ = ReportJson::object();
};

ReportJson provenance_json(const Provenance& p) {
  return {{"tool_version", p.tool_version},
          {"git_sha", p.git_sha},
          {"git_dirty", p.git_dirty},
          {"argv", p.argv},
          {"build_type", p.build_type},
          {"libtorch_version", p.libtorch_version},
          {"cuda_version", p.cuda_version},
          {"cupti_version", p.cupti_version},
          {"device", p.device},
          {"compute", p.compute},
          {"device_name", p.device_name},
          {"instrument", p.instrument},
          {"instrument_status", p.instrument_status},
          {"hostname", p.hostname},
          {"started_at", p.started_at},
          {"process_id", p.process_id},
          {"world_size", p.world_size},
          {"ranks_per_host", p.ranks_per_host},
          {"cpu_count", p.cpu_count},
          {"intra_op_threads", p.intra_op_threads}};
}

ReportJson variant_json(const VariantResult& v, MeasurementWriter& writer) {
  const char* status = v.ran ? "ok" : v.failed_as_expected() ? "expected_failure" : "failed";
  ReportJson out = {{"name", v.name}, {"axes", v.axes}, {"status", status}};
  if (!v.ran) out["error"] = v.error;
  if (!v.expected_failure.empty()) out["expected_failure"] = v.expected_failure;
  out["measured_steps"] = v.measured_steps;
  out["per_step"] = writer.list(v.per_step);
  out["total"] = writer.list(v.total);
  ReportJson& phases = out["phases"] = ReportJson::object();
  for (const auto& [phase, list] : v.phases) phases[phase] = writer.list(list);
  out["launches_by_op"] = v.launches_by_op;
  ReportJson& sites = out["sync_sites"] = ReportJson::array();
  for (const auto& s : v.sync_sites) {
    ReportJson wait = nullptr;
    if (s.wait_ns) wait = *s.wait_ns;
    sites.push_back({{"phase", s.phase},
                     {"op", s.op},
                     {"reason", s.reason},
                     {"count", s.count},
                     {"wait_ns", wait},
                     {"frame", s.frame},
                     {"library", s.library},
                     {"allowed", s.allowed}});
  }
  ReportJson& copies = out["copy_sites"] = ReportJson::array();
  for (const auto& s : v.copy_sites) {
    copies.push_back({{"phase", s.phase},
                      {"kind", s.kind},
                      {"how", s.how},
                      {"count", s.count},
                      {"bytes", s.bytes},
                      {"frame", s.frame},
                      {"library", s.library}});
  }
  ReportJson& events = out["event_sites"] = ReportJson::array();
  for (const auto& s : v.event_sites) {
    events.push_back({{"kind", s.kind},
                      {"phase", s.phase},
                      {"what", s.what},
                      {"count", s.count},
                      {"frame", s.frame},
                      {"library", s.library}});
  }
  out["timing"] = writer.list(v.timing);
  ReportJson& samples = out["samples"] = ReportJson::object();
  for (const auto& [name, values] : v.samples) {
    ReportJson& list = samples[name] = ReportJson::array();
    for (double x : values) list.push_back(value_json(x));
  }
  if (v.processes != 1) out["processes"] = v.processes;
  out["correctness"] = {{"checked", v.correctness.checked},
                        {"passed", v.correctness.passed},
                        {"detail", v.correctness.detail}};
  out["warnings"] = v.warnings;
  return out;
}

ReportJson scenario_json(const ScenarioResult& s, MeasurementWriter& writer) {
  ReportJson out = {{"name", s.name},
                    {"description", s.description},
                    {"measured_window", s.measured_window},
                    {"config", s.config},
                    {"world_size", s.world_size}};
  ReportJson& variants = out["variants"] = ReportJson::array();
  for (const auto& v : s.variants) variants.push_back(variant_json(v, writer));
  ReportJson& tables = out["tables"] = ReportJson::array();
  for (const auto& t : s.tables) {
    tables.push_back({{"title", t.title}, {"columns", t.columns}, {"rows", t.rows}});
  }
  return out;
}

}  // namespace

ReportJson to_json(const RunReport& report) {
  MeasurementWriter writer;
  ReportJson out = {{"schema_version", kReportSchemaVersion},
                    {"provenance", provenance_json(report.provenance)},
                    {"warnings", report.warnings}};
  ReportJson& scenarios = out["scenarios"] = ReportJson::array();
  for (const auto& s : report.scenarios) scenarios.push_back(scenario_json(s, writer));
  out["measurements"] = writer.dictionary();
  return out;
}

namespace {

ReportJson parse_report_json(const std::string& text, const std::string& source) {
  try {
    return parse_json_without_duplicate_keys<ReportJson>(text);
  } catch (const ReportJson::exception& e) {  // parse errors, and numbers out of range
    throw InputError("report '" + source + "' is not valid JSON: " + e.what());
  } catch (const DuplicateKey& e) {
    throw InputError("report '" + source + "': " + e.what() + " in one object");
  }
}

}  // namespace

RunReport parse_report_text(const std::string& text, const std::string& source) {
  return report_from_json(parse_report_json(text, source), source);
}

RunReport read_report_file(const std::string& path) {
  // Each form is let go as soon as the next is built: the text once parsed, each variant's JSON
  // once read (report_from_json of an rvalue), so that the three never add up.
  std::string text = read_input_file(path, "report");
  ReportJson json = parse_report_json(text, path);
  std::string().swap(text);
  return report_from_json(std::move(json), path);
}

void write_report_file(const std::string& path, const RunReport& report) {
  write_file_atomically(path, to_json(report).dump(2) + "\n");
}

}  // namespace harness

// Reading reports: JSON -> RunReport, checking every field it uses and naming the offending one.
//
// Required: schema_version (major 1), scenarios, and each scenario's and variant's name and each
// variant's status; every other field defaults to empty when absent. Unknown fields are ignored,
// as the versioning rules in reports/schema/report-v1.md promise.
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <tuple>
#include <utility>

#include "harness/errors.h"
#include "harness/report/io/json_report.h"

namespace harness {
namespace {

// A JSON value together with its path in the document, so that every error names the field.
class Node {
 public:
  Node(const ReportJson& json, std::string path, const std::string& source)
      : json_(json), path_(std::move(path)), source_(source) {}

  [[noreturn]] void fail(const std::string& problem) const {
    throw InputError("invalid report '" + source_ + "': " + (path_.empty() ? "" : path_ + ": ") +
                     problem);
  }

  const ReportJson& json() const { return json_; }

  // member(): a required field; find(): an optional one (nullopt when absent).
  Node member(const char* key) const {
    auto found = find(key);
    if (!found) fail(std::string("missing required field '") + key + "'");
    return *found;
  }
  std::optional<Node> find(const char* key) const {
    auto it = object().find(key);
    if (it == json_.end()) return std::nullopt;
    return Node(*it, path_.empty() ? key : path_ + "." + key, source_);
  }

  // Calls `fn(key, node)` for every member of an object (keys are data, e.g. phase names).
  void for_each_entry(const std::function<void(const std::string&, const Node&)>& fn) const {
    for (const auto& [key, value] : object().items()) {
      fn(key, Node(value, path_ + "[\"" + key + "\"]", source_));
    }
  }
  void for_each_item(const std::function<void(const Node&)>& fn) const {
    if (!json_.is_array()) fail("expected an array, got " + std::string(json_.type_name()));
    for (size_t i = 0; i < json_.size(); ++i) {
      fn(Node(json_[i], path_ + "[" + std::to_string(i) + "]", source_));
    }
  }

  const ReportJson& object() const {
    if (!json_.is_object()) fail("expected an object, got " + std::string(json_.type_name()));
    return json_;
  }
  std::string string() const {
    if (!json_.is_string()) fail("expected a string, got " + std::string(json_.type_name()));
    return json_.get<std::string>();
  }
  bool boolean() const {
    if (!json_.is_boolean()) fail("expected true or false, got " + std::string(json_.type_name()));
    return json_.get<bool>();
  }
  int64_t integer() const {
    if (!json_.is_number_integer()) {
      fail("expected an integer, got " + std::string(json_.type_name()));
    }
    return json_.get<int64_t>();
  }
  std::optional<double> number_or_null() const {
    if (json_.is_null()) return std::nullopt;
    if (!json_.is_number()) {
      fail("expected a number or null, got " + std::string(json_.type_name()));
    }
    return json_.get<double>();
  }

 private:
  const ReportJson& json_;
  std::string path_;
  const std::string& source_;
};

// Optional members of a known type: absent means the default.
std::string opt_string(const Node& obj, const char* key) {
  auto n = obj.find(key);
  return n ? n->string() : std::string();
}
bool opt_bool(const Node& obj, const char* key) {
  auto n = obj.find(key);
  return n && n->boolean();
}
std::vector<std::string> opt_strings(const Node& obj, const char* key) {
  std::vector<std::string> out;
  if (auto n = obj.find(key)) n->for_each_item([&](const Node& s) { out.push_back(s.string()); });
  return out;
}
std::map<std::string, std::string> opt_string_map(const Node& obj, const char* key) {
  std::map<std::string, std::string> out;
  if (auto n = obj.find(key)) {
    n->for_each_entry([&](const std::string& k, const Node& v) { out[k] = v.string(); });
  }
  return out;
}

// Reads {name: value} lists; a value is a number, null, or {"value", "unit", "description"} when
// it overrides the "measurements" dictionary entry of its name.
class MeasurementReader {
 public:
  explicit MeasurementReader(const Node& root) {
    if (auto dict = root.find("measurements")) {
      dict->for_each_entry([&](const std::string& name, const Node& entry) {
        dictionary_[name] = {opt_string(entry, "unit"), opt_string(entry, "description")};
      });
    }
  }

  std::vector<Measurement> list(const Node& obj, const char* key) const {
    auto n = obj.find(key);
    return n ? list(*n) : std::vector<Measurement>{};
  }
  std::vector<Measurement> list(const Node& values) const {
    std::vector<Measurement> out;
    out.reserve(values.object().size());  // (a report holds millions: no doubling slack)
    values.for_each_entry(
        [&](const std::string& name, const Node& v) { out.push_back(measurement(name, v)); });
    return out;
  }

 private:
  Measurement measurement(const std::string& name, const Node& v) const {
    if (v.json().is_object()) {
      return {name, v.member("value").number_or_null(), opt_string(v, "unit"),
              opt_string(v, "description")};
    }
    auto entry = dictionary_.find(name);
    Measurement m{name, v.number_or_null(), "", ""};
    if (entry != dictionary_.end()) std::tie(m.unit, m.description) = entry->second;
    return m;
  }

  std::map<std::string, std::pair<std::string, std::string>> dictionary_;
};

void check_schema_version(const Node& root) {
  const Node version = root.member("schema_version");
  const std::string text = version.string();
  const size_t dot = text.find('.');
  const std::string major = text.substr(0, dot);
  if (dot == std::string::npos || major.empty() ||
      major.find_first_not_of("0123456789") != std::string::npos) {
    version.fail("'" + text + "' is not a semantic version (MAJOR.MINOR.PATCH)");
  }
  if (major != std::to_string(kReportSchemaMajor)) {
    version.fail("schema version " + text + " is not supported: this reader reads major version " +
                 std::to_string(kReportSchemaMajor));
  }
}

Provenance read_provenance(const Node& p) {
  Provenance out;
  out.tool_version = opt_string(p, "tool_version");
  out.git_sha = opt_string(p, "git_sha");
  out.git_dirty = opt_bool(p, "git_dirty");
  out.argv = opt_strings(p, "argv");
  out.build_type = opt_string(p, "build_type");
  out.libtorch_version = opt_string(p, "libtorch_version");
  out.cuda_version = opt_string(p, "cuda_version");
  out.cupti_version = opt_string(p, "cupti_version");
  out.device = opt_string(p, "device");
  if (p.find("compute")) out.compute = opt_string(p, "compute");
  out.device_name = opt_string(p, "device_name");
  out.instrument = opt_string(p, "instrument");
  out.instrument_status = opt_string(p, "instrument_status");
  out.hostname = opt_string(p, "hostname");
  out.started_at = opt_string(p, "started_at");
  out.process_id = opt_string(p, "process_id");
  if (auto n = p.find("world_size")) out.world_size = static_cast<int>(n->integer());
  if (auto n = p.find("ranks_per_host")) out.ranks_per_host = static_cast<int>(n->integer());
  if (auto n = p.find("cpu_count")) out.cpu_count = static_cast<int>(n->integer());
  if (auto n = p.find("intra_op_threads")) {
    out.intra_op_threads = static_cast<int>(n->integer());
  }
  return out;
}

VariantResult read_variant(const Node& v, const MeasurementReader& reader) {
  VariantResult out;
  out.name = v.member("name").string();
  out.axes = opt_string_map(v, "axes");
  const Node status = v.member("status");
  const std::string status_text = status.string();
  if (status_text != "ok" && status_text != "failed" && status_text != "expected_failure") {
    status.fail("expected \"ok\", \"failed\" or \"expected_failure\", got \"" + status_text +
                "\"");
  }
  out.ran = status_text == "ok";
  out.error = opt_string(v, "error");
  out.expected_failure = opt_string(v, "expected_failure");
  if (status_text == "expected_failure" && out.expected_failure.empty()) {
    status.fail("\"expected_failure\" needs the field expected_failure to say which failure");
  }
  if (status_text == "failed") out.expected_failure.clear();
  if (auto n = v.find("measured_steps")) out.measured_steps = n->integer();
  out.per_step = reader.list(v, "per_step");
  out.total = reader.list(v, "total");
  if (auto n = v.find("phases")) {
    n->for_each_entry(
        [&](const std::string& phase, const Node& list) { out.phases[phase] = reader.list(list); });
  }
  if (auto n = v.find("launches_by_op")) {
    n->for_each_entry([&](const std::string& op, const Node& count) {
      out.launches_by_op[op] = count.integer();
    });
  }
  if (auto n = v.find("sync_sites")) {
    n->for_each_item([&](const Node& s) {
      SyncSite site{opt_string(s, "phase"), opt_string(s, "op"), opt_string(s, "reason"),
                    s.member("count").integer()};
      // Since 1.3.0; absent or null: not measured.
      if (auto w = s.find("wait_ns"); w && !w->json().is_null()) {
        site.wait_ns = w->integer();
        if (*site.wait_ns < 0) w->fail("expected a time in ns (an integer >= 0)");
      }
      site.frame = opt_string(s, "frame");  // since 1.7.0; absent: not known
      site.library = opt_string(s, "library");
      site.allowed = opt_string(s, "allowed");
      out.sync_sites.push_back(std::move(site));
    });
  }
  if (auto n = v.find("copy_sites")) {  // since 1.7.0
    n->for_each_item([&](const Node& s) {
      CopySite site{opt_string(s, "phase"), opt_string(s, "kind"),    opt_string(s, "how"),
                    opt_string(s, "frame"), opt_string(s, "library"), s.member("count").integer(),
                    s.member("bytes").integer()};
      if (site.count < 0 || site.bytes < 0) s.fail("expected a count and bytes >= 0");
      out.copy_sites.push_back(std::move(site));
    });
  }
  if (auto n = v.find("event_sites")) {  // since 1.9.0
    n->for_each_item([&](const Node& s) {
      EventSite site{opt_string(s, "kind"),  opt_string(s, "phase"),   opt_string(s, "what"),
                     opt_string(s, "frame"), opt_string(s, "library"), s.member("count").integer()};
      if (!is_event_kind(site.kind)) {
        s.fail("expected a kind of event: graph_break, recompile or capture_blocker");
      }
      if (site.count < 0) s.fail("expected a count >= 0");
      out.event_sites.push_back(std::move(site));
    });
  }
  out.timing = reader.list(v, "timing");
  if (auto n = v.find("samples")) {
    n->for_each_entry([&](const std::string& name, const Node& list) {
      std::vector<double>& values = out.samples[name];
      if (list.json().is_array()) values.reserve(list.json().size());
      list.for_each_item([&](const Node& x) {
        const ReportJson& value = x.json();
        if (!value.is_number() || !std::isfinite(value.get<double>()) || value.get<double>() < 0) {
          x.fail("expected a time in ns (a number >= 0), got " + value.dump());
        }
        values.push_back(value.get<double>());
      });
    });
  }
  if (auto n = v.find("processes")) {  // since 1.8.0; absent: one process
    out.processes = n->integer();
    if (out.processes < 1) n->fail("expected a number of processes >= 1");
  }
  if (auto c = v.find("correctness")) {
    out.correctness = {opt_bool(*c, "checked"), opt_bool(*c, "passed"), opt_string(*c, "detail")};
  }
  out.warnings = opt_strings(v, "warnings");
  return out;
}

// `world_size`: the run's, for reports older than 1.1 that had no per-scenario world size.
// `let_go`: set each variant's JSON to null once read (the document is the caller's to spend).
ScenarioResult read_scenario(const Node& s, const MeasurementReader& reader, int world_size,
                             bool let_go) {
  ScenarioResult out;
  out.world_size = world_size;
  out.name = s.member("name").string();
  out.description = opt_string(s, "description");
  out.measured_window = opt_string(s, "measured_window");
  out.config = opt_string_map(s, "config");
  if (auto n = s.find("world_size")) out.world_size = static_cast<int>(n->integer());
  if (auto n = s.find("variants")) {
    n->for_each_item([&](const Node& v) {
      out.variants.push_back(read_variant(v, reader));
      // The document is not const where let_go is set: report_from_json(ReportJson&&) owns it.
      if (let_go) const_cast<ReportJson&>(v.json()) = nullptr;
    });
  }
  if (auto n = s.find("tables")) {
    n->for_each_item([&](const Node& t) {
      ResultTable table{opt_string(t, "title"), opt_strings(t, "columns"), {}};
      if (auto rows = t.find("rows")) {
        rows->for_each_item([&](const Node& row) {
          std::vector<std::string> cells;
          row.for_each_item([&](const Node& cell) { cells.push_back(cell.string()); });
          table.rows.push_back(std::move(cells));
        });
      }
      out.tables.push_back(std::move(table));
    });
  }
  return out;
}

RunReport read_report(const ReportJson& json, const std::string& source_name, bool let_go) {
  const Node root(json, "", source_name);
  root.object();
  check_schema_version(root);
  const MeasurementReader reader(root);
  RunReport out;
  if (auto p = root.find("provenance")) out.provenance = read_provenance(*p);
  out.warnings = opt_strings(root, "warnings");
  root.member("scenarios").for_each_item([&](const Node& s) {
    out.scenarios.push_back(read_scenario(s, reader, out.provenance.world_size, let_go));
  });
  return out;
}

}  // namespace

RunReport report_from_json(const ReportJson& json, const std::string& source_name) {
  return read_report(json, source_name, /*let_go=*/false);
}

RunReport report_from_json(ReportJson&& json, const std::string& source_name) {
  ReportJson document = std::move(json);  // spent here, whatever happens
  return read_report(document, source_name, /*let_go=*/true);
}

}  // namespace harness

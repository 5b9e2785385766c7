#include "harness/report/gates/expectations.h"

#include <cmath>
#include <map>
#include <set>
#include <utility>

#include "harness/errors.h"
#include "harness/report/compare/site_diff.h"
#include "harness/report/io/input_file.h"
#include "harness/report/text/format.h"

namespace harness {
namespace {

using nlohmann::json;

const std::set<std::string> kTopKeys = {"expectations_version", "description", "sites"};
const std::set<std::string> kEntryKeys = {"scenario", "variant", "site",      "phase",
                                          "what",     "frame",   "library",   "per_step",
                                          "tolerance", "reason"};

class EntryParser {
 public:
  EntryParser(const json& j, size_t index, const std::string& source)
      : j_(j), context_("expectations file '" + source + "': sites[" + std::to_string(index) + "]") {}

  Expectation parse() const {
    if (!j_.is_object()) fail("expected an object, got " + std::string(j_.type_name()));
    for (const auto& [key, _] : j_.items()) {
      if (kEntryKeys.count(key) == 0) fail("unknown key '" + key + "'");
    }
    Expectation e;
    e.scenario = text("scenario", true);
    e.variant = text("variant", true);
    const std::string site = text("site", true);
    if (site != "sync" && site != "copy") fail("'site' must be \"sync\" or \"copy\", got \"" + site + "\"");
    e.sync = site == "sync";
    e.phase = text("phase", true);
    e.what = text("what", true);
    e.frame = text("frame", false);
    e.library = text("library", false);
    e.per_step = number("per_step", true);
    e.tolerance = j_.contains("tolerance") ? number("tolerance", false) : 0;
    e.reason = text("reason", false);
    return e;
  }

 private:
  [[noreturn]] void fail(const std::string& problem) const {
    throw InputError(context_ + ": " + problem);
  }
  std::string text(const char* key, bool required) const {
    if (!j_.contains(key)) {
      if (required) fail(std::string("missing '") + key + "'");
      return "";
    }
    if (!j_[key].is_string()) fail(std::string("'") + key + "' must be a string");
    return j_[key].get<std::string>();
  }
  double number(const char* key, bool required) const {
    if (!j_.contains(key)) {
      if (required) fail(std::string("missing '") + key + "'");
      return 0;
    }
    const json& v = j_[key];
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0) {
      fail(std::string("'") + key + "' must be a number >= 0, got " + v.dump());
    }
    return v.get<double>();
  }

  const json& j_;
  std::string context_;
};

SiteRow row_of(const Expectation& e) {
  return {e.sync, e.phase, e.what, e.frame, e.library, e.per_step};
}

std::string where_of(const SiteChange& c) {
  return site_where(c.frame, c.library) + " (" + c.what + ") in " + c.phase;
}

}  // namespace

ExpectationsFile parse_expectations_text(const std::string& text, const std::string& source) {
  const auto fail = [&](const std::string& problem) {
    throw InputError("expectations file '" + source + "': " + problem);
  };
  json j;
  try {
    j = parse_json_without_duplicate_keys<json>(text);
  } catch (const json::exception& e) {
    fail(std::string("not valid JSON: ") + e.what());
  } catch (const DuplicateKey& e) {
    fail(std::string(e.what()) + " in one object");
  }
  if (!j.is_object()) fail("expected a JSON object, got " + std::string(j.type_name()));
  for (const auto& [key, _] : j.items()) {
    if (kTopKeys.count(key) == 0) fail("unknown key '" + key + "'");
  }
  if (!j.contains("expectations_version") || !j["expectations_version"].is_number_integer() ||
      j["expectations_version"].get<int64_t>() != kExpectationsVersion) {
    fail("missing or unsupported 'expectations_version' (this harness reads version " +
         std::to_string(kExpectationsVersion) + ")");
  }
  ExpectationsFile out;
  out.source = source;
  if (j.contains("description")) {
    if (!j["description"].is_string()) fail("'description' must be a string");
    out.description = j["description"].get<std::string>();
  }
  if (!j.contains("sites") || !j["sites"].is_array()) fail("'sites' must be an array");
  // Two entries for one site: a check would match the site to one and report the other "did not
  // occur" (and --strict fail on it); which count was meant is the user's to say.
  std::map<std::string, size_t> first_of;
  for (size_t i = 0; i < j["sites"].size(); ++i) {
    out.entries.push_back(EntryParser(j["sites"][i], i, source).parse());
    const Expectation& e = out.entries.back();
    const std::string key = e.scenario + "\n" + e.variant + "\n" + (e.sync ? "sync" : "copy") +
                            "\n" + e.phase + "\n" + e.what + "\n" + e.frame + "\n" + e.library;
    const auto [it, fresh] = first_of.emplace(key, i);
    if (!fresh) {
      fail("sites[" + std::to_string(i) + "] is the same site as sites[" +
           std::to_string(it->second) + "] (" + e.frame + ", " + e.what + " in " + e.phase +
           "): give each site once, with its count per step");
    }
  }
  return out;
}

ExpectationsFile parse_expectations_file(const std::string& path) {
  return parse_expectations_text(read_input_file(path, "expectations file"), path);
}

ReportJson expectations_json(const RunReport& report, const std::string& description) {
  ReportJson sites = ReportJson::array();
  for (const ScenarioResult& s : report.scenarios) {
    for (const VariantResult& v : s.variants) {
      if (!v.ran) continue;
      for (const SiteRow& r : site_rows(v)) {
        if (!r.allowed.empty()) continue;  // the program allows it where it makes it
        sites.push_back({{"scenario", s.name},
                         {"variant", v.name},
                         {"site", r.sync ? "sync" : "copy"},
                         {"phase", r.phase},
                         {"what", r.what},
                         {"frame", r.frame},
                         {"library", r.library},
                         {"per_step", value_json(r.per_step)},
                         {"tolerance", 0},
                         {"reason", ""}});
      }
    }
  }
  return {{"expectations_version", kExpectationsVersion},
          {"description", description},
          {"sites", sites}};
}

ExpectationCheck check_expectations(const ExpectationsFile& file, const RunReport& report) {
  ExpectationCheck out;
  out.source = file.source;
  std::map<std::pair<std::string, std::string>, std::vector<const Expectation*>> by_variant;
  for (const Expectation& e : file.entries) by_variant[{e.scenario, e.variant}].push_back(&e);
  std::set<std::pair<std::string, std::string>> seen;
  for (const ScenarioResult& s : report.scenarios) {
    for (const VariantResult& v : s.variants) {
      if (!v.ran) continue;
      const std::pair<std::string, std::string> key{s.name, v.name};
      seen.insert(key);
      std::vector<SiteRow> expected;
      for (const Expectation* e : by_variant[key]) expected.push_back(row_of(*e));
      std::vector<SiteRow> actual;
      for (SiteRow& r : site_rows(v)) {
        if (r.allowed.empty()) {
          actual.push_back(std::move(r));
        } else {
          ++out.allowed;  // allowed in the program (harness_sim.allow_sync): not checked here
        }
      }
      out.checked += actual.size();
      const std::string label = s.name + " " + v.name + ": ";
      for (const SiteChange& c : pair_site_rows(expected, actual)) {
        const std::string at = where_of(c);
        const std::string unit = c.sync ? " sync/step at " : " copy/step at ";
        if (c.kind == SiteChange::Added) {
          out.unexpected.push_back(label + format_number(c.head) + unit + at + ": not expected");
        } else if (c.kind == SiteChange::Removed) {
          out.stale.push_back(label + "expected " + format_number(c.base) + unit + at +
                              ": did not occur");
        } else {
          const Expectation& e = *by_variant[key][c.base_row];
          if (c.head > e.per_step + e.tolerance + 1e-9) {
            out.above.push_back(label + format_number(c.head) + unit + at + ": expected " +
                                format_number(e.per_step) +
                                (e.tolerance > 0 ? " + " + format_number(e.tolerance) : "") +
                                (e.reason.empty() ? "" : " (" + e.reason + ")"));
          }
        }
      }
    }
  }
  for (const auto& [key, entries] : by_variant) {
    if (seen.count(key)) continue;
    out.stale.push_back(key.first + " " + key.second + ": " + std::to_string(entries.size()) +
                        " expected site(s), but the run has no such variant");
  }
  return out;
}

std::string ExpectationCheck::text(bool strict) const {
  std::string out = "expect: " + std::to_string(checked) + " sites checked against " + source +
                    ": " + std::to_string(unexpected.size()) + " unexpected, " +
                    std::to_string(above.size()) + " above their count, " +
                    std::to_string(stale.size()) + " stale" +
                    (allowed ? ", " + std::to_string(allowed) + " allowed in the program" : "") +
                    (failed(strict) ? " -> FAIL" : "") + "\n";
  for (const std::string& s : unexpected) out += "  UNEXPECTED " + s + "\n";
  for (const std::string& s : above) out += "  ABOVE      " + s + "\n";
  for (const std::string& s : stale) out += std::string(strict ? "  STALE      " : "  stale      ") + s + "\n";
  return out;
}

}  // namespace harness

// The HTML report's page: its style, provenance, warnings, gates, the comparison's changed rows
// and a section per scenario (html_scenario.cpp).
#include "harness/report/html/html_report.h"

#include <algorithm>

#include "harness/report/text/format.h"
#include "harness/report/html/html_scenario.h"
#include "harness/report/compare/run_compare.h"
#include "harness/report/html/svg.h"

namespace harness {
namespace {

using svg::escape;

// Inline, so the page needs nothing else; system fonts only.
constexpr const char* kStyle = R"(
body { margin: 0; color: #222; background: #fff;
       font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", Arial,
             sans-serif; }
main { max-width: 1290px; margin: 0 auto; padding: 12px 24px 48px; }
h1 { font-size: 24px; margin: 12px 0 4px; }
h2 { font-size: 20px; margin: 36px 0 4px; padding-top: 12px; border-top: 2px solid #ddd; }
h3 { font-size: 16px; margin: 22px 0 4px; }
h4 { font-size: 14px; margin: 14px 0 4px; }
code { font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: 12px;
       background: #f3f3f3; padding: 0 3px; border-radius: 3px; }
table { border-collapse: collapse; font-size: 13px; margin: 6px 0; }
th, td { border: 1px solid #ddd; padding: 2px 8px; text-align: left; vertical-align: top; }
th { background: #f5f5f5; }
td.r, th.r { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td:first-child { white-space: nowrap; }
.meta, .note { color: #555; margin: 4px 0; }
.note.failed { color: #b00020; }
.warning { background: #fff4e5; border-left: 4px solid #f28e2b; padding: 4px 10px; margin: 6px 0; }
.grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(560px, 1fr)); gap: 8px 28px; }
figure { margin: 6px 0; }
figcaption { font-weight: 600; margin: 4px 0; }
svg.chart { display: block; max-width: 100%; height: auto; font-family: inherit; }
.legend { display: flex; flex-wrap: wrap; gap: 4px 16px; margin: 6px 0; font-size: 13px; }
.swatch { display: inline-block; width: 12px; height: 12px; border-radius: 2px; margin-right: 5px;
          vertical-align: -1px; }
.status { font-weight: 600; padding: 0 6px; border-radius: 3px; white-space: nowrap; }
.status-FAIL { background: #c62828; color: #fff; }
.status-INCONCLUSIVE { background: #f9a825; color: #222; }
.status-SKIP { background: #e0e0e0; color: #222; }
.status-PASS { background: #2e7d32; color: #fff; }
.verdict { font-weight: 700; }
nav a { margin-right: 14px; }
details { margin: 8px 0; }
summary { cursor: pointer; color: #333; }
)";

std::string run_name(const HtmlPage& page, bool base) {
  const std::string& source = base ? page.base_source : page.head_source;
  return std::string(base ? "base" : "head") + (source.empty() ? "" : " (" + source + ")");
}

std::string provenance_block(const HtmlPage& page) {
  const bool paired = page.base != nullptr;
  const auto head = provenance_fields(page.head->provenance);
  const auto base = paired ? provenance_fields(page.base->provenance)
                           : std::vector<std::pair<std::string, std::string>>{};
  std::vector<std::string> names;
  for (const auto* fields : {&head, &base}) {
    for (const auto& [name, value] : *fields) {
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    }
  }
  auto value = [](const std::vector<std::pair<std::string, std::string>>& fields,
                  const std::string& name) {
    for (const auto& [n, v] : fields) {
      if (n == name) return v;
    }
    return std::string();
  };
  std::vector<std::vector<std::string>> rows;
  for (const std::string& name : names) {
    if (paired) {
      rows.push_back({name, value(base, name), value(head, name)});
    } else {
      rows.push_back({name, value(head, name)});
    }
  }
  return "<h3>Provenance</h3>\n" +
         html::html_table(
             paired ? std::vector<std::string>{"", run_name(page, true), run_name(page, false)}
                    : std::vector<std::string>{"provenance", ""},
             rows);
}

std::string warnings_block(const HtmlPage& page) {
  std::string out;
  for (const std::string& w : page.head->warnings) {
    out += "<p class=\"warning\"><strong>Warning:</strong> " +
           std::string(page.base ? "head: " : "") + escape(w) + "</p>\n";
  }
  if (page.base) {
    for (const std::string& w : page.base->warnings) {
      out += "<p class=\"warning\"><strong>Warning:</strong> base: " + escape(w) + "</p>\n";
    }
  }
  return out;
}

int failing_first(RuleStatus status) {
  switch (status) {
    case RuleStatus::Fail: return 0;
    case RuleStatus::Inconclusive: return 1;
    case RuleStatus::Skipped: return 2;
    case RuleStatus::Pass: return 3;
  }
  return 4;
}

std::string gates_block(const HtmlPage& page) {
  if (page.gates.empty()) return "";
  std::string out = "<h2 id=\"gates\">Gates</h2>\n";
  for (const GateOutcome& g : page.gates) {
    const bool passed = g.passed(page.strict);
    out += "<section class=\"gate\" data-gate=\"" + escape(g.source) + "\" data-passed=\"" +
           (passed ? "true" : "false") + "\">\n<h3>" + escape(g.source) +
           ": <span class=\"status " + (passed ? "status-PASS\">passed" : "status-FAIL\">FAILED") +
           "</span></h3>\n<p class=\"meta\">" + std::to_string(g.count(RuleStatus::Fail)) +
           " failed, " + std::to_string(g.count(RuleStatus::Inconclusive)) + " inconclusive" +
           (page.strict ? " (failing: --strict)" : "") + ", " +
           std::to_string(g.count(RuleStatus::Pass)) + " passed, " +
           std::to_string(g.count(RuleStatus::Skipped)) + " skipped</p>\n";
    std::vector<const RuleOutcome*> rules;
    for (const RuleOutcome& o : g.outcomes) rules.push_back(&o);
    std::stable_sort(rules.begin(), rules.end(), [](const RuleOutcome* a, const RuleOutcome* b) {
      return failing_first(a->status) < failing_first(b->status);
    });
    out +=
        "<table>\n<thead><tr><th>outcome</th><th>rule</th><th>scenario</th><th>variant</th>"
        "<th>metric</th><th "
        "class=\"r\">actual</th><th>allowed</th><th>why</th></tr></thead>\n<tbody>\n";
    for (const RuleOutcome* o : rules) {
      const std::string status = to_string(o->status);
      out += "<tr data-rule=\"" + escape(o->rule) + "\" data-status=\"" + escape(status) +
             "\"><td><span class=\"status status-" + escape(status) + "\">" + escape(status) +
             "</span></td><td>" + escape(o->rule) + "</td><td>" + escape(o->scenario) +
             "</td><td>" + escape(o->variant) + "</td><td><code>" + escape(o->metric) +
             "</code></td><td class=\"r\">" +
             (o->actual ? escape(format_number(*o->actual)) : "-") + "</td><td>" +
             escape(o->allowed) + "</td><td>" + escape(o->message) + "</td></tr>\n";
    }
    out += "</tbody>\n</table>\n</section>\n";
  }
  return out;
}

std::string comparison_block(const RunComparison& c) {
  std::string out =
      "<h2 id=\"compare\">What changed</h2>\n<p class=\"verdict\">" + escape(c.tally()) +
      "</p>\n<p class=\"note\">Counts are exact; times by a one-sided Mann-Whitney U "
      "test at alpha " +
      escape(format_number(c.time_options.alpha)) + ", a regression above " +
      escape(format_ratio(c.time_options.max_ratio)) + "x (Hodges-Lehmann ratio), at least " +
      std::to_string(c.time_options.min_samples) + " steps a side.</p>\n";
  for (const EnvironmentDifference& d : c.environment) {
    out += "<p class=\"warning\">" + escape(d.field) + " differs: " + escape(d.base) +
           " (base) vs " + escape(d.head) + " (head)</p>\n";
  }
  for (const std::string& n : c.notes) out += "<p class=\"note\">" + escape(n) + "</p>\n";
  std::vector<std::vector<std::string>> rows;
  for (const ComparedMetric& m : c.rows) {
    if (m.changed())
      rows.push_back(comparison_cells(m, to_string(m.change), c.time_options));
  }
  if (!rows.empty()) out += html::html_table(comparison_columns(), rows, comparison_alignment());
  return out;
}

}  // namespace

const char* html_page_style() { return kStyle; }

std::string render_html(const HtmlPage& page) {
  const RunReport& head = *page.head;
  const bool paired = page.base != nullptr;
  std::string names;
  for (const ScenarioResult& s : head.scenarios) names += (names.empty() ? "" : ", ") + s.name;
  const std::string title = (paired ? "bench compare: " : "bench report: ") + names;
  std::string out =
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>\n"
      "<title>" +
      escape(title) + "</title>\n<style>" + kStyle +
      "</style>\n</head>\n"
      "<body>\n<main>\n<h1>" +
      (paired ? "Benchmark comparison" : "Benchmark report") + "</h1>\n";
  if (paired) {
    out += "<p class=\"meta\">Base and head side by side: " + escape(run_name(page, true)) + ", " +
           escape(run_name(page, false)) + ".</p>\n";
  }
  out += "<nav>";
  if (!page.gates.empty()) out += "<a href=\"#gates\">Gates</a>";
  if (page.comparison) out += "<a href=\"#compare\">What changed</a>";
  for (const ScenarioResult& s : head.scenarios) {
    out += "<a href=\"#scenario-" + escape(s.name) + "\">" + escape(s.name) + "</a>";
  }
  out += "</nav>\n" + warnings_block(page) + provenance_block(page) + gates_block(page);
  if (page.comparison) out += comparison_block(*page.comparison);
  for (const ScenarioResult& s : head.scenarios) {
    out += html::scenario_section(s, paired ? find_scenario(*page.base, s.name) : nullptr, paired);
  }
  if (paired) {
    for (const ScenarioResult& s : page.base->scenarios) {
      if (find_scenario(head, s.name) == nullptr) {
        out += "<section class=\"scenario\" data-scenario=\"" + escape(s.name) + "\"><h2>" +
               escape(s.name) +
               "</h2>\n<p class=\"warning\">In the base report only.</p></section>\n";
      }
    }
  }
  return out + "</main>\n</body>\n</html>\n";
}

}  // namespace harness

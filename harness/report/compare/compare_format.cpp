// The renderings of a RunComparison: text for terminals, markdown for pull requests and CI job
// summaries, JSON for machines.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "harness/report/text/format.h"
#include "harness/report/model/pattern.h"
#include "harness/report/compare/run_compare.h"
#include "harness/report/text/text_table.h"

namespace harness {
namespace {

bool changed(const ComparedMetric& m) { return m.changed(); }

const char* icon(Change change) {
  switch (change) {
    case Change::Regression: return "🔴";
    case Change::Improvement: return "🟢";
    case Change::Unchanged: return "⚪";
    case Change::Inconclusive: return "🟡";
    case Change::New: return "🆕";
    case Change::Missing: return "➖";
    case Change::Info: return "ℹ️";
  }
  return "?";
}

std::string percent_of(double pct) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%+.1f%%", pct);
  return buf;
}

std::string value_text(const ComparedMetric& m, const std::optional<double>& v) {
  if (!v) return "-";
  if (m.unit == "bool") {
    if (m.metric == "status.ok") return *v != 0 ? "ok" : "failed";
    return *v != 0 ? "yes" : "no";
  }
  if (m.unit == "ns") return format_duration_ns(*v);
  return format_number(*v);
}

std::string delta_text(const ComparedMetric& m) {
  if (!m.base || !m.head || m.unit == "bool") return "";
  const double d = *m.head - *m.base;
  if (d == 0) return "0";
  const std::string sign = d > 0 ? "+" : "-";
  return sign + (m.unit == "ns" ? format_duration_ns(std::fabs(d)) : format_number(std::fabs(d)));
}

std::string percent_text(const ComparedMetric& m) {
  if (!m.base || !m.head || m.unit == "bool" || *m.base == 0) return "";
  const double pct = (*m.head - *m.base) / std::fabs(*m.base) * 100;
  return percent_of(pct);
}

std::string ratio_text(const ComparedMetric& m) {
  return m.time ? format_ratio_estimate(m.time->ratio) : "";
}

// The one-sided p-value in the direction of the change.
std::optional<double> p_value(const ComparedMetric& m) {
  if (!m.time || !m.time->ratio.ratio) return std::nullopt;
  return *m.time->ratio.ratio >= 1 ? m.time->test.p_greater : m.time->test.p_less;
}

std::string p_text(const ComparedMetric& m) {
  const std::optional<double> p = p_value(m);
  if (!p) return "";
  return format_p_value(*p);
}

std::string n_text(const ComparedMetric& m) {
  if (!m.time) return "";
  return std::to_string(m.time->test.n_base) + "/" + std::to_string(m.time->test.n_head);
}

const std::vector<std::string>& header() {
  static const std::vector<std::string> h = {
      "", "scenario", "variant", "metric", "base", "head", "Δ", "Δ%", "ratio [95% CI]", "p",
      "n base/head", "why"};
  return h;
}
const char* const kAlignment = "llllrrrrrrrl";

// Why a row changed; for a decided time the numbers are in their own columns already.
std::string why(const ComparedMetric& m, const TimeTestOptions& options) {
  if (!changed(m) && m.change != Change::Info) return "";
  if (m.time && m.change == Change::Regression) {
    return "slower at p < " + format_number(options.alpha) + ", above " +
           format_ratio(options.max_ratio) + "x";
  }
  if (m.time && m.change == Change::Improvement) {
    return "faster at p < " + format_number(options.alpha) + ", below 1/" +
           format_ratio(options.max_ratio) + "x";
  }
  return m.note;
}

std::vector<std::string> cells(const ComparedMetric& m, const std::string& mark,
                               const TimeTestOptions& options) {
  return {mark,          m.scenario,   m.variant, m.metric,  value_text(m, m.base),
          value_text(m, m.head), delta_text(m), percent_text(m), ratio_text(m), p_text(m),
          n_text(m),     why(m, options)};
}

// The order in which folded rows are listed (and kept when the markdown runs out of room): the
// summary figures first, the detail last.
int importance(const ComparedMetric& m) {
  const std::pair<const char*, int> order[] = {
      {"status.", 0}, {"correctness.", 0}, {"(variant)", 0}, {"per_step.", 1},
      {"samples.step", 2}, {"total.", 3}, {"samples.", 4}, {"phase[", 5}, {"launches_by_op[", 6}};
  for (const auto& [prefix, rank] : order) {
    if (starts_with(m.metric, prefix)) return rank;
  }
  return 7;
}

std::string upper(std::string text) {
  for (char& c : text) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return text;
}

std::string run_line(const Provenance& p, const std::string& source) {
  std::string sha = p.git_sha.empty() ? "unknown commit" : p.git_sha.substr(0, 12);
  if (p.git_dirty) sha += " (dirty)";
  return sha + ", " + p.device + ", " + p.instrument + ", " + p.build_type + ", " + p.hostname +
         ", " + p.started_at + (source.empty() ? "" : " (" + source + ")");
}

// The sites by line that changed, a line each, grouped by variant: "  resume_adam fresh/foreach"
// then "    +1 sync/step at train.py:42 in step (...)".
std::string site_lines(const RunComparison& c, const std::string& indent, bool markdown) {
  std::string out, last;
  for (const SiteChange& s : c.sites) {
    const std::string variant = s.scenario + " " + s.variant;
    if (variant != last) {
      out += markdown ? "\n**" + markdown_cell(variant) + "**\n\n" : indent + variant + "\n";
      last = variant;
    }
    out += markdown ? "- `" + describe(s) + "`\n" : indent + "  " + describe(s) + "\n";
  }
  return out;
}

void gate_lines(const RunComparison& c, bool strict, std::string& out) {
  for (const GateOutcome& g : c.gates) out += format_gate_outcome(g, strict);
}

}  // namespace

std::string comparison_text(const RunComparison& c, bool all, bool strict) {
  std::string out = "base: " + run_line(c.base, c.base_source) + "\n" +
                    "head: " + run_line(c.head, c.head_source) + "\n";
  for (const EnvironmentDifference& d : c.environment) {
    out += "***WARNING*** " + d.field + " differs: " + d.base + " (base) vs " + d.head + " (head)\n";
  }
  for (const std::string& n : c.notes) out += "note: " + n + "\n";
  TextTable table(header(), kAlignment);
  for (const ComparedMetric& m : c.rows) {
    if (all || changed(m)) table.add_row(cells(m, upper(to_string(m.change)), c.time_options));
  }
  if (!table.empty()) out += table.render("  ");
  const size_t unchanged = all ? 0 : c.count(Change::Unchanged);
  const size_t informational = all ? 0 : c.count(Change::Info);
  if (unchanged + informational > 0) {
    out += "  (" + std::to_string(unchanged) + " unchanged " +
           (informational > 0 ? "and " + std::to_string(informational) + " informational " : "") +
           "rows not shown; --all shows them)\n";
  }
  if (!c.sites.empty()) out += "sites by line (per step, base -> head):\n" + site_lines(c, "  ", false);
  gate_lines(c, strict, out);
  out += "compare: " + c.tally() + "\n";
  return out;
}

std::string comparison_markdown(const RunComparison& c, bool strict, size_t max_bytes) {
  std::string out = "## bench compare: " + c.tally() + "\n\n";
  out += "- **base**: " + markdown_cell(run_line(c.base, c.base_source)) + "\n";
  out += "- **head**: " + markdown_cell(run_line(c.head, c.head_source)) + "\n";
  out += "- times: one-sided Mann-Whitney U at alpha " + format_number(c.time_options.alpha) +
         ", regression above " + format_ratio(c.time_options.max_ratio) +
         "x (Hodges-Lehmann ratio), at least " + std::to_string(c.time_options.min_samples) +
         " steps a side; counts are exact\n";
  if (!c.environment.empty()) {
    out += "\n> [!WARNING]\n> The runs differ in their environment:";
    for (const EnvironmentDifference& d : c.environment) {
      out += " " + markdown_cell(d.field) + " `" + markdown_cell(d.base) + "` → `" +
             markdown_cell(d.head) + "`;";
    }
    out.back() = '.';
    out += "\n";
  }
  for (const std::string& n : c.notes) out += "\n> " + markdown_cell(n) + "\n";
  // What must come last, so that the limit never cuts it.
  std::string tail;
  for (const GateOutcome& g : c.gates) tail += format_gate_outcome_markdown(g, strict);
  const size_t limit = max_bytes > tail.size() + 400 ? max_bytes - tail.size() - 400 : 0;
  size_t dropped = 0;
  auto add_rows = [&](bool want_changed) {
    std::vector<const ComparedMetric*> rows;
    for (const ComparedMetric& m : c.rows) {
      if (changed(m) == want_changed) rows.push_back(&m);
    }
    std::stable_sort(rows.begin(), rows.end(), [](const ComparedMetric* a, const ComparedMetric* b) {
      return importance(*a) < importance(*b);
    });
    for (const ComparedMetric* row_metric : rows) {
      const ComparedMetric& m = *row_metric;
      const std::string row =
          markdown_table_row(cells(m, icon(m.change), c.time_options), header().size());
      // A regression is never left out, however long the gate section after it (a CI run's
      // baseline gates can fill the limit on their own, and then its summary named no regression).
      if (m.change != Change::Regression && out.size() + row.size() > limit) {
        ++dropped;
        continue;
      }
      out += row;
    }
  };
  // Which lines: first, as what a reader of a red PR asks first (a quarter of the limit at most).
  const std::string sites = site_lines(c, "", true);
  if (!sites.empty()) {
    out += sites.size() <= limit / 4
               ? "\n### Sites by line (per step, base → head)\n" + sites
               : "\n" + std::to_string(c.sites.size()) +
                     " sites by line changed; `bench compare --format json` lists them.\n";
  }
  const size_t folded = c.count(Change::Unchanged) + c.count(Change::Info);
  const size_t changed_rows = c.rows.size() - folded;
  if (changed_rows > 0) {
    out += "\n### Changed\n\n" + markdown_table_header(header(), kAlignment);
    add_rows(true);
  } else {
    out += "\nNothing changed.\n";
  }
  if (folded > 0) {
    out += "\n<details><summary>" + std::to_string(c.count(Change::Unchanged)) + " unchanged, " +
           std::to_string(c.count(Change::Info)) + " informational</summary>\n\n" +
           markdown_table_header(header(), kAlignment);
    add_rows(false);
    out += "\n</details>\n";
  }
  if (dropped > 0) {
    out += "\n" + std::to_string(dropped) +
           " rows left out to stay under the size limit; `bench compare --format json` has "
           "them all.\n";
  }
  return out + tail;
}

const std::vector<std::string>& comparison_columns() { return header(); }

std::string comparison_alignment() { return kAlignment; }

std::vector<std::string> comparison_cells(const ComparedMetric& row, const std::string& verdict,
                                          const TimeTestOptions& options) {
  return cells(row, verdict, options);
}

ReportJson comparison_json(const RunComparison& c, bool strict) {
  auto run = [](const Provenance& p, const std::string& source) {
    return ReportJson{{"source", source},         {"git_sha", p.git_sha},
                      {"git_dirty", p.git_dirty}, {"device", p.device},
                      {"instrument", p.instrument}, {"build_type", p.build_type},
                      {"hostname", p.hostname},   {"started_at", p.started_at}};
  };
  ReportJson out = {{"compare_version", 1},
                    {"base", run(c.base, c.base_source)},
                    {"head", run(c.head, c.head_source)}};
  ReportJson& env = out["environment_differences"] = ReportJson::array();
  for (const EnvironmentDifference& d : c.environment) {
    env.push_back({{"field", d.field}, {"base", d.base}, {"head", d.head}});
  }
  out["notes"] = c.notes;
  out["time_test"] = {{"test", "mann_whitney_u"},
                      {"alpha", c.time_options.alpha},
                      {"max_ratio", c.time_options.max_ratio},
                      {"min_samples", c.time_options.min_samples}};
  ReportJson& tally = out["tally"] = ReportJson::object();
  for (Change k : {Change::Regression, Change::Improvement, Change::Unchanged,
                   Change::Inconclusive, Change::New, Change::Missing, Change::Info}) {
    tally[to_string(k)] = c.count(k);
  }
  ReportJson& rows = out["rows"] = ReportJson::array();
  for (const ComparedMetric& m : c.rows) {
    ReportJson r = {{"scenario", m.scenario}, {"variant", m.variant}, {"metric", m.metric},
                    {"unit", m.unit},         {"change", to_string(m.change)},
                    {"base", value_json(m.base)}, {"head", value_json(m.head)}};
    if (m.base && m.head) {
      r["delta"] = value_json(*m.head - *m.base);
      r["delta_percent"] =
          *m.base != 0 ? value_json((*m.head - *m.base) / std::fabs(*m.base) * 100) : nullptr;
    }
    if (m.time) {
      r["time"] = {{"ratio", value_json(m.time->ratio.ratio)},
                   {"ci_low", value_json(m.time->ratio.low)},
                   {"ci_high", value_json(m.time->ratio.high)},
                   {"p_greater", value_json(m.time->test.p_greater)},
                   {"p_less", value_json(m.time->test.p_less)},
                   {"n_base", m.time->test.n_base},
                   {"n_head", m.time->test.n_head},
                   {"exact", m.time->test.exact}};
    }
    if (!m.note.empty()) r["note"] = m.note;
    rows.push_back(std::move(r));
  }
  ReportJson& sites = out["sites"] = ReportJson::array();
  for (const SiteChange& s : c.sites) {
    sites.push_back({{"scenario", s.scenario},   {"variant", s.variant},
                     {"site", s.sync ? "sync" : "copy"},
                     {"change", to_string(s.kind)}, {"phase", s.phase},
                     {"what", s.what},           {"frame", s.frame},
                     {"library", s.library},     {"moved_from", s.moved_from},
                     {"base_per_step", value_json(s.base)},
                     {"head_per_step", value_json(s.head)},
                     {"text", describe(s)}});
  }
  ReportJson& gates = out["gates"] = ReportJson::array();
  for (const GateOutcome& g : c.gates) {
    ReportJson outcomes = ReportJson::array();
    for (const RuleOutcome& o : g.outcomes) {
      outcomes.push_back({{"rule", o.rule},
                          {"scenario", o.scenario},
                          {"variant", o.variant},
                          {"metric", o.metric},
                          {"status", to_string(o.status)},
                          {"actual", value_json(o.actual)},
                          {"allowed", o.allowed},
                          {"message", o.message}});
    }
    gates.push_back({{"source", g.source}, {"passed", g.passed(strict)}, {"outcomes", outcomes}});
  }
  out["failed"] = c.failed(strict);
  return out;
}

}  // namespace harness

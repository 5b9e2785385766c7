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

// A name, note or line of the markdown at most kClipBytes long ("…" where cut, at a character
// boundary), so that one long value in a report cannot fill the size limit on its own.
constexpr size_t kClipBytes = 300;
std::string clipped(const std::string& text, size_t max = kClipBytes) {
  if (text.size() <= max) return text;
  size_t end = max;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return text.substr(0, end) + "…";
}

// The sites by line that changed, a line each, grouped by variant: "  resume_adam fresh/foreach"
// then "    +1 sync/step at train.py:42 in step (...)".
std::string site_lines(const RunComparison& c, const std::string& indent, bool markdown) {
  std::string out, last;
  for (const SiteChange& s : c.sites) {
    const std::string variant = s.scenario + " " + s.variant;
    if (variant != last) {
      out += markdown ? "\n**" + markdown_cell(clipped(variant)) + "**\n\n"
                      : indent + printable(variant) + "\n";
      last = variant;
    }
    out += markdown ? "- " + markdown_code(clipped(describe(s))) + "\n"
                    : indent + "  " + printable(describe(s)) + "\n";
  }
  return out;
}

void gate_lines(const RunComparison& c, bool strict, std::string& out) {
  for (const GateOutcome& g : c.gates) out += format_gate_outcome(g, strict);
}


std::string markdown_row(const std::vector<std::string>& row) {
  std::vector<std::string> clipped_row;
  for (const std::string& cell : row) clipped_row.push_back(clipped(cell));
  return markdown_table_row(clipped_row, header().size());
}

// "N rows left out ..." after the rows, "N rules of this gate left out ..." after a gate's.
std::string rows_left_out(size_t rows, size_t regressions) {
  if (rows == 0) return "";
  return "\n" + std::to_string(rows) + " rows left out to stay under the size limit" +
         (regressions > 0 ? " (" + std::to_string(regressions) + " of them regressions)" : "") +
         "; `bench compare --format json` has them all.\n";
}
std::string rules_left_out(size_t rules, size_t failing) {
  if (rules == 0) return "";
  return "\n" + std::to_string(rules) + " rules of this gate left out to stay under the size " +
         "limit" + (failing > 0 ? " (" + std::to_string(failing) + " of them failing)" : "") +
         "; `bench compare --format json` lists every outcome.\n";
}
// Notes shown at most, within their share of the limit; the rest are counted.
constexpr size_t kNotesShown = 20;

std::string notes_markdown(const std::vector<std::string>& notes, size_t max_bytes) {
  std::string out;
  size_t shown = 0;
  for (const std::string& n : notes) {
    const std::string line = "\n> " + markdown_cell(clipped(n)) + "\n";
    if (shown == kNotesShown || out.size() + line.size() > max_bytes) break;
    out += line;
    ++shown;
  }
  if (shown < notes.size()) {
    out += "\n> … and " + std::to_string(notes.size() - shown) +
           " more notes; `bench compare --format json` lists them all.\n";
  }
  return out;
}

// A byte budget: take() what fits, force() what must be shown anyway.
class Budget {
 public:
  explicit Budget(size_t bytes) : left_(bytes) {}
  bool take(size_t bytes) {
    if (bytes > left_) return false;
    left_ -= bytes;
    return true;
  }
  bool force(size_t bytes) {
    left_ -= std::min(left_, bytes);
    return true;
  }
  size_t left() const { return left_; }

 private:
  size_t left_;
};

// A row's place in the markdown: its size, and whether it is shown (rendered again then: a
// comparison can hold a million rows, and only those shown are kept as text).
struct RowLine {
  const ComparedMetric* row;
  size_t bytes;
  bool shown;
};

// A gate's markdown (format_gate_outcome_markdown) taken apart: its heading and table header,
// then a line per rule, failing rules first, so that rules can be left out from the end.
struct GateRuleLine {
  std::string line;
  bool failing;
  bool shown = false;
};
struct GateSection {
  std::string heading;
  std::vector<GateRuleLine> rules;
  std::string trailer;  // anything after the table
};

GateSection gate_section(const GateOutcome& g, bool strict) {
  size_t failing = 0;
  for (const RuleOutcome& o : g.outcomes) {
    failing += o.status == RuleStatus::Fail || (strict && o.status == RuleStatus::Inconclusive);
  }
  const std::string md = format_gate_outcome_markdown(g, strict);
  GateSection out;
  size_t table_lines = 0;  // header and alignment lines seen
  for (size_t at = 0; at < md.size();) {
    const size_t end = std::min(md.find('\n', at), md.size() - 1) + 1;
    const std::string line = md.substr(at, end - at);
    at = end;
    const bool table_line = line[0] == '|';
    if (table_line && table_lines < 2) {
      ++table_lines;
      out.heading += line;
    } else if (table_line && out.trailer.empty()) {
      out.rules.push_back({line, out.rules.size() < failing});
    } else if (table_lines < 2) {
      out.heading += line;
    } else {
      out.trailer += line;
    }
  }
  return out;
}

}  // namespace

std::string comparison_text(const RunComparison& c, bool all, bool strict) {
  // Names and notes come from the reports: printable() keeps each of them on its line.
  std::string out = "base: " + printable(run_line(c.base, c.base_source)) + "\n" +
                    "head: " + printable(run_line(c.head, c.head_source)) + "\n";
  for (const EnvironmentDifference& d : c.environment) {
    out += "***WARNING*** " + printable(d.field) + " differs: " + printable(d.base) +
           " (base) vs " + printable(d.head) + " (head)\n";
  }
  for (const std::string& n : c.notes) out += "note: " + printable(n) + "\n";
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
  out += "- **base**: " + markdown_cell(clipped(run_line(c.base, c.base_source))) + "\n";
  out += "- **head**: " + markdown_cell(clipped(run_line(c.head, c.head_source))) + "\n";
  out += "- times: one-sided Mann-Whitney U at alpha " + format_number(c.time_options.alpha) +
         ", regression above " + format_ratio(c.time_options.max_ratio) +
         "x (Hodges-Lehmann ratio), at least " + std::to_string(c.time_options.min_samples) +
         " steps a side; counts are exact\n";
  if (!c.environment.empty()) {
    out += "\n> [!WARNING]\n> The runs differ in their environment:";
    for (const EnvironmentDifference& d : c.environment) {
      out += " " + markdown_cell(clipped(d.field)) + " " + markdown_code(clipped(d.base)) +
             " → " + markdown_code(clipped(d.head)) + ";";
    }
    out.back() = '.';
    out += "\n";
  }
  out += notes_markdown(c.notes, max_bytes / 10);

  // What is left is shared out in order of importance (a reader of a red pull request asks
  // first which rows regressed and which rules failed) and shown in reading order. The fixed
  // lines are counted first, the counts of what was left out at their largest.
  std::vector<GateSection> gates;
  for (const GateOutcome& g : c.gates) gates.push_back(gate_section(g, strict));
  const std::string changed_heading =
      "\n### Changed\n\n" + markdown_table_header(header(), kAlignment);
  const std::string folded_heading =
      "\n<details><summary>" + std::to_string(c.count(Change::Unchanged)) + " unchanged, " +
      std::to_string(c.count(Change::Info)) + " informational</summary>\n\n" +
      markdown_table_header(header(), kAlignment);
  const std::string folded_end = "\n</details>\n";
  const std::string nothing_changed = "\nNothing changed.\n";
  const std::string site_block = site_lines(c, "", true);
  const std::string sites_counted =
      site_block.empty() ? ""
                         : "\n" + std::to_string(c.sites.size()) +
                               " sites by line changed; `bench compare --format json` lists them.\n";
  size_t fixed = out.size() + changed_heading.size() + folded_heading.size() + folded_end.size() +
                 nothing_changed.size() + sites_counted.size() +
                 rows_left_out(c.rows.size(), c.rows.size()).size();
  for (const GateSection& g : gates) {
    fixed += g.heading.size() + g.trailer.size() +
             rules_left_out(g.rules.size(), g.rules.size()).size();
  }
  Budget room(max_bytes > fixed ? max_bytes - fixed : 0);

  std::vector<RowLine> changed_rows, folded_rows;
  for (const ComparedMetric& m : c.rows) {
    const size_t bytes = markdown_row(cells(m, icon(m.change), c.time_options)).size();
    (changed(m) ? changed_rows : folded_rows).push_back({&m, bytes, false});
  }
  // Regressions first among the changed rows, then by importance (stable: report order within).
  std::stable_sort(changed_rows.begin(), changed_rows.end(), [](const RowLine& a, const RowLine& b) {
    const bool ra = a.row->change == Change::Regression;
    const bool rb = b.row->change == Change::Regression;
    if (ra != rb) return ra;
    return importance(*a.row) < importance(*b.row);
  });
  std::stable_sort(folded_rows.begin(), folded_rows.end(), [](const RowLine& a, const RowLine& b) {
    return importance(*a.row) < importance(*b.row);
  });

  // 1. Regressions, in half the room (the first is always named, however small the limit);
  // 2. failing gate rules; then regressions again in what the rules left.
  auto take_regressions = [&](size_t keep) {  // leaves `keep` bytes to what follows
    for (RowLine& r : changed_rows) {
      if (r.row->change != Change::Regression) break;  // (sorted first)
      if (r.shown) continue;
      if (&r == &changed_rows.front()) {
        r.shown = room.force(r.bytes);
        continue;
      }
      if (room.left() < keep + r.bytes) break;
      r.shown = room.take(r.bytes);
    }
  };
  take_regressions(room.left() / 2);
  for (GateSection& g : gates) {
    for (GateRuleLine& rule : g.rules) {
      if (rule.failing) rule.shown = room.take(rule.line.size());
    }
  }
  take_regressions(0);
  // 3. Sites by line, whole (a quarter of the limit at most) or counted.
  std::string sites = sites_counted;
  if (!site_block.empty()) {
    const std::string whole = "\n### Sites by line (per step, base → head)\n" + site_block;
    // (The count's line is counted among the fixed ones already.)
    if (whole.size() <= max_bytes / 4 && room.take(whole.size() - sites_counted.size())) {
      sites = whole;
    }
  }
  // 4. The other changed rows; 5. passing rules; 6. the unchanged and informational rows.
  for (RowLine& r : changed_rows) {
    if (r.row->change != Change::Regression) r.shown = room.take(r.bytes);
  }
  for (GateSection& g : gates) {
    for (GateRuleLine& rule : g.rules) {
      if (!rule.failing) rule.shown = room.take(rule.line.size());
    }
  }
  for (RowLine& r : folded_rows) r.shown = room.take(r.bytes);

  out += sites;
  size_t dropped = 0, dropped_regressions = 0;
  auto add_rows = [&](const std::vector<RowLine>& rows) {
    for (const RowLine& r : rows) {
      if (r.shown) {
        out += markdown_row(cells(*r.row, icon(r.row->change), c.time_options));
      } else {
        ++dropped;
        if (r.row->change == Change::Regression) ++dropped_regressions;
      }
    }
  };
  if (!changed_rows.empty()) {
    out += changed_heading;
    add_rows(changed_rows);
  } else {
    out += nothing_changed;
  }
  if (!folded_rows.empty()) {
    out += folded_heading;
    add_rows(folded_rows);
    out += folded_end;
  }
  out += rows_left_out(dropped, dropped_regressions);
  // The gates come last, each with its failing rules first.
  for (const GateSection& g : gates) {
    out += g.heading;
    size_t left_out = 0, left_out_failing = 0;
    for (const GateRuleLine& rule : g.rules) {
      if (rule.shown) {
        out += rule.line;
      } else {
        ++left_out;
        if (rule.failing) ++left_out_failing;
      }
    }
    out += g.trailer + rules_left_out(left_out, left_out_failing);
  }
  return out;
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
                     {"site", site_family(s.sync, s.event)},
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

#include "harness/report/text/format.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>

namespace harness {
namespace {

constexpr double kExactIntegerLimit = 9007199254740992.0;  // 2^53

bool is_integral(double value) {
  return std::isfinite(value) && std::floor(value) == value &&
         std::fabs(value) < kExactIntegerLimit;
}

std::string printf_double(const char* format, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, format, value);
  return buffer;
}

// "%.3f" without trailing zeros, keeping `min_decimals` of them.
std::string trimmed_fixed(double value, size_t min_decimals) {
  std::string text = printf_double("%.3f", value);
  const size_t dot = text.find('.');
  size_t end = text.size();
  while (end > dot + 1 + min_decimals && text[end - 1] == '0') --end;
  if (end == dot + 1) --end;  // no decimals left: drop the point
  return text.substr(0, end);
}

std::optional<double> value_of(const VariantResult& v, const std::string& path) {
  const Measurement* m = find_metric(v, path);
  return m != nullptr ? m->value : std::nullopt;
}

}  // namespace

std::string format_number(double value) {
  if (!std::isfinite(value)) return "-";
  if (is_integral(value)) return std::to_string(static_cast<int64_t>(value));
  if (std::fabs(value) < 0.001) return printf_double("%.3g", value);
  return trimmed_fixed(value, 0);
}

std::string format_per_step(const std::optional<double>& value) {
  if (!value || !std::isfinite(*value)) return "-";
  if (is_integral(*value)) return std::to_string(static_cast<int64_t>(*value));
  return printf_double("%.2f", *value);
}

std::string format_duration_ns(double ns) {
  if (std::fabs(ns) < 1e6) return printf_double("%.1f µs", ns / 1e3);
  if (std::fabs(ns) < 1e9) return printf_double("%.2f ms", ns / 1e6);
  return printf_double("%.2f s", ns / 1e9);
}

std::string format_ratio(double ratio) { return trimmed_fixed(ratio, 1); }

std::vector<std::string> variant_summary_header() {
  return {"variant",  "steps",     "launch/step", "H2D/step", "D2H/step",
          "D2D/step", "sync/step", "step time",   "correct"};
}

std::string variant_summary_alignment() { return "lrrrrrrrl"; }

std::vector<std::string> variant_summary_cells(const VariantResult& v) {
  if (!v.ran) return {v.name, (v.failed_as_expected() ? "EXPECTED FAILURE: " : "FAILED: ") + v.error};
  std::vector<std::string> cells = {v.name, std::to_string(v.measured_steps)};
  for (const char* name : {"launch.count", "h2d.count", "d2h.count", "d2d.count", "sync.count"}) {
    cells.push_back(format_per_step(value_of(v, std::string("per_step.") + name)));
  }
  const std::optional<double> median = value_of(v, "timing.step_time.median");
  cells.push_back(median && std::isfinite(*median) ? format_duration_ns(*median) : "-");
  cells.push_back(!v.correctness.checked ? "-" : v.correctness.passed ? "yes" : "no");
  return cells;
}

namespace {

// `c`, or \xNN for a control character (below 0x20, and 0x7f).
void append_printable(std::string& out, char c) {
  const auto u = static_cast<unsigned char>(c);
  if (u >= 0x20 && u != 0x7f) {
    out += c;
    return;
  }
  char hex[8];
  std::snprintf(hex, sizeof hex, "\\x%02x", u);
  out += hex;
}

}  // namespace

std::string printable(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) append_printable(out, c);
  return out;
}

std::string markdown_cell(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '|': out += "\\|"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '\n':
      case '\r': out += ' '; break;
      default: append_printable(out, c);
    }
  }
  return out;
}

std::string markdown_code(const std::string& text) {
  std::string body;
  size_t run = 0;
  size_t longest = 0;  // the longest run of backticks: the fence is one longer
  for (const char c : text) {
    run = c == '`' ? run + 1 : 0;
    longest = std::max(longest, run);
    if (c == '\n' || c == '\r') {
      body += ' ';
    } else {
      append_printable(body, c);
    }
  }
  const std::string fence(longest + 1, '`');
  // A space inside each fence when the text starts or ends with a backtick (CommonMark strips it).
  const bool pad = !body.empty() && (body.front() == '`' || body.back() == '`');
  return fence + (pad ? " " : "") + body + (pad ? " " : "") + fence;
}

std::string markdown_table_header(const std::vector<std::string>& header,
                                  const std::string& alignment) {
  std::string out = "|";
  for (const auto& h : header) out += " " + markdown_cell(h) + " |";
  out += "\n|";
  for (size_t i = 0; i < header.size(); ++i) {
    out += i < alignment.size() && alignment[i] == 'r' ? " --: |" : " :-- |";
  }
  return out + "\n";
}

std::string markdown_table_row(const std::vector<std::string>& row, size_t columns) {
  std::string out = "|";
  for (size_t i = 0; i < columns; ++i) out += " " + (i < row.size() ? markdown_cell(row[i]) : "") + " |";
  return out + "\n";
}

std::vector<std::pair<std::string, std::string>> provenance_fields(const Provenance& p) {
  std::vector<std::pair<std::string, std::string>> fields = {
      {"tool version", p.tool_version},
      {"git", p.git_sha.empty() ? "" : p.git_sha + (p.git_dirty ? " (dirty)" : "")},
      {"build type", p.build_type},
      {"LibTorch", p.libtorch_version},
      {"CUDA", p.cuda_version},
      {"CUPTI", p.cupti_version},
      {"device", p.device + (p.device_name.empty() ? "" : " (" + p.device_name + ")")},
      {"instrument",
       p.instrument + (p.instrument_status.empty() ? "" : " (" + p.instrument_status + ")")},
      {"world size", std::to_string(p.world_size)},
      {"host", p.hostname},
      {"started at", p.started_at},
  };
  std::string argv;
  for (const auto& a : p.argv) argv += (argv.empty() ? "" : " ") + a;
  fields.emplace_back("command", argv);
  fields.erase(std::remove_if(fields.begin(), fields.end(),
                              [](const auto& field) { return field.second.empty(); }),
               fields.end());
  return fields;
}

std::optional<double> phase_per_step(const VariantResult& v, const std::string& phase,
                                     const std::vector<std::string>& names) {
  if (v.measured_steps <= 0) return std::nullopt;
  double sum = 0;
  for (const std::string& name : names) {
    const std::optional<double> value = value_of(v, "phase[" + phase + "]." + name);
    if (!value) return std::nullopt;
    sum += *value;
  }
  return sum / static_cast<double>(v.measured_steps);
}

namespace {
// The kSyncSitesShown most frequent of `sites` (sync or copy sites), the most frequent first.
template <typename Site>
std::vector<Site> most_frequent(std::vector<Site> sites) {
  std::stable_sort(sites.begin(), sites.end(),
                   [](const Site& a, const Site& b) { return a.count > b.count; });
  if (sites.size() > kSyncSitesShown) sites.resize(kSyncSitesShown);
  return sites;
}

// A site's count per measured step, as a cell ("-" where no step was measured).
std::string per_step_cell(const VariantResult& variant, int64_t count) {
  if (variant.measured_steps <= 0) return "-";
  return format_number(static_cast<double>(count) / static_cast<double>(variant.measured_steps));
}

// Every variant's shown sites as rows led by the variant's name, under `header` with "variant"
// first.
template <typename Site, typename Top, typename Cells>
SiteTable site_table(const ScenarioResult& scenario, std::vector<std::string> header, Top top,
                     Cells cells) {
  SiteTable table;
  table.header = std::move(header);
  table.header.insert(table.header.begin(), "variant");
  for (const VariantResult& v : scenario.variants) {
    for (const Site& site : top(v)) {
      std::vector<std::string> row = cells(v, site);
      row.insert(row.begin(), v.name);
      table.rows.push_back(std::move(row));
    }
  }
  return table;
}
}  // namespace

std::vector<SyncSite> top_sync_sites(const VariantResult& variant) {
  return most_frequent(variant.sync_sites);
}

SiteTable sync_site_table(const ScenarioResult& scenario) {
  return site_table<SyncSite>(scenario, sync_site_header(), top_sync_sites, sync_site_cells);
}

SiteTable copy_site_table(const ScenarioResult& scenario) {
  return site_table<CopySite>(scenario, copy_site_header(), top_copy_sites, copy_site_cells);
}

SiteTable event_site_table(const ScenarioResult& scenario) {
  return site_table<EventSite>(scenario, event_site_header(), top_event_sites, event_site_cells);
}

std::vector<EventSite> top_event_sites(const VariantResult& variant) {
  return most_frequent(variant.event_sites);
}

std::vector<std::string> event_site_header() {
  return {"phase", "event", "what", "count", "per step", "where"};
}

std::vector<std::string> event_site_cells(const VariantResult& variant, const EventSite& site) {
  const std::string per_step = per_step_cell(variant, site.count);
  return {site.phase,      site.kind, site.what, std::to_string(site.count),
          per_step,        site_where(site.frame, site.library)};
}

std::vector<std::string> sync_site_header() {
  return {"phase", "op", "reason", "count", "waited", "waited/step", "where"};
}

std::string site_where(const std::string& frame, const std::string& library) {
  if (frame.empty()) return library.empty() ? "-" : library;
  return library.empty() ? frame : frame + " (" + library + ")";
}

std::vector<CopySite> top_copy_sites(const VariantResult& variant) {
  return most_frequent(variant.copy_sites);
}

std::vector<std::string> copy_site_header() {
  return {"phase", "copy", "how", "count", "per step", "bytes", "where"};
}

std::vector<std::string> copy_site_cells(const VariantResult& variant, const CopySite& site) {
  const std::string per_step = per_step_cell(variant, site.count);
  return {site.phase,
          site.kind,
          site.how,
          std::to_string(site.count),
          per_step,
          std::to_string(site.bytes),
          site_where(site.frame, site.library)};
}

std::vector<std::string> sync_site_cells(const VariantResult& variant, const SyncSite& site) {
  std::string waited = "-", per_step = "-";
  if (site.wait_ns) {
    waited = format_duration_ns(static_cast<double>(*site.wait_ns));
    if (variant.measured_steps > 0) {
      per_step = format_duration_ns(static_cast<double>(*site.wait_ns) /
                                    static_cast<double>(variant.measured_steps));
    }
  }
  std::string where = site_where(site.frame, site.library);
  if (!site.allowed.empty()) where += " [allowed: " + site.allowed + "]";
  return {site.phase, site.op, site.reason, std::to_string(site.count), waited, per_step, where};
}

}  // namespace harness

// render_markdown: the run as a summary for pull-request comments and CI job summaries (bench
// --markdown writes it with the gates' outcomes after it).
#include <sstream>

#include "harness/report/text/format.h"
#include "harness/report/io/json_report.h"
#include "harness/report/text/reporter.h"

namespace harness {
namespace {

void write_table(std::ostringstream& out, const std::vector<std::string>& header,
                 const std::string& alignment, const std::vector<std::vector<std::string>>& rows) {
  out << markdown_table_header(header, alignment);
  for (const auto& row : rows) out << markdown_table_row(row, header.size());
}

void write_provenance(std::ostringstream& out, const Provenance& p) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& [name, value] : provenance_fields(p)) {
    rows.push_back({name, name == "command" ? "`" + value + "`" : value});
  }
  write_table(out, {"provenance", ""}, "ll", rows);
}

void write_scenario(std::ostringstream& out, const ScenarioResult& s) {
  out << "\n## " << s.name << "\n\n";
  if (!s.description.empty()) out << s.description << "\n\n";
  if (s.world_size > 1) out << "Ranks: " << s.world_size << " (each variant summed over them)\n\n";
  if (!s.measured_window.empty()) out << "Measured window: " << s.measured_window << "\n\n";
  if (!s.config.empty()) {
    out << "Config:";
    for (const auto& [key, value] : s.config) out << " `" << key << "=" << value << "`";
    out << "\n\n";
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& v : s.variants) rows.push_back(variant_summary_cells(v));
  write_table(out, variant_summary_header(), variant_summary_alignment(), rows);
  for (const auto& t : s.tables) {
    out << "\n### " << t.title << "\n\n";
    write_table(out, t.columns, "", t.rows);
  }
  const SiteTable syncs = sync_site_table(s);
  if (!syncs.rows.empty()) {
    out << "\nSync sites (count and host time waited in the measured window):\n\n";
    write_table(out, syncs.header, kSiteTableAlignment, syncs.rows);
  }
  const SiteTable copies = copy_site_table(s);
  if (!copies.rows.empty()) {
    out << "\nCopy sites (blocking or pageable H2D / D2H copies in the measured window):\n\n";
    write_table(out, copies.header, kSiteTableAlignment, copies.rows);
  }
  const SiteTable events = event_site_table(s);
  if (!events.rows.empty()) {
    out << "\nGraph breaks, recompilations and capture blockers in the measured window:\n\n";
    write_table(out, events.header, kEventSiteTableAlignment, events.rows);
  }
  for (const auto& v : s.variants) {
    for (const auto& w : v.warnings) out << "\n> **Warning** (" << v.name << "): " << w << "\n";
  }
}

}  // namespace

std::string render_markdown(const RunReport& report) {
  std::ostringstream out;
  out << "# Benchmark report\n\n";
  write_provenance(out, report.provenance);
  for (const auto& w : report.warnings) out << "\n> **Warning:** " << w << "\n";
  for (const auto& s : report.scenarios) write_scenario(out, s);
  return out.str();
}

}  // namespace harness

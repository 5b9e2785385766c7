#pragma once
// How results print for humans (console, markdown, gate messages). Machine output (the JSON report)
// keeps full values; these functions only round for reading.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "harness/report/model/result.h"

namespace harness {

// Integral values as integers ("12"), others with up to 3 decimals ("2.4", "0.333").
std::string format_number(double value);
// Per-step values: integral as integers ("12"), others with 2 decimals ("2.40"); "-" when missing.
std::string format_per_step(const std::optional<double>& value);
// A time in nanoseconds, in the unit that reads best: "812.3 µs", "1.23 ms", "2.50 s".
std::string format_duration_ns(double ns);
// A ratio with at least one decimal: "1.0", "1.25".
std::string format_ratio(double ratio);

// The one-row summary of a variant that the console and markdown reporters both show: variant,
// steps, launch/H2D/D2H/D2D/sync per step, median step time and correctness. A variant that failed
// to run has two cells: its name and "FAILED: <error>".
std::vector<std::string> variant_summary_header();
std::string variant_summary_alignment();  // TextTable alignment of the columns above
std::vector<std::string> variant_summary_cells(const VariantResult& variant);

// `text` with every control character (below 0x20, and 0x7f) as \xNN: what a terminal or a file
// of lines shows of a name read from a report, so that a NUL, an escape sequence or a line break
// in it cannot end, erase or forge a line. TextTable applies it to every cell.
std::string printable(const std::string& text);

// Markdown tables: a cell with pipes escaped, line breaks flattened, other control characters as
// \xNN and <, >, & as entities (a name in a report never becomes HTML); the header line and its
// alignment line ('r': right-aligned, else left); one row of `columns` cells.
std::string markdown_cell(const std::string& text);
// `text` as an inline code span outside a table (no entities there: a code span shows them as
// written): line breaks flattened, control characters as \xNN, fenced with one backtick more than
// its longest run of them.
std::string markdown_code(const std::string& text);
std::string markdown_table_header(const std::vector<std::string>& header, const std::string& alignment);
std::string markdown_table_row(const std::vector<std::string>& row, size_t columns);

// The provenance fields reporters show, in order, as (name, value); empty values left out; the
// command line last, as "command" (its arguments joined by spaces).
std::vector<std::pair<std::string, std::string>> provenance_fields(const Provenance& provenance);

// A phase's counts per measured step, as `bench --phases` and the HTML report show them: the sum of
// `names` in `phase[<phase>]` (window totals, where the phase is innermost) divided by the
// variant's measured steps. Empty when a name is missing or not measured, or no step was measured.
std::optional<double> phase_per_step(const VariantResult& variant, const std::string& phase,
                                     const std::vector<std::string>& names);

// The sync sites reporters show per variant: the `kSyncSitesShown` most frequent ones.
inline constexpr size_t kSyncSitesShown = 10;
std::vector<SyncSite> top_sync_sites(const VariantResult& variant);
// A sync site as reporters list it: phase, op, reason, count, the time waited in the measured
// window and per measured step ("-" where not measured); the header of those cells.
std::vector<std::string> sync_site_header();
std::vector<std::string> sync_site_cells(const VariantResult& variant, const SyncSite& site);

// Where a site is, as reporters show it: "train.py:42 in step (torch/optim/adam.py:512 in
// _multi_tensor_adam)"; the library frame alone where the program's is not known; "-" for none.
std::string site_where(const std::string& frame, const std::string& library);

// The copy sites reporters show per variant: the `kSyncSitesShown` most frequent ones; a copy
// site as listed: phase, kind, how, count, per step, bytes, where.
std::vector<CopySite> top_copy_sites(const VariantResult& variant);
std::vector<std::string> copy_site_header();
std::vector<std::string> copy_site_cells(const VariantResult& variant, const CopySite& site);

// The event sites (graph breaks, recompilations, capture blockers) reporters show per variant:
// the `kSyncSitesShown` most frequent ones; one as listed: phase, event, what, count, per step,
// where.
std::vector<EventSite> top_event_sites(const VariantResult& variant);
std::vector<std::string> event_site_header();
std::vector<std::string> event_site_cells(const VariantResult& variant, const EventSite& site);

// The shown sync (copy) sites of every variant of a scenario, as the markdown and HTML reports
// list them: a row per site led by the variant's name; the header with "variant" first. Its
// alignment: kSiteTableAlignment.
struct SiteTable {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
};
SiteTable sync_site_table(const ScenarioResult& scenario);
SiteTable copy_site_table(const ScenarioResult& scenario);
inline constexpr const char* kSiteTableAlignment = "llllrrrl";
// The same for event sites; its alignment: kEventSiteTableAlignment.
SiteTable event_site_table(const ScenarioResult& scenario);
inline constexpr const char* kEventSiteTableAlignment = "llllrrl";

}  // namespace harness

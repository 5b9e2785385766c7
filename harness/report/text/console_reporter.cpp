// ConsoleReporter: the human-readable summary on the terminal.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <ostream>

#include "harness/report/text/format.h"
#include "harness/report/text/reporter.h"
#include "harness/report/text/text_table.h"

namespace harness {
namespace {

// "a | b | c" of the parts that are not empty.
std::string joined(const std::vector<std::string>& parts, const char* separator) {
  std::string out;
  for (const auto& p : parts) {
    if (!p.empty()) out += (out.empty() ? "" : separator) + p;
  }
  return out;
}

bool is_number(const std::string& cell) {
  char* end = nullptr;
  std::strtod(cell.c_str(), &end);
  return !cell.empty() && end != nullptr && *end == '\0';
}

// A scenario's own table; columns whose cells are all numbers are right-aligned.
std::string render_result_table(const ResultTable& t) {
  std::string alignment;
  for (size_t c = 0; c < t.columns.size(); ++c) {
    const bool numeric = !t.rows.empty() && std::all_of(t.rows.begin(), t.rows.end(), [&](auto& r) {
      return c < r.size() && is_number(r[c]);
    });
    alignment += numeric ? 'r' : 'l';
  }
  TextTable table(t.columns, alignment);
  for (const auto& row : t.rows) table.add_row(row);
  return "\n  " + t.title + "\n" + table.render("  ");
}

// The most frequent sites of each variant that has any, under `title`: `all` gives a variant's
// sites, `top` those shown, `cells` a site's row.
template <typename All, typename Top, typename Cells>
std::string render_sites(const ScenarioResult& s, const char* title, All all, Top top,
                         Cells cells, const char* alignment = "lllrrrl") {
  std::string out;
  for (const auto& v : s.variants) {
    const size_t sites = all(v).size();
    if (sites == 0) continue;
    TextTable table({}, alignment);
    for (const auto& site : top(v)) table.add_row(cells(v, site));
    out += "  " + v.name + "\n" + table.render("    ");
    if (sites > kSyncSitesShown) {
      out += "    ... and " + std::to_string(sites - kSyncSitesShown) + " more\n";
    }
  }
  return out.empty() ? "" : std::string("\n  ") + title + "\n" + out;
}

std::string render_sync_sites(const ScenarioResult& s) {
  return render_sites(
      s,
      "sync sites (phase, op, reason, count and host time waited in the measured window, time "
      "waited per step, where)",
      [](const VariantResult& v) -> const std::vector<SyncSite>& { return v.sync_sites; }, top_sync_sites, sync_site_cells);
}

std::string render_copy_sites(const ScenarioResult& s) {
  return render_sites(
      s,
      "copy sites (phase, copy, blocking or pageable, count in the measured window, per step, "
      "bytes, where)",
      [](const VariantResult& v) -> const std::vector<CopySite>& { return v.copy_sites; }, top_copy_sites, copy_site_cells);
}

std::string render_event_sites(const ScenarioResult& s) {
  return render_sites(
      s,
      "graph breaks, recompilations and capture blockers (phase, event, what, count in the "
      "measured window, per step, where)",
      [](const VariantResult& v) -> const std::vector<EventSite>& { return v.event_sites; },
      top_event_sites, event_site_cells, "lllrrl");
}

// With --instrument-overhead: each variant's median step with the instrument on and off.
std::string render_instrument_overhead(const ScenarioResult& s) {
  TextTable table({"variant", "median step, instrument on", "off", "on / off", "95% interval"},
                  "lrrrr");
  bool any = false;
  for (const auto& v : s.variants) {
    const Measurement* on = find_metric(v, "timing.step_time.median");
    const Measurement* off = find_metric(v, "timing.step_time_uninstrumented.median");
    const Measurement* ratio = find_metric(v, "timing.instrument_overhead.ratio");
    if (ratio == nullptr) ratio = find_metric(v, "timing.instrument_overhead.median_ratio");
    if (on == nullptr || off == nullptr || ratio == nullptr) continue;
    const Measurement* low = find_metric(v, "timing.instrument_overhead.ratio_low");
    const Measurement* high = find_metric(v, "timing.instrument_overhead.ratio_high");
    auto duration = [](const Measurement* m) {
      return m->value ? format_duration_ns(*m->value) : std::string("-");
    };
    const std::string interval =
        low && low->value && high && high->value
            ? "[" + format_ratio(*low->value) + ", " + format_ratio(*high->value) + "]"
            : std::string("too few steps");
    table.add_row({v.name, duration(on), duration(off),
                   ratio->value ? format_ratio(*ratio->value) : std::string("-"), interval});
    any = true;
  }
  return any ? "\n  instrument overhead (interleaved steps, same run; Hodges-Lehmann on / off)\n" +
                   table.render("  ")
             : "";
}

// With --phases: per variant, each timed phase's counts per step and its median host time.
std::string render_phases(const ScenarioResult& s) {
  std::string out;
  for (const auto& v : s.variants) {
    // Merged and single-rank variants; not the per-rank copies (axis "rank").
    if (!v.ran || v.measured_steps <= 0 || v.axes.count("rank")) continue;
    const Measurement* step = find_metric(v, "timing.step_time.median");
    // GPU time and span (cuda) where measured; sync wait wherever measured.
    bool gpu = false;
    for (const auto& [phase, list] : v.phases) {
      const Measurement* m = find_metric(v, "phase[" + phase + "].gpu_time");
      gpu = gpu || (m && m->value);
    }
    std::vector<std::string> header = {"phase",       "launches",  "copies",      "syncs",
                                       "collectives", "sync wait", "median time", "share"};
    if (gpu) {
      header.push_back("GPU time");
      header.push_back("GPU span");
    }
    TextTable table(header, std::string(header.size() - 1, 'r').insert(0, "l"));
    bool any = false;
    for (const auto& entry : v.phases) {
      const std::string& phase = entry.first;  // a named variable: lambdas cannot capture bindings
      const Measurement* time = find_metric(v, "phase[" + phase + "].time.median");
      if (time == nullptr || !time->value) continue;
      auto per_step = [&](std::vector<std::string> names) {
        return format_per_step(phase_per_step(v, phase, names));
      };
      const std::string share =
          step && step->value && *step->value > 0
              ? std::to_string(static_cast<int>(std::lround(100.0 * *time->value / *step->value))) +
                    "%"
              : "-";
      auto time_per_step = [&](const char* name) {
        const std::optional<double> ns = phase_per_step(v, phase, {name});
        return ns ? format_duration_ns(*ns) : std::string("-");
      };
      std::vector<std::string> row = {phase,
                                      per_step({"launch.count"}),
                                      per_step({"h2d.count", "d2h.count", "d2d.count"}),
                                      per_step({"sync.count"}),
                                      per_step({"collective.count"}),
                                      time_per_step("sync.wait_time"),
                                      format_duration_ns(*time->value),
                                      share};
      if (gpu) {
        row.push_back(time_per_step("gpu_time"));
        row.push_back(time_per_step("gpu_span"));
      }
      table.add_row(row);
      any = true;
    }
    if (any) {
      out += "\n  phases of " + v.name +
             (gpu ? " (per step; counts, sync wait and GPU time"
                  : " (per step; counts and sync wait") +
             " where the phase is innermost, median time including nested phases)\n" +
             table.render("  ");
    }
  }
  return out;
}

}  // namespace

ConsoleReporter::ConsoleReporter(std::ostream& out, bool show_phases)
    : out_(out), show_phases_(show_phases) {}

void ConsoleReporter::on_run_start(const Provenance& p) {
  const std::string git =
      p.git_sha.empty() ? "" : "git " + p.git_sha + (p.git_dirty ? " (dirty)" : "");
  const std::string tool = p.tool_version.empty() ? "" : "harness " + p.tool_version;
  const std::string build = p.build_type.empty() ? "" : "build " + p.build_type;
  const std::string torch = p.libtorch_version.empty() ? "" : "LibTorch " + p.libtorch_version;
  const std::string cuda = p.cuda_version.empty() ? "" : "CUDA " + p.cuda_version;
  out_ << joined({tool, build, git, torch, cuda}, " | ") << "\n";
  std::string device =
      "device " + p.device + (p.device_name.empty() ? "" : " (" + p.device_name + ")");
  std::string instrument = "instrument " + p.instrument +
                           (p.instrument_status.empty() ? "" : " (" + p.instrument_status + ")");
  const std::string ranks = p.world_size > 1 ? "world size " + std::to_string(p.world_size) : "";
  out_ << joined({device, instrument, ranks}, " | ") << "\n";
}

void ConsoleReporter::on_scenario_done(const ScenarioResult& s) {
  out_ << "\n== " << s.name << (s.description.empty() ? "" : ": " + s.description) << "\n";
  if (s.world_size > 1)
    out_ << "   ranks: " << s.world_size << " (each variant summed over them)\n";
  if (!s.measured_window.empty()) out_ << "   measured: " << s.measured_window << "\n";
  if (!s.config.empty()) {
    std::vector<std::string> settings;
    for (const auto& [key, value] : s.config) settings.push_back(key + "=" + value);
    out_ << "   config: " << joined(settings, ", ") << "\n";
  }
  TextTable table(variant_summary_header(), variant_summary_alignment());
  for (const auto& v : s.variants) table.add_row(variant_summary_cells(v));
  out_ << "\n" << table.render("  ");
  for (const auto& t : s.tables) out_ << render_result_table(t);
  out_ << render_sync_sites(s);
  out_ << render_copy_sites(s);
  out_ << render_event_sites(s);
  out_ << render_instrument_overhead(s);
  if (show_phases_) out_ << render_phases(s);
  for (const auto& v : s.variants) {
    for (const auto& w : v.warnings) out_ << "  warning (" << v.name << "): " << w << "\n";
  }
  out_.flush();
}

void ConsoleReporter::on_run_done(const RunReport& report) {
  if (!report.warnings.empty()) out_ << "\n";
  for (const auto& w : report.warnings) out_ << "***WARNING*** " << w << "\n";
  out_.flush();
}

}  // namespace harness

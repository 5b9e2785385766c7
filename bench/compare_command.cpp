#include "bench/compare_command.h"

#include "bench/run.h"

#include <iostream>

#include "harness/report/gates/gate.h"
#include "harness/report/html/html_report.h"
#include "harness/report/io/json_report.h"
#include "harness/report/compare/run_compare.h"

namespace harness {
namespace {

size_t variant_count(const RunReport& report) {
  size_t n = 0;
  for (const ScenarioResult& s : report.scenarios) n += s.variants.size();
  return n;
}

// A compare that would compare nothing (no variant in both) is a mistake in its inputs: the wrong
// file, or a run that ran nothing. It would otherwise pass with every row new or missing.
void check_something_in_common(const RunReport& base, const RunReport& head,
                               const CompareOptions& o) {
  for (const ScenarioResult& h : head.scenarios) {
    const ScenarioResult* b = find_scenario(base, h.name);
    if (b == nullptr) continue;
    for (const VariantResult& v : h.variants) {
      if (find_variant(*b, v.name) != nullptr) return;
    }
  }
  throw InputError("nothing to compare: " + o.base + " (" + std::to_string(variant_count(base)) +
                   " variant(s)) and " + o.head + " (" + std::to_string(variant_count(head)) +
                   " variant(s)) have no scenario and variant in common");
}

}  // namespace

ExitCode run_compare(const CompareOptions& o) {
  // Every input is read and checked before anything is written.
  const RunReport base = read_report_file(o.base);
  const RunReport head = read_report_file(o.head);
  std::vector<GateFile> gates;
  for (const std::string& path : o.gates) gates.push_back(parse_gate_file(path));
  // What the gates may name: bench's scenarios, and whatever the two reports hold (reports of
  // python -m harness_sim run, or of another build).
  GateCatalog catalog = known_scenarios(RunOptions{}, 0);
  add_to_catalog(catalog, base);
  add_to_catalog(catalog, head);
  for (const GateFile& gate : gates) check_gate_names(gate, catalog);
  check_writable_destination(o.out, "--out");
  check_writable_destination(o.html, "--html");

  check_something_in_common(base, head, o);
  RunComparison comparison = compare_reports(base, head, o.time, o.phase_times, o.host_memory);
  comparison.base_source = o.base;
  comparison.head_source = o.head;
  for (const GateFile& gate : gates) {
    comparison.gates.push_back(
        evaluate_gate(gate, head, &base, GateScope{&catalog, o.allow_missing}));
  }

  HtmlPage page;  // base and head side by side
  page.head = &head;
  page.base = &base;
  page.head_source = o.head;
  page.base_source = o.base;
  page.gates = comparison.gates;
  page.strict = o.strict;
  page.comparison = &comparison;
  if (!o.html.empty()) write_file_atomically(o.html, render_html(page));

  std::string text;
  if (o.format == "html") {
    text = render_html(page);
  } else if (o.format == "markdown") {
    text = comparison_markdown(comparison, o.strict);
  } else if (o.format == "json") {
    text = comparison_json(comparison, o.strict).dump(2) + "\n";
  } else {
    text = comparison_text(comparison, o.all, o.strict);
  }
  if (o.out.empty()) {
    std::cout << text << std::flush;
  } else {
    write_file_atomically(o.out, text);
    std::cerr << "bench compare: " << comparison.tally() << "; written to " << o.out << "\n";
  }
  return comparison.failed(o.strict) ? ExitCode::GateFailed : ExitCode::Ok;
}

}  // namespace harness

// Report files (--baseline, bench compare): JSON text to RunReport; an accepted report must also
// survive being written again, compared with itself and used as a gate's baseline.
#include "fuzz/fuzz_target.h"
#include "harness/errors.h"
#include "harness/report/gates/gate.h"
#include "harness/report/io/json_report.h"
#include "harness/report/compare/run_compare.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace harness;
  RunReport report;
  try {
    report = parse_report_text(fuzz::as_text(data, size), "fuzz.json");
  } catch (const InputError&) {
    return 0;
  }
  // What bench does with an accepted report must not fail.
  const RunReport again = parse_report_text(to_json(report).dump(), "round trip");
  const RunComparison comparison = compare_reports(again, report, TimeTestOptions{}, true);
  (void)comparison_markdown(comparison, /*strict=*/true);
  (void)comparison_json(comparison, /*strict=*/true).dump();
  return 0;
}

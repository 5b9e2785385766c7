#include "bench/merge_command.h"

#include <iostream>

#include "harness/report/io/atomic_write.h"
#include "harness/report/io/json_report.h"
#include "harness/report/model/repetition_merge.h"

namespace harness {

ExitCode run_merge(const MergeOptions& o) {
  if (o.reports.size() < 2) {
    throw InputError("bench merge: give two or more reports to merge, got " +
                     std::to_string(o.reports.size()));
  }
  // Every input is read and checked before anything is written.
  std::vector<RunReport> reports;
  for (const std::string& path : o.reports) reports.push_back(read_report_file(path));
  // Only the processes of one command merge: every pair is checked (a duplicate may be anywhere).
  for (size_t i = 0; i < reports.size(); ++i) {
    for (size_t j = 0; j < reports.size(); ++j) {
      if (i == j) continue;
      const std::string why = unmergeable(reports[i], reports[j]);
      if (!why.empty()) {
        throw InputError("bench merge: " + o.reports[j] + " cannot be merged with " +
                         o.reports[i] + ": " + why + " (merge joins the processes of one command: "
                         "the same build, device, scenarios and settings)");
      }
    }
  }
  check_writable_destination(o.out, "OUT");
  RunReport merged;
  try {
    merged = merge_repetitions(reports);
  } catch (const InputError& e) {
    throw InputError(std::string("bench merge: ") + e.what() + " (the reports must come from one "
                     "command: the same scenarios and variants)");
  }
  write_report_file(o.out, merged);
  const size_t before = reports.front().warnings.size();
  for (size_t i = before; i < merged.warnings.size(); ++i) {
    std::cerr << "bench merge: warning: " << merged.warnings[i] << "\n";
  }
  std::cerr << "bench merge: " << reports.size() << " reports; wrote " << o.out << "\n";
  return ExitCode::Ok;
}

}  // namespace harness

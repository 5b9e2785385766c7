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
  check_writable_destination(o.out, "OUT");
  RunReport merged;
  try {
    merged = merge_repetitions(reports);
  } catch (const InputError& e) {
    throw InputError(std::string("bench merge: ") + e.what() + " (the reports must come from one "
                     "command: the same scenarios and variants)");
  }
  write_report_file(o.out, merged);
  std::cerr << "bench merge: " << reports.size() << " reports; wrote " << o.out << "\n";
  return ExitCode::Ok;
}

}  // namespace harness

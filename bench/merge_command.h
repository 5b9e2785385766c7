#pragma once
// bench merge OUT.json IN.json...: reports of one command run in separate processes, one report,
// as `bench --repetitions N` merges its own (repetition_merge.h). It lets a CI job interleave two
// builds process by process -- base, head, base, head, ... -- so that both sides sample the same
// minutes of a shared machine, and then compare the two merged reports.
#include <string>
#include <vector>

#include "harness/errors.h"

namespace harness {

struct MergeOptions {
  std::string out;
  std::vector<std::string> reports;
};

// 0, or 2 for bad input (thrown as InputError): an unreadable report, reports of other scenarios
// or variants, fewer than two.
ExitCode run_merge(const MergeOptions& options);

}  // namespace harness

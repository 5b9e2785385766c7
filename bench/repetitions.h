#pragma once
// bench --repetitions N: the same command run N times, each in a fresh process, one after
// another, and their reports merged into one (repetition_merge.h). Steps of one process share its
// memory layout, clocks and caches; N processes show how far a run of the same code can land
// from another, which a time verdict between two runs needs (statistics.h).
//
// The first process (the one the user started) starts the others: this same binary with the same
// arguments, and kRepetitionReportVariable naming the file its report goes to. Such a process
// writes that report and nothing else (no gates, no other outputs; the first repetition keeps
// --trace), quietly; the first process then writes every output from the merged report.
#include <optional>

#include "bench/run.h"
#include "harness/report/model/result.h"

namespace harness {

inline constexpr const char* kRepetitionReportVariable = "HARNESS_REPETITION_REPORT";
inline constexpr const char* kRepetitionIndexVariable = "HARNESS_REPETITION_INDEX";

// In a repetition's process (kRepetitionReportVariable set): the options it runs with. nullopt in
// any other process.
std::optional<BenchOptions> repetition_options(const BenchOptions& given);

// Runs o.argv o.repetitions times, each a fresh process, and merges their reports. Throws
// Interrupted when stopped (the running process is stopped and reaped first), InputError when a
// process found bad input (it said what), std::runtime_error when one ended without a report.
RunReport run_repetitions(const BenchOptions& o);

}  // namespace harness

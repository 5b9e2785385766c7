#pragma once
// Merging the reports of one bench command run in several fresh processes (bench --repetitions N)
// into one report, as if one process had measured every step:
//   - counts, sites, phases and tables: the first process's; a count that differs in another
//     process (per_step counts, launches by op, outside memory levels) is a report warning, for
//     counts are meant to be exact;
//   - samples: every process's steps, one process after another; `processes` says how many, so
//     that a time verdict between runs can see each process apart (statistics.h);
//   - timing statistics of a sample series ("step_time.median", "time.max" of a phase...) computed
//     again over the merged samples; other timing figures (ratios, shares) the mean over
//     processes;
//   - a variant that failed in any process failed (its error names the process);
//   - provenance and warnings: the first process's, plus what the merge found.
#include <vector>

#include "harness/report/model/result.h"

namespace harness {

// What keeps `other` from being merged with `first` as another process of the same command, or
// "" when nothing does: another device, compute mode, instrument, build (tool version, commit,
// build type, LibTorch), world size; other scenarios or variants, or other scenario settings
// (steps, preset: each scenario's config); a variant without samples; the same process twice
// (its process_id, or every sample series equal).
std::string unmergeable(const RunReport& first, const RunReport& other);

// `per_process[k]` is the report of process k. Throws std::invalid_argument when empty, and
// InputError when the processes ran other scenarios or variants (not one command).
RunReport merge_repetitions(const std::vector<RunReport>& per_process);

}  // namespace harness

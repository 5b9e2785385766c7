#pragma once
// Merging the results of the ranks of one run into the report rank 0 writes.
//
// For each variant (in rank 0's order) the merged result has the variant's own name and:
//   - per_step, total and phase counts summed over ranks (null where any rank's is null); phase
//     times (unit ns) the slowest rank's;
//   - launches by op and sync sites summed over ranks;
//   - the timing of the slowest rank (largest step_time.median), plus "slowest_rank";
//   - ran only if every rank ran it (errors name the rank); correctness failed if any rank's
//     check failed, else the checked ranks' details;
//   - axes + {"ranks": "<world size>"}.
// A variant rank 0 ran by itself (axis {"ranks": "1"}; the other ranks have no result for it) is
// kept as it is. Then, when there is more than one rank, each rank's own result as variant "rank<r>/<name>" with
// axis {"rank": "<r>"}, so the per-rank counts stay in the report and gates can address them.
#include <string>
#include <vector>

#include "harness/report/model/result.h"

namespace harness {

// `per_rank[r]` is rank r's result of the same scenario. Throws std::invalid_argument when empty.
ScenarioResult merge_rank_results(const std::vector<ScenarioResult>& per_rank);

// A rank's result as it sends it through the store (a report of one scenario), parsed and checked
// like a report file. Throws InputError naming `source` ("rank 1's result") when it is not.
ScenarioResult parse_rank_result(const std::string& text, const std::string& source);

}  // namespace harness

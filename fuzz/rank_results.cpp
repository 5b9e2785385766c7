// The results ranks send rank 0 through the store: documents separated by "\n--8<--\n", each one
// rank's report of one scenario, parsed and merged as rank 0 does.
#include <stdexcept>

#include "fuzz/fuzz_target.h"
#include "harness/errors.h"
#include "harness/report/io/json_report.h"
#include "harness/report/model/rank_merge.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace harness;
  std::vector<ScenarioResult> per_rank;
  try {
    int rank = 0;
    for (const std::string& doc : fuzz::split_documents(fuzz::as_text(data, size))) {
      per_rank.push_back(parse_rank_result(doc, "rank " + std::to_string(rank++) + "'s result"));
    }
  } catch (const InputError&) {
    return 0;
  }
  try {
    RunReport merged;
    merged.scenarios.push_back(merge_rank_results(per_rank));
    (void)to_json(merged).dump();
  } catch (const std::runtime_error&) {  // ranks that disagree (a variant missing on a rank)
  }
  return 0;
}

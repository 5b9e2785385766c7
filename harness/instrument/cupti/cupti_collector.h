#pragma once
// The CUPTI instrument for --device cuda: activity records of kernels, memcpys, memsets and
// synchronizations, attributed to harness phases through external correlation ids.
#include <cupti_result.h>

#include <memory>
#include <string>

#include "harness/instrument/instrument.h"

namespace harness::cupti {

// Never throws: when CUPTI cannot run, the instrument says why in status() and measures nothing
// (its counts are reported as null, never as zeros).
std::unique_ptr<Instrument> make_cupti_instrument();

// The instrument's status when cuptiSubscribe fails with `result` (CUPTI's own text for it):
// "degraded: CUPTI is held by <who>; ..." when another tool holds CUPTI, else "unavailable: ...".
// <who> is `holder`, the name cuptiSubscribe_v2 reported, or else other_subscriber()'s guess.
std::string subscribe_failure_status(CUptiResult result, const std::string& cupti_text,
                                     const std::string& holder = "");
// Which profiler most likely holds CUPTI, from the environment it leaves.
std::string other_subscriber();

}  // namespace harness::cupti

#pragma once
// The CUPTI instrument for --device cuda: activity records of kernels, memcpys, memsets and
// synchronizations, attributed to harness phases through external correlation ids.
#include <memory>

#include "harness/instrument/instrument.h"

namespace harness::cupti {

// Never throws: when CUPTI cannot run, the instrument says why in status() and measures nothing
// (its counts are reported as null, never as zeros).
std::unique_ptr<Instrument> make_cupti_instrument();

}  // namespace harness::cupti

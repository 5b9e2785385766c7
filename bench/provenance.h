#pragma once
// What a report says about where it came from (Provenance: tool, build, git, device, instrument,
// host) and the warnings a reader must see before trusting its figures.
#include <string>
#include <vector>

#include "bench/run.h"
#include "harness/instrument/instrument.h"
#include "harness/report/model/result.h"
#include "harness/runtime/device.h"

namespace harness {

// The CPUs this process may run on (its affinity mask, as nproc counts them).
int usable_cpus();

Provenance make_provenance(const BenchOptions& o, const runtime::DeviceSelection& device,
                           const Instrument& instrument);

// Simulated device, an instrument that cannot count, a debug build, too few steps, the seed
// preset off a GPU.
std::vector<std::string> trust_warnings(const BenchOptions& o,
                                        const runtime::DeviceSelection& device,
                                        const Instrument& instrument);

}  // namespace harness

#pragma once
// The machine's description for Google Benchmark's "context" (CPUs, caches, load, frequency),
// read the way Google Benchmark reads it on Linux: sysfs and /proc.
#include "harness/report/gbench_json.h"
#include "harness/report/result.h"

namespace harness {

GbenchContext machine_gbench_context(const Provenance& provenance);

}  // namespace harness

#pragma once
// The machine's description for Google Benchmark's "context" (CPUs, caches, load, frequency),
// read the way Google Benchmark reads it on Linux: sysfs and /proc.
#include "harness/report/io/gbench_json.h"
#include "harness/report/model/result.h"

namespace harness {

GbenchContext machine_gbench_context(const Provenance& provenance);

}  // namespace harness

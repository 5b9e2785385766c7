#pragma once
// A run in Google Benchmark's JSON format (json_schema_version 1), so that the tools CI users
// already have read it: Google Benchmark's tools/compare.py (Debian: libbenchmark-tools),
// github-action-benchmark (tool: googlecpp), Bencher (--adapter cpp_google).
//
// One benchmark per variant that ran, named "<scenario>/<variant>": iterations = timed steps,
// real_time and cpu_time = the mean wall and process CPU time of a step, in ns, and the variant's
// per-step counts as user counters ("launch.count": 37, ...). With `repetitions`, one entry per
// timed step instead (same name, iterations 1, repetition_index = the step), then the mean, median
// and stddev aggregates, as benchmark --benchmark_repetitions writes them: compare.py then runs
// its U test on the steps. A variant that failed is an entry with error_occurred. Never NaN.
#include <string>
#include <vector>

#include "harness/report/io/json_report.h"
#include "harness/report/model/result.h"

namespace harness {

struct GbenchCache {
  std::string type;  // "Data", "Instruction", "Unified"
  int level = 0;
  long long size = 0;  // bytes
  int num_sharing = 0;
};

// The "context" object: the machine the run was on.
struct GbenchContext {
  std::string date;  // ISO 8601 with offset, e.g. "2026-11-23T12:30:06+00:00"
  std::string host_name;
  std::string executable;
  int num_cpus = 0;
  double mhz_per_cpu = 0;
  bool cpu_scaling_enabled = false;
  std::vector<GbenchCache> caches;  // always an array (Bencher requires it)
  std::vector<double> load_avg;
  std::string library_build_type;  // "release" or "debug"
};

ReportJson gbench_json(const RunReport& report, const GbenchContext& context, bool repetitions);

}  // namespace harness

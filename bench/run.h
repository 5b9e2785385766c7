#pragma once
// run_bench: what bench does once its flags are parsed -- check the inputs, run the scenarios,
// report, evaluate the gates -- and the exit code that results.
#include <string>
#include <vector>

#include "harness/errors.h"
#include "harness/report/gates/gate.h"
#include "harness/scenario.h"

namespace harness {

struct BenchOptions {
  std::vector<std::string> scenarios;
  std::string device = "auto";
  std::string compute = "values";  // --compute: values | shapes (sim only; sim_device.h, Compute)
  RunOptions run;
  std::string json_out;      // --out
  std::string markdown_out;  // --markdown
  std::string html_out;      // --html: the self-contained HTML page (with --baseline: side by side)
  std::string trace_out;     // --trace: a file (chrome) or a directory (kineto)
  std::string trace_format = "chrome";  // --trace-format: chrome | kineto
  std::string gbench_out;    // --gbench-out: Google Benchmark JSON
  bool gbench_repetitions = false;  // --gbench-repetitions: one entry per step
  std::vector<std::string> gates;
  std::string expect;              // --expect: an expectations file (expectations.h)
  std::string write_expectations;  // --write-expectations: write one from this run
  std::string baseline;
  bool list = false;
  bool phases = false;   // --phases: the console also shows each variant's phases
  bool strict = false;   // --strict: an inconclusive statistical rule fails its gate
  bool nvtx_only = false;  // --nvtx-only: no counting, CUPTI left alone; NVTX ranges only
  int nproc = 0;         // --nproc: local ranks to start (0: the scenarios' default)
  int timeout_s = 300;   // --timeout: rendezvous and collective timeout of each rank
  bool allow_missing = false;  // --allow-missing: gate rules for scenarios not run are skipped
  int repetitions = 1;   // --repetitions: run the scenarios this many times, each a fresh process
  std::vector<std::string> argv;
};

// What a gate may name: every registered scenario with the variants it can report under `run`,
// and for a scenario on ranks (`nproc`, else its default world size) their "rank<r>/" copies.
GateCatalog known_scenarios(const RunOptions& run, int nproc);

// Throws InputError for bad input (before anything runs where it can be told in advance).
ExitCode run_bench(const BenchOptions& options);

}  // namespace harness

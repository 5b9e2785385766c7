#pragma once
// The typed results of a run: what scenarios produce and what reporters and gates read.
//
// Results are self-describing: every number is a Measurement with a hierarchical name, a unit and a
// description, so that a reporter or a gate never needs to know which instrument produced it.
// Adding an instrument adds measurements, not fields.
//
// Flow: scenario -> VariantResult (one per variant) -> ScenarioResult -> RunReport -> reporters,
// gates.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace harness {

// One number. `value` is empty when the instrument did not measure it: it is written as JSON null,
// never as 0 (a count that was not measured must not look like data).
struct Measurement {
  std::string name;             // hierarchical, dot-separated, e.g. "d2h.count", "step_time.median"
  std::optional<double> value;  // integral for counts and bytes; nanoseconds for times
  std::string unit;             // "count", "bytes", "ns", "ratio", ...
  std::string description;      // one line, for humans
};

// Where host-device synchronisations came from: the op that caused them and its innermost phase.
struct SyncSite {
  std::string phase;   // e.g. "optimizer.step"
  std::string op;      // e.g. "aten::_local_scalar_dense"
  std::string reason;  // e.g. "item", "blocking copy D2H", "device synchronize"
  int64_t count = 0;
  // Host time spent waiting in these syncs, in ns (sim: the work inside them; cuda: the
  // SYNCHRONIZATION records' durations); empty: not measured for every one of them.
  std::optional<int64_t> wait_ns;
  // Where in the program (since schema 1.7): its own frame, "path:line in function", and the
  // library frame that made the call ("torch/optim/adam.py:512 in _multi_tensor_adam"); "" when
  // not known (a GPU record, a report of schema 1.6 or older).
  std::string frame;
  std::string library;
  // Inside a region the program allowed to sync (harness_sim.allow_sync("why")): why; else "".
  std::string allowed;
};

// The copies of one site that a user would move (since schema 1.7): H2D or D2H copies the host
// waited for ("blocking") or made from or into pageable host memory ("pageable"), by phase and
// line. Pinned non-blocking copies and D2D copies have no site.
struct CopySite {
  std::string phase;
  std::string kind;  // "H2D", "D2H"
  std::string how;   // "blocking", "pageable"
  std::string frame;
  std::string library;
  int64_t count = 0;
  int64_t bytes = 0;
};

// An event of compiled code or of CUDA-graph capture, by line (since schema 1.9): a graph break
// crossed ("graph_break": `what` is dynamo's reason), a recompilation ("recompile": the guard that
// failed), or what would stop the step from being captured in a CUDA graph other than a sync or a
// pageable copy, which have their own sites ("capture_blocker").
inline constexpr const char* kGraphBreak = "graph_break";
inline constexpr const char* kRecompile = "recompile";
inline constexpr const char* kCaptureBlocker = "capture_blocker";
// A value the host read that was not computed (since schema 1.10, `--compute shapes`): an
// `.item()` or a D2H copy whose result is a placeholder (zeros); `what` names the read.
inline constexpr const char* kValueNotComputed = "value_not_computed";
// Whether `kind` is one of those four.
bool is_event_kind(const std::string& kind);

struct EventSite {
  std::string kind;
  std::string phase;
  std::string what;
  std::string frame;
  std::string library;
  int64_t count = 0;
};

struct Correctness {
  bool checked = false;  // false: the variant has no correctness check
  bool passed = false;
  std::string detail;    // what was compared and how it came out
};

// The outcome of one variant of one scenario (on one rank, or merged over ranks).
struct VariantResult {
  std::string name;                          // unique within the scenario, e.g. "resume_move_all/foreach"
  std::map<std::string, std::string> axes;   // the variant's coordinates, e.g. {"impl": "foreach"}
  bool ran = false;                          // false: it failed; `error` says why
  std::string error;
  // Non-empty: the variant reproduces a known failure (this says which); failing is its expected
  // outcome and does not fail the run. One that runs to the end fails instead.
  std::string expected_failure;
  bool failed_as_expected() const { return !ran && !expected_failure.empty(); }
  int64_t measured_steps = 0;                // steps in the measured window
  // Counts of the measured window: divided by measured_steps, and in total. Memory levels
  // (memory.*, host_memory.*) are in total and in phases only.
  std::vector<Measurement> per_step;
  std::vector<Measurement> total;
  // Counts of the measured window by innermost phase (key: phase name, e.g. "optimizer.step"),
  // and the memory of each phase while it was open.
  std::map<std::string, std::vector<Measurement>> phases;
  std::map<std::string, int64_t> launches_by_op;  // measured window, op name -> launches
  std::vector<SyncSite> sync_sites;               // measured window
  std::vector<CopySite> copy_sites;               // measured window
  std::vector<EventSite> event_sites;             // measured window
  std::vector<Measurement> timing;                // e.g. "step_time.median" in ns
  // Every measured value behind a timing statistic, in ns, in step order: "step_time",
  // "step_cpu_time", "step_time_uninstrumented", "phase[<phase>].time" (one per step the phase
  // occurred in). Statistical time rules and `bench compare` test these (see statistics.h).
  std::map<std::string, std::vector<double>> samples;
  // The fresh processes the samples come from (bench --repetitions N): each series holds their
  // steps one process after another, in equal parts. A time verdict between two runs needs
  // several a side (statistics.h: the variation between runs).
  int64_t processes = 1;
  Correctness correctness;
  std::vector<std::string> warnings;
};

// A table a scenario wants shown as such (for example a scaling sweep); cells are strings so that
// reporters print them verbatim; the same numbers are also in the variants' measurements.
struct ResultTable {
  std::string title;
  std::vector<std::string> columns;
  std::vector<std::vector<std::string>> rows;
};

struct ScenarioResult {
  std::string name;                            // registry name, e.g. "resume_adam"
  std::string description;                     // one line
  std::string measured_window;                 // what the counts cover, e.g. "the 5 steps after resume"
  std::map<std::string, std::string> config;   // sizes and settings actually used
  int world_size = 1;                          // ranks that ran it (variants sum over them)
  std::vector<VariantResult> variants;
  std::vector<ResultTable> tables;
};

// Where a report came from (see reports/schema/report-v1.md).
struct Provenance {
  std::string tool_version;
  std::string git_sha;
  bool git_dirty = false;
  std::vector<std::string> argv;
  std::string build_type;
  std::string libtorch_version;
  std::string cuda_version;        // empty: not built with CUDA
  std::string cupti_version;       // empty: not built with CUPTI
  std::string device;              // "sim", "cuda", "cpu"
  std::string device_name;         // e.g. "sim (simulated accelerator, host memory)", "NVIDIA H100"
  std::string instrument;          // "dispatcher", "cupti", "ops-only"
  std::string instrument_status;   // "ok", or why it is degraded / unavailable
  std::string hostname;
  std::string started_at;          // ISO 8601 UTC
  int world_size = 1;
  int ranks_per_host = 1;  // ranks on the leader's host (LOCAL_WORLD_SIZE); 1 without ranks
  int cpu_count = 0;       // CPUs the leader may run on (its affinity mask); 0: not known
  int intra_op_threads = 0;  // the leader's intra-op (OpenMP) threads; 0: not known
  std::string compute = "values";  // sim's: "values", or "shapes" (meta functions only; 1.10)
  std::string process_id;          // random, one per process that measured (1.10; "" before)
};

// samples.machine_probe (schema 1.6.0): the time of a fixed piece of host work timed after each
// measured step (time_machine_probe in harness/measure.h). bench compare discounts a variant's
// step-time ratio by its probe's ratio: a machine that was slower for the whole run slows the
// probe as much as the steps.
inline constexpr const char* kMachineProbe = "machine_probe";

// timing.cpu_wait.share (schema 1.4.0): the time a variant's threads waited for a CPU (runnable,
// not running; summed over threads) per second of the variant. Above kContendedCpuWait other work
// held the cores while it ran: its step times measure the machine's load as much as the code, and
// bench compare calls a change of them inconclusive.
inline constexpr const char* kCpuWaitShare = "cpu_wait.share";
inline constexpr double kContendedCpuWait = 0.10;
// Why the variant's times cannot be compared because of kCpuWaitShare ("" when they can, or the
// report does not say).
std::string contention(const VariantResult& variant);

// A scenario run on as many ranks on one host as the host has CPUs, or more: the ranks, Gloo's
// threads and the launcher compete for cores, so its step times say more about the scheduler than
// about the code (two ranks on 2 CPUs: A/A step-time ratios of 2 and more). `ranks`: those that
// ran the scenario (on this host: at most run.ranks_per_host). Returns why, or "" when it was not
// (or the report does not say: before schema 1.4).
std::string oversubscription(const Provenance& run, int ranks);

struct RunReport {
  Provenance provenance;
  std::vector<std::string> warnings;  // about the trust in the numbers: debug build, sim device, ...
  std::vector<ScenarioResult> scenarios;
};

// A new random process id (16 hex digits), for Provenance::process_id.
std::string new_process_id();

// Lookup helpers used by gates and reporters. Metric paths address a variant's measurements:
//   "per_step.<name>", "total.<name>", "timing.<name>", "phase[<phase>].<name>"
// Returns nullptr when the path names no measurement of the variant.
const Measurement* find_metric(const VariantResult& variant, const std::string& path);
// The sample series a path "samples.<name>" names ("samples.step_time",
// "samples.phase[optimizer.step].time"), or nullptr.
const std::vector<double>* find_samples(const VariantResult& variant, const std::string& path);
inline constexpr const char* kSamplesPrefix = "samples.";
// The variant's machine probe samples (samples.machine_probe), or nullptr (before schema 1.6).
const std::vector<double>* machine_probe_samples(const VariantResult& variant);
// Every metric path of the variant, in the order above (for messages that list what exists).
std::vector<std::string> metric_paths(const VariantResult& variant);
const VariantResult* find_variant(const ScenarioResult& scenario, const std::string& name);
const ScenarioResult* find_scenario(const RunReport& report, const std::string& name);

}  // namespace harness

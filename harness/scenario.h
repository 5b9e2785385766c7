#pragma once
// Scenario: a named workload whose variants reproduce a performance pathology and its fixes.
//
// A scenario is registered by name with HARNESS_REGISTER_SCENARIO (a factory, not a live object:
// nothing touches Torch or a device during static initialisation). bench looks it up in the
// ScenarioRegistry, builds a RunContext and calls run(), which returns typed results.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "harness/instrument/instrument.h"
#include "harness/report/model/result.h"
#include "harness/runtime/device.h"

namespace harness::runtime {
class Communicator;
}

namespace harness {

struct RunOptions {
  std::string preset = "small";             // "small" (CI-sized) or "seed" (the original report)
  std::vector<std::string> variant_filters;  // globs; empty: every variant
  int64_t steps = 0;                         // measured steps; 0: the preset's
  bool quiet = false;                        // no progress lines
  // Every second measured step runs with the instrument off, to time the instrument's overhead
  // in the same run (see StepWindow).
  bool instrument_overhead = false;
};

// Progress lines on stderr for runs that take a while.
class Progress {
 public:
  explicit Progress(bool quiet) : quiet_(quiet) {}
  void variant_started(const std::string& scenario, const std::string& variant, size_t index,
                       size_t total);
  void variant_finished(const VariantResult& result, double seconds);

 private:
  bool quiet_;
};

// Everything a scenario may use while it runs.
struct RunContext {
  runtime::DeviceSelection device;
  Instrument& instrument;
  RunOptions options;
  Progress& progress;
  std::string scratch_dir;  // a private directory for checkpoints, removed after the run
  TraceRecorder* trace = nullptr;  // the run's timeline when --trace is given
  // A directory every rank reads and writes: rank 0's scratch directory (ranks on one host; under
  // torchrun on several hosts it must be on a shared file system). scratch_dir without ranks.
  std::string shared_dir;
  // This rank's process group when the run has ranks (--nproc, torchrun); nullptr otherwise.
  runtime::Communicator* comm = nullptr;
  int rank = 0;        // this process's rank (0 without ranks)
  int local_rank = 0;  // its device index on this host
  // This rank's device (sim:LOCAL_RANK, cuda:LOCAL_RANK; sim:0 without ranks).
  c10::Device rank_device() const;

  bool wants_variant(const std::string& name) const;
};

class Scenario {
 public:
  virtual ~Scenario() = default;
  // The variants run() would produce with these options (for --list and filtering).
  virtual std::vector<std::string> variant_names(const RunOptions& options) const = 0;
  virtual ScenarioResult run(RunContext& context) = 0;
  // Ranks bench starts when neither --nproc nor torchrun's variables say (1: one process).
  virtual int default_world_size() const { return 1; }
};

struct ScenarioInfo {
  std::string name;
  std::string description;
  std::function<std::unique_ptr<Scenario>()> factory;
  std::string source_file;
};

class ScenarioRegistry {
 public:
  static ScenarioRegistry& instance();
  void add(ScenarioInfo info);
  const ScenarioInfo* find(const std::string& name) const;
  std::vector<const ScenarioInfo*> all() const;  // sorted by name
  // Names registered more than once (reported by bench, which refuses to run then).
  const std::vector<std::string>& duplicates() const { return duplicates_; }

 private:
  std::vector<ScenarioInfo> infos_;
  std::vector<std::string> duplicates_;
};

struct ScenarioRegistrar {
  ScenarioRegistrar(const char* name, const char* description,
                    std::function<std::unique_ptr<Scenario>()> factory, const char* file);
};

}  // namespace harness

#define HARNESS_SCENARIO_CONCAT_(a, b) a##b
#define HARNESS_SCENARIO_CONCAT(a, b) HARNESS_SCENARIO_CONCAT_(a, b)
// Registers `Type` (default-constructible Scenario) under `name`.
#define HARNESS_REGISTER_SCENARIO(name, description, Type)                                     \
  static const ::harness::ScenarioRegistrar HARNESS_SCENARIO_CONCAT(harness_scenario_, __LINE__)( \
      name, description, [] { return std::unique_ptr<::harness::Scenario>(new Type()); },      \
      __FILE__)

#pragma once
// StepWindow: the measured window of a training run. A TrainerCallback that switches the
// instrument on for steps after `after_step` and times each of them; finish() turns what it saw
// into the counts and timings of a VariantResult.
//
// A step's time runs from a drained device to a drained device (Instrument::drain), so on a GPU
// it covers the step's device work. With `interleave_uninstrumented` (bench
// --instrument-overhead) every second step of the window runs with the instrument off: those
// steps are timed only, and the report gets their times beside the instrumented ones and the
// ratio of the medians -- the instrument's overhead, measured in the same run.
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "harness/instrument/instrument.h"
#include "harness/instrument/phase.h"
#include "harness/report/model/result.h"
#include "harness/runtime/trainer.h"

namespace harness {

// Host wall time of each phase in each instrumented step: a phase listener while such a step
// runs. A phase's time includes its nested phases; a phase that occurs several times in a step
// contributes their sum.
class PhaseClock final : public PhaseListener {
 public:
  void begin_step();         // starts listening
  void end_step() noexcept;  // stops; the step's time per phase becomes one sample of each
  void on_phase_begin(const char* name) noexcept override;
  void on_phase_end(const char* name) noexcept override;
  // Per phase: one sample (ns) per step it occurred in.
  const std::map<std::string, std::vector<int64_t>>& samples() const { return samples_; }
  // How many samples each phase has now; truncate() drops the samples taken since.
  std::map<std::string, size_t> sample_counts() const;
  void truncate(const std::map<std::string, size_t>& counts);

 private:
  bool listening_ = false;
  std::vector<std::pair<const char*, std::chrono::steady_clock::time_point>> open_;
  std::map<std::string, int64_t> step_;
  std::map<std::string, std::vector<int64_t>> samples_;
};

class StepWindow final : public runtime::TrainerCallback {
 public:
  // Starts from zero counts: whatever the instrument still holds is dropped.
  StepWindow(Instrument& instrument, int64_t after_step, bool interleave_uninstrumented = false);
  // A step that threw leaves the instrument on: switch it off.
  ~StepWindow() override;
  StepWindow(const StepWindow&) = delete;
  StepWindow& operator=(const StepWindow&) = delete;

  void on_train_step_start(runtime::Trainer&, int64_t step) override;
  void on_train_step_end(runtime::Trainer&, int64_t step) override;

  // Instrumented steps seen so far (the steps the counts cover).
  int64_t steps() const { return static_cast<int64_t>(step_ns_.size()); }
  // Every step of the window, instrumented or not.
  int64_t window_steps() const { return window_steps_; }
  // Fills measured_steps, per_step, total, phases (with each phase's host time per step:
  // time.median / .min / .max in ns), launches_by_op, sync_sites, timing (wall and process CPU
  // time of a step) and the samples behind them (with each step's sync wait, "sync.wait_time",
  // where the instrument measures it per step, and the machine probe after each step,
  // "machine_probe").
  void finish(VariantResult& result);

 private:
  Instrument& instrument_;
  int64_t after_step_;
  bool interleave_;
  bool in_step_ = false;
  bool counting_ = false;
  int64_t window_steps_ = 0;
  std::chrono::steady_clock::time_point started_;
  int64_t started_cpu_ns_ = 0;
  std::vector<int64_t> step_ns_;                 // instrumented steps
  std::vector<int64_t> step_cpu_ns_;             // their process CPU time
  std::vector<int64_t> uninstrumented_step_ns_;  // with interleave_uninstrumented
  std::vector<int64_t> probe_ns_;                // time_machine_probe() after each step
  PhaseClock phase_clock_;                       // instrumented steps only
  // Each instrumented step's host time waited in syncs, where the instrument knows it per step
  // (Instrument::sync_wait_so_far); cleared for good when a step's is unknown.
  std::optional<int64_t> step_sync_wait_begin_;
  std::vector<int64_t> step_sync_wait_ns_;
  bool sync_wait_per_step_ = true;
  std::optional<NvtxRange> step_range_;  // "step N" while a step of the window runs
};

// count, mean, median, min, max, stddev of step times, in ns ("<prefix>.<stat>"); `what` names
// the time in the descriptions.
std::vector<Measurement> step_time_statistics(const std::vector<int64_t>& ns,
                                              const std::string& prefix = "step_time",
                                              const std::string& what = "wall time");

// The machine's own speed, measured: a fixed piece of host work (integer and floating-point
// arithmetic over a 16 KiB buffer per thread, the same every call, no Torch op) run on every
// thread of the intra-op pool and timed once after each step of a window, outside the step's
// time. It changes only when the machine does -- a tenant on a core or on its hyperthread
// sibling, the clock frequency, descheduling -- so bench compare reads a variant's step-time
// change against its change ("machine_probe" samples; docs/ci.md). Its buffers stay in L1, so
// it barely cools the next step's caches. Returns its wall time in ns.
int64_t time_machine_probe();

// CPU time of the whole process (every thread: the autograd engine's included), in ns.
int64_t process_cpu_ns();

// A test knob: HARNESS_TEST_SLOW_STEPS="<scenario>:<variant glob>=<factor>" makes each measured
// step of the variants it names take <factor> times its time (a busy wait at the step's end,
// inside its wall and CPU time), so that tests and the compare soak (scripts/compare_soak.py)
// can make a known slowdown. VariantRunner names the variant now running; the factor is 1 for
// any other, and when the variable is unset. Throws InputError for a malformed value.
void set_running_variant(const std::string& scenario, const std::string& variant);
double test_step_slowdown();

// Time the process's live threads have spent runnable but not running -- waiting for a CPU that
// another thread or process held -- in ns, summed over threads (the scheduler's run delay,
// /proc/self/task/*/schedstat). nullopt where the kernel does not say.
std::optional<int64_t> cpu_wait_ns();

// Sets result.timing to the statistics of the steps' wall times (step_time.*) and process CPU
// times (step_cpu_time.*), and result.samples "step_time" and "step_cpu_time" to the times.
void set_step_times(VariantResult& result, const std::vector<int64_t>& wall_ns,
                    const std::vector<int64_t>& cpu_ns);

// Adds the machine probe's times (samples "machine_probe", timing machine_probe.median), one per
// measured step; nothing when there are none.
void add_machine_probe(VariantResult& result, const std::vector<int64_t>& probe_ns);

// Adds the host time of each phase the clock saw (time.median / .min / .max in ns) to
// result.phases, and its samples ("phase[<name>].time") to result.samples.
void add_phase_times(VariantResult& result, const PhaseClock& clock);

// Adds each phase of `counts` to result.phases, named `<prefix><phase>` (a phase already there
// is replaced): for what a scenario measures apart from its steps (a set-up, an evaluation).
void add_phases(VariantResult& result, const Counts& counts, bool launches_measured,
                bool instrument_available, const std::string& prefix = "");

// Counts of a window as measurements; launch counts become null when not measured. Memory
// (memory.*, host_memory.*) goes in `total` and each phase only, not divided per step.
void fill_counts(VariantResult& result, const Counts& counts, int64_t steps,
                 bool launches_measured, bool instrument_available);

}  // namespace harness

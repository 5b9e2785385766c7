#pragma once
// StepWindow: the measured window of a training run. A TrainerCallback that switches the
// instrument on for steps after `after_step` and times each of them; finish() turns what it saw
// into the counts and timings of a VariantResult.
#include <chrono>
#include <cstdint>
#include <vector>

#include "harness/instrument/instrument.h"
#include "harness/report/result.h"
#include "harness/runtime/trainer.h"

namespace harness {

class StepWindow final : public runtime::TrainerCallback {
 public:
  // Starts from zero counts: whatever the instrument still holds is dropped.
  StepWindow(Instrument& instrument, int64_t after_step);
  // A step that threw leaves the instrument on: switch it off.
  ~StepWindow() override;
  StepWindow(const StepWindow&) = delete;
  StepWindow& operator=(const StepWindow&) = delete;

  void on_train_step_start(runtime::Trainer&, int64_t step) override;
  void on_train_step_end(runtime::Trainer&, int64_t step) override;

  int64_t steps() const { return static_cast<int64_t>(step_ns_.size()); }
  // Fills measured_steps, per_step, total, phases, launches_by_op, sync_sites and timing.
  void finish(VariantResult& result);

 private:
  Instrument& instrument_;
  int64_t after_step_;
  bool counting_ = false;
  std::chrono::steady_clock::time_point started_;
  std::vector<int64_t> step_ns_;
};

// count, mean, median, min, max, stddev of step times, in ns ("step_time.<stat>").
std::vector<Measurement> step_time_statistics(const std::vector<int64_t>& ns);

// Counts of a window as measurements; launch counts become null when not measured.
void fill_counts(VariantResult& result, const Counts& counts, int64_t steps,
                 bool launches_measured, bool instrument_available);

}  // namespace harness

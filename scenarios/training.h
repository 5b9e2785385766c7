#pragma once
// The measured training run the optimizer scenarios share: train an MLP to 2N steps (optionally
// resuming from a checkpoint, optionally saving every N steps) and measure steps N+1..2N.
#include <ATen/core/Tensor.h>

#include <optional>
#include <string>
#include <vector>

#include "harness/report/model/result.h"
#include "harness/runtime/optim/adam.h"
#include "harness/runtime/strategy.h"
#include "harness/scenario.h"
#include "scenarios/presets.h"

namespace harness::scenarios {

// Fills `result`'s counts and timings and returns the final parameters. Throws when the window
// did not see exactly N steps (a checkpoint at the wrong step, say).
std::vector<at::Tensor> train_and_measure(RunContext& ctx, const TrainingPreset& preset,
                                          const runtime::AdamOptions& adam,
                                          runtime::RestorePolicy policy,
                                          const std::optional<std::string>& resume_from,
                                          const std::optional<std::string>& checkpoint_dir,
                                          VariantResult& result);

// The checkpoint a run saving into `directory` every N steps writes at step N.
std::string checkpoint_at_step_n(const std::string& directory, const TrainingPreset& preset);

// A resumed variant starts from its fresh run's checkpoint: throws, with the fresh run's reason,
// when that run failed.
void require_fresh_run(const VariantResult& fresh);

}  // namespace harness::scenarios

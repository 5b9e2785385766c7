#pragma once
// What the sharded scenarios (sharded_setup, engine_reuse) share: one rank's sharded training run
// (model, data, strategy, trainer), counting a piece of work apart from the measured steps, and
// the correctness check against single-device training.
#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "harness/instrument/counts.h"
#include "harness/report/model/result.h"
#include "harness/runtime/sharded/sharded_strategy.h"
#include "harness/runtime/trainer.h"
#include "harness/scenario.h"
#include "scenarios/presets.h"

namespace harness::scenarios {

struct ShardedRun {
  ShardedRun(RunContext& ctx, const TrainingPreset& preset, runtime::ShardedOptions options,
             int64_t max_steps);
  ShardedRun(RunContext& ctx, const TrainingPreset& preset, runtime::ShardedOptions options,
             runtime::TrainerConfig trainer_config);
  // Builds the module (phase "setup.model"): on the host or on meta, as the set-up path wants;
  // under sim's --compute shapes a Llama preset's host module has no bytes (host memory counted).
  void build_model();

  static runtime::ShardedOptions with_compute_dtype(runtime::ShardedOptions options,
                                                    const TrainingPreset& preset);

  RunContext& ctx;
  const TrainingPreset& preset;
  runtime::ShardedOptions options;
  std::unique_ptr<runtime::TrainModule> model;
  std::unique_ptr<runtime::DataSource> data;
  runtime::ShardedStrategy strategy;
  runtime::Trainer trainer;
};

// "sharded (one flat parameter per ... unit), Adam (foreach)" for the scenario's config.
std::string strategy_description(const TrainingPreset& preset);

// Throws InputError for a preset whose values the host cannot compute (llama3_8b) on sim without
// --compute shapes.
void refuse_computing_at_full_size(const RunContext& ctx, const TrainingPreset& preset);

// What `body` costs, counted on its own (the instrument is on only while it runs).
Counts count_apart(Instrument& instrument, const std::function<void()>& body);

// Rank 0 trains `preset`'s model on one device for `steps` steps (each over
// `accumulate_grad_batches` micro-batches) from `initial` (the run's initial parameters, gathered
// if sharded) and compares with `trained` (its final ones).
Correctness check_against_single_device(RunContext& ctx, const TrainingPreset& preset,
                                        const std::vector<at::Tensor>& initial,
                                        const std::vector<at::Tensor>& trained, int64_t steps,
                                        int64_t accumulate_grad_batches = 1);

// The tensors' bytes, one after another: what a scenario keeps from one variant to compare with
// the next bitwise. Kept in a std::string, not in tensors, so that what the harness keeps is not
// host memory of the variants measured after it.
std::string raw_bytes(const std::vector<at::Tensor>& tensors);

}  // namespace harness::scenarios

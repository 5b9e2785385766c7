#include "scenarios/training.h"

#include <stdexcept>

#include "harness/measure.h"
#include "harness/runtime/checkpoint/checkpoint.h"
#include "harness/runtime/mlp.h"
#include "harness/runtime/trainer.h"

namespace harness::scenarios {

std::vector<at::Tensor> train_and_measure(RunContext& ctx, const TrainingPreset& preset,
                                          const runtime::AdamOptions& adam,
                                          runtime::RestorePolicy policy,
                                          const std::optional<std::string>& resume_from,
                                          const std::optional<std::string>& checkpoint_dir,
                                          VariantResult& result) {
  runtime::MlpRegression model(preset.model(), adam);
  runtime::SyntheticRegressionData data(preset.data(ctx.device.kind));
  runtime::SingleDeviceStrategy strategy(ctx.device.device(0), policy);
  runtime::Trainer trainer(strategy, data, {2 * preset.steps_before, 2});
  StepWindow window(ctx.instrument, preset.steps_before, ctx.options.instrument_overhead);
  trainer.add_callback(&window);
  std::optional<runtime::CheckpointCallback> checkpoint;
  if (checkpoint_dir) {
    runtime::create_checkpoint_directory(*checkpoint_dir);
    checkpoint.emplace(*checkpoint_dir, preset.steps_before);
    trainer.add_callback(&*checkpoint);
  }
  trainer.fit(model, resume_from);
  if (window.window_steps() != preset.steps_before) {
    throw std::runtime_error("the window saw " + std::to_string(window.window_steps()) + " steps, expected " +
                             std::to_string(preset.steps_before));
  }
  window.finish(result);
  return model.parameters();
}

std::string checkpoint_at_step_n(const std::string& directory, const TrainingPreset& preset) {
  return runtime::CheckpointCallback(directory, preset.steps_before).path_for(preset.steps_before);
}

void require_fresh_run(const VariantResult& fresh) {
  if (!fresh.ran) throw std::runtime_error("the fresh run it resumes from failed: " + fresh.error);
}

}  // namespace harness::scenarios

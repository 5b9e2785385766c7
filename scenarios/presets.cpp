#include "scenarios/presets.h"

#include <algorithm>

#include "harness/errors.h"
#include "harness/runtime/dist/communicator.h"

namespace harness::scenarios {

std::map<std::string, std::string> TrainingPreset::describe() const {
  std::string w;
  for (size_t i = 0; i < widths.size(); ++i) w += (i ? "-" : "") + std::to_string(widths[i]);
  return {{"preset", name},
          {"mlp_widths", w},
          {"parameter_tensors", std::to_string(parameter_tensors())},
          {"batch_size", std::to_string(batch_size)},
          {"steps_before_checkpoint", std::to_string(steps_before)},
          {"measured_steps", std::to_string(steps_before)}};
}

void require_ranks(const RunContext& ctx, const std::string& scenario) {
  if (ctx.comm == nullptr) {
    throw InputError(scenario + " needs ranks: run it with --nproc N (N >= 2) or under torchrun");
  }
}

void describe_ranks(ScenarioResult& result, const RunContext& ctx) {
  result.config["world_size"] = std::to_string(ctx.comm->world_size());
  result.config["backend"] = ctx.comm->backend_name();
}

TrainingPreset training_preset(const RunOptions& options, bool allow_large) {
  TrainingPreset p;
  if (options.preset == "small") {
    p = {"small", {32, 64, 64, 32, 16, 4}, 64, 10};
  } else if (options.preset == "seed") {
    p = {"seed", {6875, 2048, 1024, 512, 256, 7}, 32768, 100};
  } else if (options.preset == "large" && allow_large) {
    // 16 x (4096 x 4096 + 4096) float32 parameters: 1.0 GiB, in units of 64 MiB.
    p = {"large", std::vector<int64_t>(17, 4096), 16, 1};
  } else {
    throw InputError("unknown preset '" + options.preset + "' (known: small, seed" +
                     (allow_large ? ", large" : "; large for sharded_setup only") + ")");
  }
  if (options.steps < 0) throw InputError("--steps must be positive");
  if (options.steps > 0) {
    p.steps_before = options.steps;
  } else if (options.instrument_overhead) {
    // Enough interleaved steps a side for the on/off ratio's interval (StepWindow::finish).
    p.steps_before = std::max(p.steps_before, kInstrumentOverheadSteps);
  }
  return p;
}

}  // namespace harness::scenarios

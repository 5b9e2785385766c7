// grad_accumulation (NVIDIA/cosmos-framework #161; Lightning's accumulate_grad_batches): a step
// that accumulates the gradients of M micro-batches needs them reduced across ranks once, after
// the last. A loop that leaves the gradient sync on reduces after every micro-batch's backward
// instead: M times the collectives and their bytes for the same optimizer step (under FSDP2 the
// reduce-scatters, measured there as M times the step time). The fix is FSDP2's
// set_requires_gradient_sync(False) on all but the last micro-batch, DDP's no_sync().
//
// Variants <ddp|sharded>/micro<M>/<sync_every|sync_last> for M = 4 and 8, and
// <ddp|sharded>/micro1 (one micro-batch: both are the same step). ddp: DataParallelStrategy, one
// all-reduce per bucket after a reducing backward. sharded: ShardedStrategy (ZeRO-3 / FSDP), a
// reduce-scatter per unit inside a reducing backward; a backward that does not reduce keeps each
// unit's whole gradient on the rank, summed, as FSDP2 does. The measured window is steps
// 2..N+1 of each run (the first creates the optimizer's state); "per step" is per optimizer step.
// Correct when the trained parameters are those of single-device training with the same
// accumulation.
#include <ATen/core/Tensor.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "harness/measure.h"
#include "harness/runtime/mlp.h"
#include "harness/runtime/parallel/data_parallel.h"
#include "harness/runtime/trainer.h"
#include "harness/scenario.h"
#include "harness/variant_runner.h"
#include "scenarios/presets.h"
#include "scenarios/sharded_run.h"

namespace harness::scenarios {
namespace {

using runtime::GradientSync;

enum class Parallelism { Ddp, Sharded };

const char* to_string(Parallelism p) { return p == Parallelism::Ddp ? "ddp" : "sharded"; }

struct AccumulationVariant {
  Parallelism parallelism;
  int64_t micro_batches;
  GradientSync sync;

  std::string name() const {
    std::string n = std::string(to_string(parallelism)) + "/micro" + std::to_string(micro_batches);
    return micro_batches == 1 ? n : n + "/" + runtime::to_string(sync);
  }
};

std::vector<AccumulationVariant> accumulation_variants() {
  std::vector<AccumulationVariant> out;
  for (Parallelism p : {Parallelism::Ddp, Parallelism::Sharded}) {
    out.push_back({p, 1, GradientSync::LastMicroBatch});
    for (int64_t m : {4, 8}) {
      out.push_back({p, m, GradientSync::EveryMicroBatch});
      out.push_back({p, m, GradientSync::LastMicroBatch});
    }
  }
  return out;
}

runtime::TrainerConfig accumulating_trainer_config(int64_t steps, const AccumulationVariant& v) {
  runtime::TrainerConfig config{steps, 2};
  config.accumulate_grad_batches = v.micro_batches;
  config.gradient_sync = v.sync;
  return config;
}

// The window's steps, checked and written into `r`.
void finish_accumulation_window(StepWindow& window, int64_t expected, VariantResult& r) {
  if (window.window_steps() != expected) {
    throw std::runtime_error("the window saw " + std::to_string(window.window_steps()) +
                             " steps, expected " + std::to_string(expected));
  }
  window.finish(r);
}

std::vector<at::Tensor> accumulation_host_copies(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> out;
  for (const at::Tensor& t : tensors) out.push_back(t.detach().to(at::kCPU, /*non_blocking=*/false,
                                                                  /*copy=*/true));
  return out;
}

void run_accumulating_ddp(RunContext& ctx, const TrainingPreset& preset, const AccumulationVariant& v,
             VariantResult& r) {
  const int64_t n = preset.steps_before;
  runtime::MlpRegression model(preset.model(), runtime::AdamOptions{});
  runtime::SyntheticRegressionData data(preset.data(ctx.device.kind));
  runtime::DataParallelStrategy strategy(*ctx.comm, ctx.rank_device());
  runtime::Trainer trainer(strategy, data, accumulating_trainer_config(n + 1, v));
  // Every rank builds the model from one seed: rank 0's, which DDP broadcasts at set-up.
  const std::vector<at::Tensor> initial = accumulation_host_copies(model.parameters());
  StepWindow window(ctx.instrument, 1, ctx.options.instrument_overhead);
  trainer.add_callback(&window);
  trainer.fit(model);
  finish_accumulation_window(window, n, r);
  r.correctness = check_against_single_device(ctx, preset, initial,
                                              accumulation_host_copies(model.parameters()), n + 1,
                                              v.micro_batches);
}

void run_accumulating_sharded(RunContext& ctx, const TrainingPreset& preset, const AccumulationVariant& v,
                 VariantResult& r) {
  const int64_t n = preset.steps_before;
  runtime::ShardedOptions options;
  options.init_seed = preset.seed();
  ShardedRun run(ctx, preset, options, accumulating_trainer_config(n + 1, v));
  run.build_model();
  run.trainer.setup(*run.model, runtime::Stage::Fit);
  const std::vector<at::Tensor> initial = run.strategy.gather_full_parameters();
  StepWindow window(ctx.instrument, 1, ctx.options.instrument_overhead);
  run.trainer.add_callback(&window);
  run.trainer.fit(*run.model);
  finish_accumulation_window(window, n, r);
  r.correctness = check_against_single_device(ctx, preset, initial,
                                              run.strategy.gather_full_parameters(), n + 1,
                                              v.micro_batches);
}

class GradAccumulation final : public Scenario {
 public:
  int default_world_size() const override { return 2; }

  std::vector<std::string> variant_names(const RunOptions&) const override {
    std::vector<std::string> names;
    for (const AccumulationVariant& v : accumulation_variants()) names.push_back(v.name());
    return names;
  }

  ScenarioResult run(RunContext& ctx) override {
    require_ranks(ctx, "grad_accumulation");
    const TrainingPreset preset = training_preset(ctx.options);
    const int64_t n = preset.steps_before;
    ScenarioResult result;
    result.name = "grad_accumulation";
    result.description =
        "gradient accumulation over micro-batches: reduced after every micro-batch or only the "
        "last (DDP no_sync, FSDP2 set_requires_gradient_sync)";
    result.measured_window = "optimizer steps 2.." + std::to_string(n + 1) +
                             " of each run (per step: per optimizer step, all its micro-batches)";
    result.config = preset.describe();
    result.config.erase("steps_before_checkpoint");
    describe_ranks(result, ctx);
    result.config["micro_batch_size"] = std::to_string(preset.batch_size);
    result.config["optimizer"] = "Adam (foreach)";

    VariantRunner runner(ctx, result.name, variant_names(ctx.options));
    for (const AccumulationVariant& v : accumulation_variants()) {
      const std::string name = v.name();
      if (!ctx.wants_variant(name)) continue;
      result.variants.push_back(runner.run(name, [&](VariantResult& r) {
        r.axes = {{"parallelism", to_string(v.parallelism)},
                  {"micro_batches", std::to_string(v.micro_batches)},
                  {"gradient_sync", runtime::to_string(v.sync)}};
        if (v.parallelism == Parallelism::Ddp) {
          run_accumulating_ddp(ctx, preset, v, r);
        } else {
          run_accumulating_sharded(ctx, preset, v, r);
        }
      }));
    }
    return result;
  }
};

}  // namespace
}  // namespace harness::scenarios

HARNESS_REGISTER_SCENARIO("grad_accumulation",
                          "gradient accumulation under DDP and sharding: the gradients reduced "
                          "after every micro-batch vs only the last (no_sync; FSDP2's "
                          "set_requires_gradient_sync; NVIDIA/cosmos-framework #161)",
                          harness::scenarios::GradAccumulation);

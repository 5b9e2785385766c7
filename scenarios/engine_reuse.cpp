// engine_reuse (Lightning #17523): `trainer.validate(model)` then `trainer.fit(model)` (then
// `trainer.test(model)`) with a ZeRO-3-style sharded strategy on one module. Every stage building
// a new engine costs a set-up each time and piles up hooks on the module; with per-engine
// in-flight registries (DeepSpeed before 0.9.3) the fit engine meets a unit the validate engine's
// prefetch left INFLIGHT and fails. Variants: the engine policies of ShardedStrategy.
#include <ATen/core/Tensor.h>

#include <optional>
#include <string>
#include <vector>

#include "harness/errors.h"
#include "harness/measure.h"
#include "harness/variant_runner.h"
#include "scenarios/sharded_run.h"

namespace harness::scenarios {
namespace {

using runtime::EnginePolicy;
using runtime::Stage;

constexpr EnginePolicy kPolicies[] = {EnginePolicy::NewPerStage, EnginePolicy::NewPerStagePrivate,
                                      EnginePolicy::Reuse, EnginePolicy::DestroyBetween};

std::string expected_failure_of(EnginePolicy policy) {
  return policy == EnginePolicy::NewPerStagePrivate
             ? "Lightning #17523 / DeepSpeed #3068: the fit engine's own in-flight registry does "
               "not know the unit the validate engine left INFLIGHT"
             : "";
}

class EngineReuse final : public Scenario {
 public:
  int default_world_size() const override { return 2; }

  std::vector<std::string> variant_names(const RunOptions&) const override {
    std::vector<std::string> names;
    for (EnginePolicy p : kPolicies) names.emplace_back(runtime::to_string(p));
    return names;
  }

  ScenarioResult run(RunContext& ctx) override {
    require_ranks(ctx, "engine_reuse");
    const TrainingPreset preset = training_preset(ctx.options);
    const int64_t n = preset.steps_before;
    ScenarioResult result;
    result.name = "engine_reuse";
    result.description = "validate, fit, test on one sharded module: an engine per stage or one";
    result.measured_window =
        "each stage's set-up (phases setup.validate, setup.fit, setup.test), the validation and "
        "test passes (phases validate, test), and training steps 1.." +
        std::to_string(n);
    result.config = preset.describe();
    result.config.erase("steps_before_checkpoint");
    describe_ranks(result, ctx);
    result.config["stages"] = "validate, fit, test";
    result.config["strategy"] = "sharded (one flat parameter per Linear unit), Adam (foreach)";

    // The reference: fit alone, on a fresh module (outside every window).
    const std::string fit_only = raw_bytes(train(ctx, preset, EnginePolicy::Reuse, nullptr, {}));
    VariantRunner runner(ctx, result.name, variant_names(ctx.options));
    for (EnginePolicy policy : kPolicies) {
      const std::string name = runtime::to_string(policy);
      if (!ctx.wants_variant(name)) continue;
      result.variants.push_back(runner.run(
          name,
          [&](VariantResult& r) {
            r.axes = {{"engines", name}};
            const std::vector<at::Tensor> trained =
                train(ctx, preset, policy, &r, {Stage::Validate, Stage::Fit, Stage::Test});
            if (ctx.rank != 0) {
              r.correctness = {false, false, "checked on rank 0"};
            } else {
              const bool same = raw_bytes(trained) == fit_only;
              r.correctness = {true, same,
                               same ? "parameters after validate, fit, test bitwise equal to "
                                      "fit alone's"
                                    : "parameters differ from fit alone's"};
            }
          },
          expected_failure_of(policy)));
    }
    return result;
  }

 private:
  // Runs `stages` (fit alone when empty) on one trainer and module; with `r`, measures them.
  // Returns the gathered final parameters.
  static std::vector<at::Tensor> train(RunContext& ctx, const TrainingPreset& preset,
                                       EnginePolicy policy, VariantResult* r,
                                       const std::vector<Stage>& stages) {
    runtime::ShardedOptions options;
    options.setup = runtime::ShardedSetup::FullThenShard;
    options.engines = policy;
    options.deepspeed_optimizer_setup = true;  // the engines of #17523 are DeepSpeed's
    ShardedRun run(ctx, preset, options, preset.steps_before);
    run.build_model();
    if (r == nullptr) {
      run.trainer.fit(*run.model);
      return run.strategy.gather_full_parameters();
    }
    const bool launches = ctx.instrument.measures_launches();
    const bool available = ctx.instrument.available();
    Counts apart;  // stage set-ups and evaluation passes
    std::optional<StepWindow> window;
    for (Stage stage : stages) {
      Counts setup = count_apart(ctx.instrument, [&] { run.trainer.setup(*run.model, stage); });
      // The stage's set-up under its own name, there even when it cost nothing.
      PhaseCounts& stage_setup = apart.phases["setup." + std::string(to_string(stage))];
      for (auto& [phase, counts] : setup.phases) {
        (phase == "setup" ? stage_setup : apart.phases[phase]).add(counts);
      }
      if (stage == Stage::Fit) {
        window.emplace(ctx.instrument, 0, ctx.options.instrument_overhead);
        run.trainer.add_callback(&*window);
        run.trainer.fit(*run.model);
        window->finish(*r);
      } else {
        apart.add(count_apart(ctx.instrument, [&] {
          stage == Stage::Validate ? run.trainer.validate(*run.model)
                                   : run.trainer.test(*run.model);
        }));
      }
    }
    if (!window) throw std::logic_error("engine_reuse runs a fit stage");
    add_phases(*r, apart, launches, available);
    r->total.push_back({"engines.built", static_cast<double>(run.strategy.engines_built()), "count",
                        "engines built over the stages"});
    r->total.push_back({"hooks.installed",
                        static_cast<double>(run.strategy.model().hooks_installed()), "count",
                        "hooks on the module after the last stage"});
    r->total.push_back({"hooks.per_engine",
                        static_cast<double>(run.strategy.model().hooks_per_engine()), "count",
                        "hooks one engine registers"});
    return run.strategy.gather_full_parameters();
  }
};

}  // namespace
}  // namespace harness::scenarios

HARNESS_REGISTER_SCENARIO("engine_reuse",
                          "validate, fit and test on one sharded module: a new engine per stage, "
                          "private in-flight registries, one reused engine, or torn down between "
                          "(Lightning #17523)",
                          harness::scenarios::EngineReuse);

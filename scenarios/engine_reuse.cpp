// engine_reuse (Lightning #17523): `trainer.validate(model)` then `trainer.fit(model)` (then
// `trainer.test(model)`) with a ZeRO-3-style sharded strategy on one module. Every stage building
// a new engine costs a set-up each time and piles up hooks on the module; with per-engine
// in-flight registries (DeepSpeed before 0.9.3) the fit engine meets a unit the validate engine's
// prefetch left INFLIGHT and fails. Variants: the engine policies of ShardedStrategy.
#include <ATen/core/Tensor.h>

#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "harness/errors.h"
#include "harness/instrument/sim/sim_device.h"
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
    const TrainingPreset preset = training_preset(ctx.options, Presets::WithLlama);
    refuse_computing_at_full_size(ctx, preset);
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
    result.config["strategy"] = strategy_description(preset);

    // The reference: fit alone, on a fresh module (outside every window).
    const Trained fit_only = train(ctx, preset, EnginePolicy::Reuse, nullptr, {});
    VariantRunner runner(ctx, result.name, variant_names(ctx.options));
    for (EnginePolicy policy : kPolicies) {
      const std::string name = runtime::to_string(policy);
      if (!ctx.wants_variant(name)) continue;
      result.variants.push_back(runner.run(
          name,
          [&](VariantResult& r) {
            r.axes = {{"engines", name}};
            const Trained trained =
                train(ctx, preset, policy, &r, {Stage::Validate, Stage::Fit, Stage::Test});
            r.total.push_back({"hooks.left_behind",
                               static_cast<double>(trained.hooks_on_module -
                                                   fit_only.hooks_on_module),
                               "count",
                               "hooks on the module after the last stage beyond what fit alone "
                               "leaves (the other stages' engines' hooks)"});
            r.correctness = compare(trained, fit_only, ctx.rank);
          },
          expected_failure_of(policy)));
    }
    return result;
  }

 private:
  // What a run leaves behind, to compare with fit alone's.
  struct Trained {
    std::string parameters;       // the full parameters, gathered (raw bytes)
    std::string optimizer_state;  // this rank's optimizer state (raw bytes, in state order)
    // Each engine's hooks on the module ("<kind> on '<module>'", in registration order), by the
    // engine's name.
    std::map<std::string, std::vector<std::string>> hooks_by_engine;
    int64_t hooks_on_module = 0;
  };

  // Runs `stages` (fit alone when empty) on one trainer and module; with `r`, measures them.
  static Trained train(RunContext& ctx, const TrainingPreset& preset, EnginePolicy policy,
                       VariantResult* r, const std::vector<Stage>& stages) {
    runtime::ShardedOptions options;
    options.setup = runtime::ShardedSetup::FullThenShard;
    options.engines = policy;
    options.deepspeed_optimizer_setup = true;  // the engines of #17523 are DeepSpeed's
    ShardedRun run(ctx, preset, options, preset.steps_before);
    run.build_model();
    if (r == nullptr) {
      run.trainer.fit(*run.model);
      return trained(run);
    }
    const bool launches = ctx.instrument.measures_launches();
    const bool available = ctx.instrument.available();
    Counts apart;  // stage set-ups and evaluation passes
    std::optional<StepWindow> window;
    std::vector<std::pair<Stage, int64_t>> hooks_after;  // hooks on the module after each stage
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
      hooks_after.emplace_back(stage,
                               static_cast<int64_t>(run.strategy.model().hooks().size()));
    }
    if (!window) throw std::logic_error("engine_reuse runs a fit stage");
    add_phases(*r, apart, launches, available);
    const runtime::ShardedModel& sharded = run.strategy.model();
    const auto count = [](int64_t n) { return static_cast<double>(n); };
    r->total.push_back({"engines.built", count(run.strategy.engines_built()), "count",
                        "engines built over the stages"});
    r->total.push_back({"hooks.registered", count(sharded.hooks_registered()), "count",
                        "hooks the engines registered on the module over the stages"});
    r->total.push_back({"hooks.removed", count(sharded.hooks_removed()), "count",
                        "hooks removed from the module (engines torn down)"});
    r->total.push_back({"hooks.installed", count(static_cast<int64_t>(sharded.hooks().size())),
                        "count", "hooks on the module after the last stage"});
    r->total.push_back({"hooks.calls", count(sharded.hook_calls()), "count",
                        "hooks run over the stages (every hook on the module runs on every "
                        "forward, whichever engine registered it)"});
    for (const auto& [stage, hooks] : hooks_after) {
      r->total.push_back({"hooks.after_" + std::string(to_string(stage)), count(hooks), "count",
                          "hooks on the module when the " + std::string(to_string(stage)) +
                              " stage ends"});
    }
    return trained(run);
  }

  static Trained trained(ShardedRun& run) {
    Trained out;
    // Under --compute shapes there are no values to compare (and at full size the host could
    // not hold them): the hooks only.
    if (!sim::computes_shapes_only()) {
      out.parameters = raw_bytes(run.strategy.gather_full_parameters());
      std::vector<at::Tensor> state;
      run.trainer.optimizer()->for_each_state_tensor(
          [&](const std::string&, at::Tensor& value) { state.push_back(value); });
      out.optimizer_state = raw_bytes(state);
    }
    const runtime::ShardedModel& sharded = run.strategy.model();
    for (const runtime::ModuleHook& hook : sharded.hooks()) {
      out.hooks_by_engine[hook.engine->name()].push_back(std::string(runtime::to_string(hook.kind)) +
                                                 " on '" + hook.module + "'");
    }
    out.hooks_on_module = static_cast<int64_t>(sharded.hooks().size());
    return out;
  }

  // Parameters and optimizer state bitwise equal to fit alone's, and every engine's hooks on the
  // module the same as fit alone's engine's (more engines are counted, not wrong).
  static Correctness compare(const Trained& got, const Trained& want, int rank) {
    std::vector<std::string> wrong;
    if (got.parameters != want.parameters) wrong.push_back("parameters");
    if (got.optimizer_state != want.optimizer_state) wrong.push_back("optimizer state");
    if (want.hooks_by_engine.size() != 1) throw std::logic_error("fit alone runs one engine");
    const std::vector<std::string>& reference = want.hooks_by_engine.begin()->second;
    for (const auto& [engine, hooks] : got.hooks_by_engine) {
      if (hooks != reference) wrong.push_back("hooks of engine '" + engine + "'");
    }
    const std::string checked = "rank " + std::to_string(rank) +
                                ": parameters, optimizer state and the hooks of each of the " +
                                std::to_string(got.hooks_by_engine.size()) +
                                " engine(s) on the module";
    if (wrong.empty()) return {true, true, checked + " equal to fit alone's"};
    std::string detail = checked + "; differ from fit alone's: ";
    for (size_t i = 0; i < wrong.size(); ++i) detail += (i ? ", " : "") + wrong[i];
    return {true, false, detail};
  }
};

}  // namespace
}  // namespace harness::scenarios

HARNESS_REGISTER_SCENARIO("engine_reuse",
                          "validate, fit and test on one sharded module: a new engine per stage, "
                          "private in-flight registries, one reused engine, or torn down between "
                          "(Lightning #17523)",
                          harness::scenarios::EngineReuse);

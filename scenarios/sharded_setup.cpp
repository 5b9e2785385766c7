// sharded_setup (Lightning #8722, which led to `configure_model`): a sharded model built whole on
// every rank before it is sharded costs every rank the full model in host memory and, moved to the
// device whole, in device memory too. Variants: the three set-up paths of ShardedStrategy.
#include <ATen/core/Tensor.h>

#include <optional>
#include <string>
#include <vector>

#include "harness/errors.h"
#include "harness/instrument/sim/sim_device.h"
#include "harness/measure.h"
#include "harness/variant_runner.h"
#include "scenarios/sharded_run.h"

namespace harness::scenarios {
namespace {

using runtime::ShardedSetup;

constexpr ShardedSetup kSetups[] = {ShardedSetup::FullThenShard, ShardedSetup::MetaInit,
                                    ShardedSetup::Rank0Broadcast};

class ShardedSetupScenario final : public Scenario {
 public:
  int default_world_size() const override { return 2; }

  std::vector<std::string> variant_names(const RunOptions&) const override {
    std::vector<std::string> names;
    for (ShardedSetup s : kSetups) names.emplace_back(runtime::to_string(s));
    return names;
  }

  ScenarioResult run(RunContext& ctx) override {
    require_ranks(ctx, "sharded_setup");
    const TrainingPreset preset = training_preset(ctx.options, Presets::WithLargeAndLlama);
    refuse_computing_at_full_size(ctx, preset);
    const int64_t n = preset.steps_before;
    ScenarioResult result;
    result.name = "sharded_setup";
    result.description = "setting up a sharded (ZeRO-3 / FSDP) model three ways";
    result.measured_window =
        "the set-up (model construction: phase setup.model; sharding and the engine with its "
        "optimizer: phase setup), then training steps 1.." +
        std::to_string(n);
    result.config = preset.describe();
    result.config.erase("steps_before_checkpoint");
    describe_ranks(result, ctx);
    result.config["parameter_bytes"] = std::to_string(4 * preset.parameter_count());  // float32
    result.config["strategy"] = strategy_description(preset);

    std::optional<std::string> first_trained;
    std::string first_name;
    VariantRunner runner(ctx, result.name, variant_names(ctx.options));
    for (ShardedSetup setup : kSetups) {
      const std::string name = runtime::to_string(setup);
      if (!ctx.wants_variant(name)) continue;
      result.variants.push_back(runner.run(name, [&](VariantResult& r) {
        r.axes = {{"setup", name}};
        runtime::ShardedOptions options;
        options.setup = setup;
        options.init_seed = preset.seed();
        ShardedRun run(ctx, preset, options, n);
        const Counts setup_counts = count_apart(ctx.instrument, [&] {
          run.build_model();
          run.trainer.setup(*run.model, runtime::Stage::Fit);
        });
        // Under --compute shapes there are no values to check (and at full size the host
        // could not hold the gathered model).
        const bool values = !sim::computes_shapes_only();
        std::vector<at::Tensor> initial;
        if (values) initial = run.strategy.gather_full_parameters();
        StepWindow window(ctx.instrument, 0, ctx.options.instrument_overhead);
        run.trainer.add_callback(&window);
        run.trainer.fit(*run.model);
        if (window.window_steps() != n) {
          throw std::runtime_error("the window saw " + std::to_string(window.window_steps()) +
                                   " steps, expected " + std::to_string(n));
        }
        window.finish(r);
        add_phases(r, setup_counts, ctx.instrument.measures_launches(), ctx.instrument.available());
        if (!values) {
          r.correctness = {false, false, "not checked: values not computed (--compute shapes)"};
          return;
        }
        const std::vector<at::Tensor> trained = run.strategy.gather_full_parameters();
        r.correctness = check_against_single_device(ctx, preset, initial, trained, n);
        if (ctx.rank != 0 || !r.correctness.passed) return;
        // Every path starts from the same values (sim: one generator), so trains to the same.
        if (!first_trained) {
          first_trained = raw_bytes(trained);
          first_name = name;
        } else if (ctx.device.kind == runtime::DeviceKind::Sim &&
                   raw_bytes(trained) != *first_trained) {
          r.correctness = {true, false, "parameters differ from " + first_name + "'s"};
        } else if (ctx.device.kind == runtime::DeviceKind::Sim) {
          r.correctness.detail += "; bitwise equal to " + first_name + "'s";
        }
      }));
    }
    return result;
  }
};

}  // namespace
}  // namespace harness::scenarios

HARNESS_REGISTER_SCENARIO("sharded_setup",
                          "a sharded model built whole then sharded, on meta, or broadcast from "
                          "rank 0: host and device memory and copies of the set-up "
                          "(Lightning #8722)",
                          harness::scenarios::ShardedSetupScenario);

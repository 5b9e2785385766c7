// metric_sync (Lightning #12193): before Lightning 2.0 the trainer reset the metrics of ranks
// other than 0 after a load and, with fault-tolerant training on, synced every metric's states on
// every rank before each checkpoint save (by default it did not, so the other ranks' states were
// lost on resume); the fix left metric states to the strategy. Variants: that trainer in both of
// its modes and the fix, on one process, on 2 DDP ranks (rank 0's file) and on 2 ranks with
// per-rank sharded checkpoint files.
#include <ATen/core/Tensor.h>

#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "harness/errors.h"
#include "harness/measure.h"
#include "harness/runtime/checkpoint/checkpoint.h"
#include "harness/runtime/parallel/data_parallel.h"
#include "harness/runtime/mlp.h"
#include "harness/runtime/sharded/sharded_strategy.h"
#include "harness/runtime/trainer.h"
#include "harness/variant_runner.h"
#include "scenarios/presets.h"

namespace harness::scenarios {
namespace {

using runtime::MetricCheckpointing;

enum class Layout { World1, World2, ShardedCheckpoint };
const char* layout_name(Layout l) {
  return l == Layout::World1 ? "world1" : l == Layout::World2 ? "world2" : "sharded_checkpoint";
}

struct Variant {
  Layout layout;
  MetricCheckpointing policy;
  std::string name() const {
    return std::string(layout_name(layout)) + "/" + runtime::to_string(policy);
  }
};

// Ranked variants first: the one-process ones run on rank 0 alone, after the others are done.
constexpr Layout kLayouts[] = {Layout::World2, Layout::ShardedCheckpoint, Layout::World1};
constexpr MetricCheckpointing kMetricPolicies[] = {MetricCheckpointing::TrainerDefault,
                                             MetricCheckpointing::TrainerFaultTolerant,
                                             MetricCheckpointing::StrategyOwned};

std::vector<Variant> all_variants() {
  std::vector<Variant> out;
  for (Layout layout : kLayouts) {
    for (MetricCheckpointing policy : kMetricPolicies) out.push_back({layout, policy});
  }
  return out;
}

// What the metrics compute at the end of a run (synced over the ranks, as compute() does).
struct Final {
  double mean_loss = 0, count = 0, batch_mae = 0;
};

class MetricSync final : public Scenario {
 public:
  int default_world_size() const override { return 2; }

  std::vector<std::string> variant_names(const RunOptions&) const override {
    std::vector<std::string> names;
    for (const Variant& v : all_variants()) names.push_back(v.name());
    return names;
  }

  ScenarioResult run(RunContext& ctx) override {
    require_ranks(ctx, "metric_sync");
    const TrainingPreset preset = training_preset(ctx.options);
    const int64_t k = preset.steps_before;
    ScenarioResult result;
    result.name = "metric_sync";
    result.description =
        "who checkpoints metric states: the trainer (sync on save) or the strategy";
    result.measured_window = "training steps 1.." + std::to_string(2 * k) +
                             " with a checkpoint "
                             "saved every " +
                             std::to_string(k) +
                             " (phases checkpoint.*; "
                             "total.save.* per save)";
    result.config = preset.describe();
    result.config.erase("steps_before_checkpoint");
    result.config["measured_steps"] = std::to_string(2 * k);
    result.config["saves"] = "2 (per-save figures: divided by the saves counted)";
    result.config["metrics"] = "mean_loss (2 scalar sum states), batch_mae (1 cat list state)";
    describe_ranks(result, ctx);
    result.tables.push_back(
        {"per checkpoint save, on rank 0 (the merged variants sum the ranks: total.save.*)",
         {"variant", "collectives", "syncs", "H2D", "D2H", "launches", "resume correct"},
         {}});

    VariantRunner runner(ctx, result.name, variant_names(ctx.options));
    for (const Variant& variant : all_variants()) {
      const std::string name = variant.name();
      if (!ctx.wants_variant(name)) continue;
      const bool alone = variant.layout == Layout::World1;
      if (alone && ctx.rank != 0) continue;  // rank 0 runs the one-process variants by itself
      result.variants.push_back(runner.run(name, [&](VariantResult& r) {
        r.axes = {{"layout", layout_name(variant.layout)},
                  {"metric_checkpointing", runtime::to_string(variant.policy)}};
        if (alone) r.axes["ranks"] = "1";
        run_variant(ctx, preset, variant, r);
      }));
      if (ctx.rank == 0) add_table_row(result.tables.front(), result.variants.back());
    }
    return result;
  }

 private:
  static void run_variant(RunContext& ctx, const TrainingPreset& preset, const Variant& variant,
                          VariantResult& r) {
    const int64_t k = preset.steps_before;
    // DDP ranks resume from rank 0's file: the directory is rank 0's.
    const std::string dir = ctx.shared_dir + "/metric_sync/" + variant.name();
    runtime::create_checkpoint_directory(dir);
    // Run A: uninterrupted, saving every K steps, measured.
    Final uninterrupted;
    {
      Run run(ctx, preset, variant, 2 * k);
      runtime::CheckpointCallback save(dir, k);
      run.trainer.add_callback(&save);  // before the window: saves are inside measured steps
      StepWindow window(ctx.instrument, 0, ctx.options.instrument_overhead);
      run.trainer.add_callback(&window);
      run.trainer.fit(run.model);
      window.finish(r);
      uninterrupted = run.final_values();
    }
    // Per save: everything the checkpoint phases cost, divided by the saves counted (the
    // instrumented steps that saved; with --instrument-overhead, every second step is not).
    const std::vector<double>* save_times = find_samples(r, "samples.phase[checkpoint.save].time");
    const size_t saves = save_times ? save_times->size() : 0;
    r.total.push_back({"saves.counted", static_cast<double>(saves), "count",
                       "checkpoint saves in instrumented steps (what total.save.* divides by)"});
    for (const char* what :
         {"collective.count", "sync.count", "h2d.count", "d2h.count", "launch.count"}) {
      double sum = 0;
      bool measured = false;
      for (const auto& [phase, values] : r.phases) {
        if (phase.rfind("checkpoint.", 0) != 0) continue;
        for (const Measurement& m : values) {
          if (m.name == what && m.value) {
            sum += *m.value;
            measured = true;
          }
        }
      }
      r.total.push_back(
          {std::string("save.") + what,
           measured && saves > 0 ? std::optional<double>(sum / static_cast<double>(saves))
                                 : std::nullopt,
           "count", std::string("per checkpoint save: ") + what + " of the checkpoint.* phases"});
    }
    // Run B: resumed from the step-K checkpoint, to the same end.
    Run resumed(ctx, preset, variant, 2 * k);
    resumed.trainer.fit(resumed.model, runtime::CheckpointCallback(dir, k).path_for(k));
    r.correctness = compare(uninterrupted, resumed.final_values(), ctx.rank);
  }

  struct Run {
    Run(RunContext& ctx, const TrainingPreset& preset, const Variant& variant, int64_t steps)
        : comm(variant.layout == Layout::World1 ? nullptr : ctx.comm),
          model(with_metrics(preset), runtime::AdamOptions{}),
          data(preset.data(ctx.device.kind)),
          strategy(make_strategy(ctx, variant)),
          trainer(*strategy, data, {steps, 2, variant.policy}) {}

    static runtime::MlpConfig with_metrics(const TrainingPreset& preset) {
      runtime::MlpConfig c = preset.model();
      c.metrics = true;
      return c;
    }

    std::unique_ptr<runtime::Strategy> make_strategy(RunContext& ctx, const Variant& variant) {
      if (variant.layout == Layout::World1) {
        return std::make_unique<runtime::SingleDeviceStrategy>(ctx.rank_device(),
                                                               runtime::RestorePolicy::Rebuild);
      }
      if (variant.layout == Layout::World2) {
        return std::make_unique<runtime::DataParallelStrategy>(*comm, ctx.rank_device());
      }
      runtime::ShardedOptions o;
      o.checkpoint = runtime::ShardedCheckpoint::PerRank;
      return std::make_unique<runtime::ShardedStrategy>(*comm, ctx.rank_device(), o);
    }

    Final final_values() {
      Final f;
      std::vector<runtime::Metric*> metrics = model.metrics();
      for (runtime::Metric* m : metrics) m->sync(comm);
      f.mean_loss = metrics[0]->compute().item<double>();
      f.count = metrics[0]->state_dict()[1].second.item<double>();
      f.batch_mae = metrics[1]->compute().item<double>();
      for (runtime::Metric* m : metrics) m->unsync();
      return f;
    }

    runtime::Communicator* comm;
    runtime::MlpRegression model;
    runtime::SyntheticRegressionData data;
    std::unique_ptr<runtime::Strategy> strategy;
    runtime::Trainer trainer;
  };

  static Correctness compare(const Final& want, const Final& got, int rank) {
    auto close = [](double a, double b) {
      return std::abs(a - b) <= 1e-6 * std::max(1.0, std::abs(a));
    };
    const bool ok = got.count == want.count && close(want.mean_loss, got.mean_loss) &&
                    close(want.batch_mae, got.batch_mae);
    char detail[320];
    std::snprintf(detail, sizeof detail,
                  "rank %d, after resuming: rows counted %.0f (uninterrupted %.0f), mean_loss "
                  "%.9g (%.9g), batch_mae %.9g (%.9g)%s",
                  rank, got.count, want.count, got.mean_loss, want.mean_loss, got.batch_mae,
                  want.batch_mae,
                  ok                       ? ""
                  : got.count > want.count ? ": states counted twice"
                  : got.count < want.count ? ": states lost"
                                           : ": as many rows, other values: some rank's states "
                                             "stood in for another's");
    return {true, ok, detail};
  }

  static void add_table_row(ResultTable& table, const VariantResult& v) {
    std::vector<std::string> row = {v.name};
    for (const char* what : {"save.collective.count", "save.sync.count", "save.h2d.count",
                             "save.d2h.count", "save.launch.count"}) {
      const Measurement* m = find_metric(v, std::string("total.") + what);
      row.push_back(m && m->value ? std::to_string(static_cast<int64_t>(*m->value)) : "-");
    }
    row.push_back(!v.ran ? "failed" : v.correctness.passed ? "yes" : "NO");
    table.rows.push_back(std::move(row));
  }
};

}  // namespace
}  // namespace harness::scenarios

HARNESS_REGISTER_SCENARIO("metric_sync",
                          "metric states on checkpoint: synced by the trainer on every save, or "
                          "left to the strategy (Lightning #12193)",
                          harness::scenarios::MetricSync);

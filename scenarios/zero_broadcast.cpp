// zero_broadcast (PyTorch PR #60285): ZeRO-1 consolidates the sharded optimizer state onto one
// rank before a checkpoint. Doing it with the generic broadcast_object_list instead of ZeRO's own
// _broadcast_object made it 3x slower: more `.item()` syncs per object, and the unpickled tensors
// land on the sender's device, so they are created on, and copied from, another rank's device.
//
// Variants, each on every rank of a DDP + ZeRO-1 run of the MLP (N warm-up steps first):
//   consolidate/<object_list|object|tensor>: the measured window is N consolidations onto rank 0
//     ("per step" = per consolidation); correct when rank 0's consolidated state equals, bitwise,
//     what each rank held.
//   param_broadcast/<per_param|bucketed>: the measured window is N training steps, whose
//     optimizer step ends with the updated parameters broadcast from their owners; correct when
//     every rank ends with bitwise the same parameters.
#include <torch/csrc/jit/serialization/pickle.h>

#include <ATen/ops/equal.h>

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/errors.h"
#include "harness/instrument/phase.h"
#include "harness/measure.h"
#include "harness/runtime/checkpoint/checkpoint.h"
#include "harness/runtime/parallel/data_parallel.h"
#include "harness/runtime/dist/communicator.h"
#include "harness/runtime/mlp.h"
#include "harness/runtime/trainer.h"
#include "harness/runtime/parallel/zero.h"
#include "harness/scenario.h"
#include "harness/variant_runner.h"
#include "scenarios/presets.h"

namespace harness::scenarios {
namespace {

using runtime::Consolidation;
using runtime::ParamBroadcast;

constexpr Consolidation kConsolidations[] = {Consolidation::ObjectList, Consolidation::Object,
                                             Consolidation::Tensor};
constexpr ParamBroadcast kBroadcasts[] = {ParamBroadcast::PerParameter, ParamBroadcast::Bucketed};

std::string consolidate_name(Consolidation how) {
  return std::string("consolidate/") + runtime::to_string(how);
}
std::string broadcast_name(ParamBroadcast mode) {
  return std::string("param_broadcast/") + runtime::to_string(mode);
}

std::string as_string(const std::vector<char>& bytes) { return {bytes.begin(), bytes.end()}; }
std::vector<char> as_bytes(const std::string& s) { return {s.begin(), s.end()}; }

// A DDP + ZeRO-1 training set-up on this rank's device.
struct ZeroRun {
  ZeroRun(RunContext& ctx, const TrainingPreset& preset, ParamBroadcast mode,
             int64_t max_steps)
      : model(preset.model(), runtime::AdamOptions{}),
        data(preset.data(ctx.device.kind)),
        strategy(*ctx.comm, ctx.rank_device(),
                 runtime::DataParallelOptions{25 * 1024 * 1024, runtime::AdamOptions{}, mode}),
        trainer(strategy, data, {max_steps, 2}) {}

  runtime::ZeroRedundancyOptimizer& zero() {
    return dynamic_cast<runtime::ZeroRedundancyOptimizer&>(*trainer.optimizer());
  }

  runtime::MlpRegression model;
  runtime::SyntheticRegressionData data;
  runtime::DataParallelStrategy strategy;
  runtime::Trainer trainer;
};

class ZeroBroadcast final : public Scenario {
 public:
  int default_world_size() const override { return 2; }

  std::vector<std::string> variant_names(const RunOptions&) const override {
    std::vector<std::string> names;
    for (Consolidation how : kConsolidations) names.push_back(consolidate_name(how));
    for (ParamBroadcast mode : kBroadcasts) names.push_back(broadcast_name(mode));
    return names;
  }

  ScenarioResult run(RunContext& ctx) override {
    require_ranks(ctx, "zero_broadcast");
    const TrainingPreset preset = training_preset(ctx.options);
    const int64_t n = preset.steps_before;
    ScenarioResult result;
    result.name = "zero_broadcast";
    result.description =
        "ZeRO-1 state consolidation and parameter broadcast, by way of broadcasting";
    result.measured_window = std::to_string(n) + " consolidations onto rank 0 (consolidate/*), " +
                             "or training steps " + std::to_string(n + 1) + ".." +
                             std::to_string(2 * n) + " (param_broadcast/*)";
    result.config = preset.describe();
    describe_ranks(result, ctx);
    result.config["optimizer"] = "Adam (foreach), sharded by ZeRO-1";

    VariantRunner runner(ctx, result.name, variant_names(ctx.options));
    for (Consolidation how : kConsolidations) {
      const std::string name = consolidate_name(how);
      if (!ctx.wants_variant(name)) continue;
      result.variants.push_back(runner.run(name, [&](VariantResult& r) {
        r.axes = {{"phase", "consolidate"}, {"method", runtime::to_string(how)}};
        run_consolidation(ctx, preset, how, name, r);
      }));
    }
    for (ParamBroadcast mode : kBroadcasts) {
      const std::string name = broadcast_name(mode);
      if (!ctx.wants_variant(name)) continue;
      result.variants.push_back(runner.run(name, [&](VariantResult& r) {
        r.axes = {{"phase", "param_broadcast"}, {"method", runtime::to_string(mode)}};
        run_param_broadcast(ctx, preset, mode, name, r);
      }));
    }
    return result;
  }

 private:
  static void run_consolidation(RunContext& ctx, const TrainingPreset& preset, Consolidation how,
                                const std::string& name, VariantResult& r) {
    ZeroRun run(ctx, preset, ParamBroadcast::PerParameter, preset.steps_before);
    run.trainer.fit(run.model);  // N warm-up steps: every shard has Adam state
    runtime::ZeroRedundancyOptimizer& zero = run.zero();
    StepWindow window(ctx.instrument, run.trainer.global_step(), ctx.options.instrument_overhead);
    for (int64_t i = 0; i < preset.steps_before; ++i) {
      window.on_train_step_start(run.trainer, run.trainer.global_step() + 1);
      {
        Phase phase("checkpoint.consolidate");
        zero.consolidate_state_dict(how, /*to=*/0);
      }
      window.on_train_step_end(run.trainer, run.trainer.global_step() + 1);
    }
    window.finish(r);

    // Outside the window: every rank publishes what it holds; rank 0 compares.
    const std::string key = "check/" + name + "/rank";
    ctx.comm->store_set(key + std::to_string(ctx.rank),
                        as_string(runtime::pickle_optimizer_state(zero.local_state_dict())));
    if (ctx.rank != 0) {
      r.correctness = {false, false, "checked on rank 0"};
      return;
    }
    const runtime::OptimizerStateDict consolidated = zero.state_dict();
    int64_t tensors = 0;
    std::string mismatch;
    for (int rank = 0; rank < ctx.comm->world_size() && mismatch.empty(); ++rank) {
      const runtime::OptimizerStateDict held = runtime::unpickle_optimizer_state(
          as_bytes(ctx.comm->store_get(key + std::to_string(rank))), c10::Device(c10::kCPU));
      for (const auto& [index, entries] : held.state) {
        auto it = consolidated.state.find(index);
        for (const auto& [k, tensor] : entries) {
          ++tensors;
          if (it == consolidated.state.end() || !it->second.count(k) ||
              !at::equal(it->second.at(k), tensor)) {
            mismatch = "rank " + std::to_string(rank) + " parameter " + std::to_string(index) +
                       " '" + k + "' differs";
            break;
          }
        }
      }
    }
    const bool ok = mismatch.empty() && tensors > 0;
    r.correctness = {true, ok,
                     ok ? "consolidated state equals every rank's shard bitwise (" +
                              std::to_string(tensors) + " tensors from " +
                              std::to_string(ctx.comm->world_size()) + " ranks)"
                        : (mismatch.empty() ? "no state to compare" : mismatch)};
  }

  static void run_param_broadcast(RunContext& ctx, const TrainingPreset& preset,
                                  ParamBroadcast mode, const std::string& name,
                                  VariantResult& r) {
    ZeroRun run(ctx, preset, mode, 2 * preset.steps_before);
    StepWindow window(ctx.instrument, preset.steps_before, ctx.options.instrument_overhead);
    run.trainer.add_callback(&window);
    run.trainer.fit(run.model);
    if (window.window_steps() != preset.steps_before) {
      throw std::runtime_error("the window saw " + std::to_string(window.window_steps()) + " steps, expected " +
                               std::to_string(preset.steps_before));
    }
    window.finish(r);

    c10::List<at::Tensor> params;
    for (const at::Tensor& p : run.model.parameters()) params.push_back(p.detach().cpu());
    const std::string mine = as_string(torch::jit::pickle_save(params));
    const std::string key = "check/" + name + "/rank";
    ctx.comm->store_set(key + std::to_string(ctx.rank), mine);
    if (ctx.rank != 0) {
      r.correctness = {false, false, "checked on rank 0"};
      return;
    }
    std::string differs;
    for (int rank = 1; rank < ctx.comm->world_size(); ++rank) {
      if (ctx.comm->store_get(key + std::to_string(rank)) != mine) {
        differs += (differs.empty() ? "" : ", ") + std::to_string(rank);
      }
    }
    r.correctness = {true, differs.empty(),
                     differs.empty() ? "parameters bitwise equal on all " +
                                           std::to_string(ctx.comm->world_size()) + " ranks"
                                     : "parameters differ from rank 0's on rank(s) " + differs};
  }
};

}  // namespace
}  // namespace harness::scenarios

HARNESS_REGISTER_SCENARIO("zero_broadcast",
                          "ZeRO-1: consolidating sharded optimizer state and broadcasting "
                          "parameters, three ways (PyTorch #60285)",
                          harness::scenarios::ZeroBroadcast);

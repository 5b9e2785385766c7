#include "scenarios/sharded_run.h"

#include <c10/core/GradMode.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "harness/errors.h"

#include "harness/instrument/phase.h"
#include "harness/instrument/sim/sim_device.h"

namespace harness::scenarios {

ShardedRun::ShardedRun(RunContext& context, const TrainingPreset& p, runtime::ShardedOptions o,
                       int64_t max_steps)
    : ShardedRun(context, p, std::move(o), runtime::TrainerConfig{max_steps, 2}) {}

ShardedRun::ShardedRun(RunContext& context, const TrainingPreset& p, runtime::ShardedOptions o,
                       runtime::TrainerConfig trainer_config)
    : ctx(context),
      preset(p),
      options(with_compute_dtype(std::move(o), p)),
      data(p.make_data(context.device.kind)),
      strategy(*context.comm, context.rank_device(), options),
      trainer(strategy, *data, trainer_config) {}

runtime::ShardedOptions ShardedRun::with_compute_dtype(runtime::ShardedOptions options,
                                                       const TrainingPreset& preset) {
  if (preset.llama) options.compute_dtype = preset.compute_dtype;
  return options;
}

void ShardedRun::build_model() {
  Phase phase("setup.model");
  model = preset.make_module(runtime::builds_on_host(options.setup, ctx.rank),
                             /*values=*/!sim::computes_shapes_only(), options.adam);
}

std::string strategy_description(const TrainingPreset& preset) {
  if (!preset.llama) return "sharded (one flat parameter per Linear unit), Adam (foreach)";
  return "sharded (one flat parameter per layer: the embedding, each block, the head; gathered in " +
         std::string(c10::toString(preset.compute_dtype)) +
         ", gradients reduced in Float), Adam (foreach)";
}

void refuse_computing_at_full_size(const RunContext& ctx, const TrainingPreset& preset) {
  if (preset.name != "llama3_8b" || ctx.device.kind != runtime::DeviceKind::Sim ||
      sim::computes_shapes_only()) {
    return;
  }
  throw InputError("--preset llama3_8b on sim computes 8.03B parameters on this host (about 32 GB "
                   "a rank before the optimizer): run it with --compute shapes, which counts the "
                   "same without computing (docs/full-size.md)");
}

Counts count_apart(Instrument& instrument, const std::function<void()>& body) {
  instrument.take();  // nothing of before
  {
    Counting on(instrument);
    body();
    // The body's device work done before counting stops (uncounted), so that no late record of
    // it lands in the next window.
    instrument.drain();
  }
  return instrument.take();
}

std::string raw_bytes(const std::vector<at::Tensor>& tensors) {
  std::string out;
  for (const at::Tensor& t : tensors) {
    const at::Tensor host = t.cpu().contiguous();
    out.append(static_cast<const char*>(host.const_data_ptr()), host.nbytes());
  }
  return out;
}

Correctness check_against_single_device(RunContext& ctx, const TrainingPreset& preset,
                                        const std::vector<at::Tensor>& initial,
                                        const std::vector<at::Tensor>& trained, int64_t steps,
                                        int64_t accumulate_grad_batches) {
  if (ctx.rank != 0) return {false, false, "checked on rank 0"};
  const std::unique_ptr<runtime::TrainModule> module = preset.make_module(/*on_host=*/true);
  runtime::TrainModule& reference = *module;
  std::vector<at::Tensor> params = reference.parameters();
  if (params.size() != initial.size()) return {true, false, "parameter lists differ in length"};
  {
    c10::AutoGradMode no_grad(false);
    for (size_t i = 0; i < params.size(); ++i) params[i].copy_(initial[i]);
  }
  const std::unique_ptr<runtime::DataSource> data = preset.make_data(ctx.device.kind);
  runtime::SingleDeviceStrategy strategy(ctx.rank_device(), runtime::RestorePolicy::Rebuild);
  runtime::TrainerConfig config{steps, 2};
  config.accumulate_grad_batches = accumulate_grad_batches;
  runtime::Trainer trainer(strategy, *data, config);
  trainer.fit(reference);
  double worst = 0;
  params = reference.parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    worst = std::max(worst, (params[i].cpu() - trained[i]).abs().max().item<double>());
  }
  char detail[160];
  std::snprintf(detail, sizeof detail,
                "parameters after %lld steps within %.1e of single-device training from the same "
                "initial values (max abs diff %.2e)",
                static_cast<long long>(steps), 1e-5, worst);
  return {true, worst < 1e-5, detail};
}

}  // namespace harness::scenarios

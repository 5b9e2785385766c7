#include "scenarios/sharded_run.h"

#include <c10/core/GradMode.h>

#include <algorithm>
#include <cstdio>

#include "harness/instrument/phase.h"

namespace harness::scenarios {

ShardedRun::ShardedRun(RunContext& context, const TrainingPreset& p, runtime::ShardedOptions o,
                       int64_t max_steps)
    : ShardedRun(context, p, std::move(o), runtime::TrainerConfig{max_steps, 2}) {}

ShardedRun::ShardedRun(RunContext& context, const TrainingPreset& p, runtime::ShardedOptions o,
                       runtime::TrainerConfig trainer_config)
    : ctx(context),
      preset(p),
      options(std::move(o)),
      data(p.data(context.device.kind)),
      strategy(*context.comm, context.rank_device(), options),
      trainer(strategy, data, trainer_config) {}

void ShardedRun::build_model() {
  Phase phase("setup.model");
  runtime::MlpConfig config = preset.model();
  config.materialize = runtime::builds_on_host(options.setup, ctx.rank);
  model.emplace(config, options.adam);
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
  runtime::MlpRegression reference(preset.model(), runtime::AdamOptions{});
  std::vector<at::Tensor> params = reference.parameters();
  if (params.size() != initial.size()) return {true, false, "parameter lists differ in length"};
  {
    c10::AutoGradMode no_grad(false);
    for (size_t i = 0; i < params.size(); ++i) params[i].copy_(initial[i]);
  }
  runtime::SyntheticRegressionData data(preset.data(ctx.device.kind));
  runtime::SingleDeviceStrategy strategy(ctx.rank_device(), runtime::RestorePolicy::Rebuild);
  runtime::TrainerConfig config{steps, 2};
  config.accumulate_grad_batches = accumulate_grad_batches;
  runtime::Trainer trainer(strategy, data, config);
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

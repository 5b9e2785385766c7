#include "harness/runtime/trainer.h"

#include <ATen/ops/zeros.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/autograd.h>

#include "harness/instrument/phase.h"
#include "harness/interrupt.h"
#include "harness/runtime/dist/communicator.h"
#include "harness/instrument/site.h"

namespace harness::runtime {

const char* to_string(MetricCheckpointing policy) {
  switch (policy) {
    case MetricCheckpointing::StrategyOwned: return "strategy_owned";
    case MetricCheckpointing::TrainerDefault: return "trainer_default";
    case MetricCheckpointing::TrainerFaultTolerant: return "trainer_fault_tolerant";
  }
  return "?";
}

const char* to_string(GradientSync sync) {
  switch (sync) {
    case GradientSync::LastMicroBatch: return "sync_last";
    case GradientSync::EveryMicroBatch: return "sync_every";
  }
  return "?";
}

void CheckpointCallback::on_train_step_end(Trainer& trainer, int64_t step) {
  if (every_n_steps_ > 0 && step % every_n_steps_ == 0) trainer.save_checkpoint(path_for(step));
}

std::string CheckpointCallback::path_for(int64_t step) const {
  return directory_ + "/step=" + std::to_string(step) + ".ckpt";
}

Trainer::Trainer(Strategy& strategy, const DataSource& data, TrainerConfig config)
    : strategy_(strategy), data_(data), config_(config) {
  TORCH_CHECK(config_.accumulate_grad_batches >= 1, "accumulate_grad_batches must be >= 1, not ",
              config_.accumulate_grad_batches);
}

void Trainer::setup(TrainModule& module, Stage stage) {
  Phase phase("setup");
  if (module_ != &module) {
    strategy_.setup_module(module);
    for (Metric* m : module.metrics()) m->to(strategy_.root_device());
    optimizer_ = strategy_.setup_optimizer(module);  // after the model is on its device
    module_ = &module;
  }
  strategy_.begin_stage(module, stage, optimizer_);
  prepared_ = stage;
}

void Trainer::setup_unless_prepared(TrainModule& module, Stage stage) {
  if (!(module_ == &module && prepared_ == stage)) setup(module, stage);
  prepared_.reset();
}

void Trainer::fit(TrainModule& module, const std::optional<std::string>& ckpt_path) {
  setup_unless_prepared(module, Stage::Fit);
  TORCH_CHECK(optimizer_ != nullptr, "the strategy set up no optimizer for fit");
  if (ckpt_path) {
    Phase phase("checkpoint.load");
    const Checkpoint ckpt = strategy_.load_checkpoint_from(*ckpt_path);
    strategy_.restore_checkpoint(ckpt, module, *optimizer_);
    Communicator* comm = strategy_.communicator();
    if (config_.metric_checkpointing != MetricCheckpointing::StrategyOwned && comm &&
        comm->rank() != 0) {
      for (Metric* m : module.metrics()) m->reset();  // rank 0 holds the synced states
    }
    global_step_ = ckpt.global_step;
  }
  module.module().train();
  while (global_step_ < config_.max_steps) train_step(module);
}

void Trainer::train_step(TrainModule& module) {
  throw_if_stopped();  // SIGINT / SIGTERM: stop between steps (interrupt.h)
  const int64_t step = global_step_ + 1;
  for (TrainerCallback* cb : callbacks_) cb->on_train_step_start(*this, step);
  {
    Phase phase("train.step");
    const int64_t micro_batches = config_.accumulate_grad_batches;
    Batch batch = load_batch(global_step_ * micro_batches);
    {
      Phase p("train.zero_grad");
      optimizer_->zero_grad(/*set_to_none=*/true);
    }
    for (int64_t m = 0; m < micro_batches; ++m) {
      if (m > 0) batch = load_batch(global_step_ * micro_batches + m);
      const bool last = m + 1 == micro_batches;
      micro_step(module, batch, last || config_.gradient_sync == GradientSync::EveryMicroBatch);
    }
    {
      Phase p("optimizer.step");
      optimizer_->step();
    }
  }
  global_step_ = step;
  for (TrainerCallback* cb : callbacks_) cb->on_train_step_end(*this, step);
}

Batch Trainer::load_batch(int64_t index) {
  Phase p("train.data");
  return strategy_.batch_to_device(data_.batch(index));
}

void Trainer::micro_step(TrainModule& module, const Batch& batch, bool sync) {
  at::Tensor loss;
  {
    Phase p("train.forward");
    loss = module.training_step(batch);
    if (config_.accumulate_grad_batches > 1) loss = loss / config_.accumulate_grad_batches;
  }
  {
    Phase p("train.backward");
    strategy_.set_gradient_sync(sync);  // a strategy that reduces inside backward (sharded)
    torch::autograd::backward({loss});
  }
  if (sync) {
    Phase p("train.grad_sync");
    strategy_.reduce_gradients(module);
  }
}

void Trainer::save_checkpoint(const std::string& path) {
  TORCH_CHECK(module_ != nullptr && optimizer_, "save_checkpoint before fit()");
  Phase phase("checkpoint.save");
  const bool trainer_syncs =
      config_.metric_checkpointing == MetricCheckpointing::TrainerFaultTolerant;
  if (trainer_syncs) {
    Phase sync("checkpoint.metric_sync");
    for (Metric* m : module_->metrics()) {
      m->set_persistent(true);
      m->sync(strategy_.communicator());
    }
  }
  strategy_.save_checkpoint_to(path, *module_, *optimizer_, global_step_);
  if (trainer_syncs) {
    for (Metric* m : module_->metrics()) m->unsync();
  }
}

double Trainer::evaluate(TrainModule& module, Stage stage, int64_t first_batch) {
  setup_unless_prepared(module, stage);
  const char* phase_name = stage == Stage::Test ? "test" : "validate";
  Phase phase(phase_name);
  module.module().eval();
  c10::AutoGradMode no_grad(false);
  at::Tensor total = at::zeros({}, at::TensorOptions().device(strategy_.root_device()));
  for (int64_t i = 0; i < config_.eval_batches; ++i) {
    Batch batch = strategy_.batch_to_device(data_.batch(first_batch + i));
    total.add_(module.validation_step(batch));
  }
  module.module().train();
  HARNESS_SITE();
  return total.item<double>() / static_cast<double>(config_.eval_batches);
}

// Evaluation batches come from far beyond the training batches' indices.
double Trainer::validate(TrainModule& module) { return evaluate(module, Stage::Validate, 1 << 20); }
double Trainer::test(TrainModule& module) { return evaluate(module, Stage::Test, 1 << 21); }

}  // namespace harness::runtime

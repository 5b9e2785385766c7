#include "harness/runtime/strategy.h"

#include <c10/core/GradMode.h>

#include <map>

#include "harness/errors.h"
#include "harness/instrument/site.h"

namespace harness::runtime {

const char* to_string(Stage stage) {
  switch (stage) {
    case Stage::Fit: return "fit";
    case Stage::Validate: return "validate";
    case Stage::Test: return "test";
  }
  return "?";
}

const char* to_string(RestorePolicy policy) {
  switch (policy) {
    case RestorePolicy::MoveAll: return "move_all";
    case RestorePolicy::KeepStep: return "keep_step";
    case RestorePolicy::Rebuild: return "rebuild";
  }
  return "?";
}

void SingleDeviceStrategy::setup_module(TrainModule& module) { module.module().to(device_); }

Batch SingleDeviceStrategy::batch_to_device(const Batch& batch) {
  // As Lightning moves batches to an accelerator: non-blocking (from pinned memory when the data
  // source pins it).
  const bool non_blocking = !device_.is_cpu();
  HARNESS_SITE();
  return {batch.input.to(device_, non_blocking), batch.target.to(device_, non_blocking)};
}

Checkpoint SingleDeviceStrategy::make_checkpoint(TrainModule& module, Optimizer& optimizer,
                                                 int64_t step) {
  Checkpoint ckpt;
  ckpt.global_step = step;
  for (const auto& item : module.module().named_parameters()) {
    ckpt.model.emplace_back(item.key(), item.value());
  }
  for (const auto& item : module.module().named_buffers()) {
    ckpt.model.emplace_back(item.key(), item.value());
  }
  ckpt.optimizer = optimizer.state_dict();
  ckpt.metrics = metric_states(module);
  return ckpt;
}

void SingleDeviceStrategy::restore_checkpoint(const Checkpoint& ckpt, TrainModule& module,
                                              Optimizer& optimizer) {
  // model.load_state_dict(strict=True): param.copy_(saved) under no_grad.
  std::map<std::string, at::Tensor> saved(ckpt.model.begin(), ckpt.model.end());
  std::map<std::string, at::Tensor> own;
  for (const auto& item : module.module().named_parameters()) own[item.key()] = item.value();
  for (const auto& item : module.module().named_buffers()) own[item.key()] = item.value();
  for (const auto& [name, _] : saved) {
    if (!own.count(name)) throw InputError("checkpoint has an unexpected model entry '" + name + "'");
  }
  c10::AutoGradMode no_grad(false);
  for (auto& [name, tensor] : own) {
    auto it = saved.find(name);
    if (it == saved.end()) throw InputError("checkpoint lacks the model entry '" + name + "'");
    if (it->second.sizes() != tensor.sizes()) {
      throw InputError("checkpoint entry '" + name + "' has shape " +
                       c10::str(it->second.sizes()) + ", the model has " + c10::str(tensor.sizes()));
    }
    tensor.copy_(it->second);
  }

  optimizer.load_state_dict(ckpt.optimizer);
  load_metric_states(module, ckpt.metrics);
  if (policy_ == RestorePolicy::Rebuild) return;
  optimizer.for_each_state_tensor([this](const std::string& key, at::Tensor& value) {
    if (policy_ == RestorePolicy::KeepStep && key == "step") return;
    HARNESS_SITE();
    value = value.to(device_);
  });
}

}  // namespace harness::runtime

#pragma once
// TrainModule: what a model brings to the trainer (in the manner of a LightningModule): its
// torch::nn::Module, a training step that returns the loss, and its optimizer.
#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "harness/runtime/metrics/metric.h"
#include "harness/runtime/optim/optimizer.h"

namespace harness::runtime {

struct Batch {
  at::Tensor input;
  at::Tensor target;
};

// What runs a module's layers in place of their own forward: a sharding engine gathers each
// layer's parameters before it runs and frees them after (ZeRO-3 and FSDP wrap a module's layers
// the same way). Installed on the module, so it outlives the strategy or engine that installed it.
class LayerRunner {
 public:
  virtual ~LayerRunner() = default;
  virtual at::Tensor forward(torch::nn::Sequential& layers, const at::Tensor& input) = 0;
};

// A layer that can run with parameters it is given (in its named_parameters order) instead of
// its own: what a sharding strategy runs a unit of several parameters with, after gathering them
// (one Linear needs none: the strategy runs its two parameters itself).
class FunctionalLayer {
 public:
  virtual ~FunctionalLayer() = default;
  virtual at::Tensor forward_with(const at::Tensor& input,
                                  const std::vector<at::Tensor>& params) const = 0;
  // The init the layer gives its parameters, in place, on any device (drawing from that device's
  // default generator).
  virtual void init_parameters(const std::vector<at::Tensor>& params) const = 0;
};

class TrainModule {
 public:
  virtual ~TrainModule() = default;
  virtual torch::nn::Module& module() = 0;
  virtual at::Tensor training_step(const Batch& batch) = 0;  // the loss, on the device
  virtual at::Tensor validation_step(const Batch& batch) { return training_step(batch); }
  // Called by the trainer after the strategy has put the model on its device.
  virtual std::unique_ptr<Optimizer> configure_optimizers() = 0;

  std::vector<at::Tensor> parameters() { return module().parameters(); }

  // The metrics its training steps update (none by default); the trainer moves them to the
  // device, the strategy checkpoints their persistent states.
  virtual std::vector<Metric*> metrics() { return {}; }

  // The layers in order, for strategies that shard layer by layer (nullptr: not supported).
  virtual torch::nn::Sequential* layers() { return nullptr; }
  // Set by a sharding strategy; nullptr: the layers run their own forward.
  void set_layer_runner(std::shared_ptr<LayerRunner> runner) { runner_ = std::move(runner); }
  const std::shared_ptr<LayerRunner>& layer_runner() const { return runner_; }

 protected:
  // The layers' forward, through the runner when one is installed.
  at::Tensor run_layers(const at::Tensor& input) {
    torch::nn::Sequential* seq = layers();
    TORCH_CHECK(seq != nullptr, "this module has no layers to run");
    return runner_ ? runner_->forward(*seq, input) : (*seq)->forward(input);
  }

 private:
  std::shared_ptr<LayerRunner> runner_;
};

// The persistent states of the module's metrics, and their restoring: what every strategy puts in
// its checkpoints beside the parameters (Lightning: the metrics are in the module's state dict).
inline std::vector<std::pair<std::string, at::Tensor>> metric_states(TrainModule& module) {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (Metric* m : module.metrics()) {
    for (auto& entry : m->state_dict()) out.push_back(std::move(entry));
  }
  return out;
}

inline void load_metric_states(TrainModule& module,
                               const std::vector<std::pair<std::string, at::Tensor>>& entries) {
  for (Metric* m : module.metrics()) m->load_state_dict(entries);
}

}  // namespace harness::runtime

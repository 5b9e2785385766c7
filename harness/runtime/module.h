#pragma once
// TrainModule: what a model brings to the trainer (in the manner of a LightningModule): its
// torch::nn::Module, a training step that returns the loss, and its optimizer.
#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "harness/runtime/optimizer.h"

namespace harness::runtime {

struct Batch {
  at::Tensor input;
  at::Tensor target;
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
};

}  // namespace harness::runtime

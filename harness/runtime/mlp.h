#pragma once
// MlpRegression: an MLP of torch::nn::Linear layers with ReLU between them, trained on MSE loss
// with Adam. Initialisation is deterministic for a given seed.
#include <torch/nn/modules/container/sequential.h>

#include <cstdint>
#include <vector>

#include "harness/runtime/optim/adam.h"
#include "harness/runtime/module.h"

namespace harness::runtime {

struct MlpConfig {
  std::vector<int64_t> widths;  // input, hidden..., output: {in, h1, ..., out}
  uint64_t seed = 0;
  // false: the layers' parameters are on the meta device (shapes, no values, no memory), as
  // `with torch.device("meta")` builds them; a sharding strategy materialises them.
  bool materialize = true;
  // true: the module keeps two persistent metrics updated every training step (MeanLoss, a
  // scalar-state metric, and BatchMeanAbsoluteError, a list-state one).
  bool metrics = false;
};

// Seeds the default generator that ops on `device` draw from (sim: the CPU's).
void seed_default_generator(c10::Device device, uint64_t seed);

// The init torch::nn::Linear gives its parameters (kaiming-uniform weight, uniform bias), in place
// on tensors of any device, drawing from that device's default generator.
void init_linear_parameters(at::Tensor& weight, at::Tensor& bias);

class MlpRegression final : public TrainModule {
 public:
  MlpRegression(const MlpConfig& config, AdamOptions adam);

  torch::nn::Module& module() override { return *layers_; }
  torch::nn::Sequential* layers() override { return &layers_; }
  std::vector<Metric*> metrics() override;
  at::Tensor training_step(const Batch& batch) override;
  std::unique_ptr<Optimizer> configure_optimizers() override;

  // Number of parameter tensors (weights and biases).
  int64_t parameter_tensor_count() const { return 2 * (static_cast<int64_t>(widths_.size()) - 1); }

 private:
  std::vector<int64_t> widths_;
  torch::nn::Sequential layers_;
  AdamOptions adam_;
  std::unique_ptr<MeanLoss> mean_loss_;
  std::unique_ptr<BatchMeanAbsoluteError> batch_mae_;
};

}  // namespace harness::runtime

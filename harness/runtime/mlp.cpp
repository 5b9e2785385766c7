#include "harness/runtime/mlp.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/mse_loss.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/linear.h>

#include <mutex>

#include "harness/instrument/phase.h"

namespace harness::runtime {

MlpRegression::MlpRegression(const MlpConfig& config, AdamOptions adam)
    : widths_(config.widths), adam_(adam) {
  TORCH_CHECK(widths_.size() >= 2, "an MLP needs at least an input and an output width");
  {
    // nn::Linear initialises from the default CPU generator: seed it for a reproducible model.
    // (Its kernels take the generator's lock themselves: hold it only to seed.)
    auto gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_current_seed(config.seed);
  }
  for (size_t i = 0; i + 1 < widths_.size(); ++i) {
    if (i > 0) layers_->push_back(torch::nn::ReLU());
    layers_->push_back(torch::nn::Linear(widths_[i], widths_[i + 1]));
  }
}

at::Tensor MlpRegression::training_step(const Batch& batch) {
  return at::mse_loss(layers_->forward(batch.input), batch.target);
}

std::unique_ptr<Optimizer> MlpRegression::configure_optimizers() {
  return std::make_unique<Adam>(parameters(), adam_);
}

}  // namespace harness::runtime

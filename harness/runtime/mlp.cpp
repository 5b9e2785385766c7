#include "harness/runtime/mlp.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/mse_loss.h>
#include <c10/core/GradMode.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/init.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/linear.h>

#include <cmath>
#include <mutex>
#include <tuple>

#include "harness/instrument/phase.h"

namespace harness::runtime {
namespace {

// A Linear layer's shapes without values: its parameters live on the meta device.
class MetaLinearImpl : public torch::nn::Cloneable<MetaLinearImpl> {
 public:
  MetaLinearImpl(int64_t in_features, int64_t out_features)
      : in_features_(in_features), out_features_(out_features) {
    reset();
  }
  void reset() override {
    const auto meta = at::TensorOptions().device(at::kMeta);
    weight = register_parameter("weight", at::empty({out_features_, in_features_}, meta));
    bias = register_parameter("bias", at::empty({out_features_}, meta));
  }
  at::Tensor forward(const at::Tensor& /*input*/) {
    TORCH_CHECK(false,
                "a layer on the meta device has no values: a sharding strategy must "
                "materialise it first");
  }
  at::Tensor weight, bias;

 private:
  int64_t in_features_, out_features_;
};
TORCH_MODULE(MetaLinear);

}  // namespace

void seed_default_generator(c10::Device device, uint64_t seed) {
  // Sim ops draw from the CPU generator (they run CPU kernels); CUDA ones from the GPU's. The
  // kernels take the generator's lock themselves: hold it only to seed.
  at::Generator gen = device.is_cuda() ? at::globalContext().defaultGenerator(device)
                                       : at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_current_seed(seed);
}

void init_linear_parameters(at::Tensor& weight, at::Tensor& bias) {
  // LinearImpl::reset_parameters, op for op.
  torch::nn::init::kaiming_uniform_(weight, std::sqrt(5.0));
  const auto fans = torch::nn::init::_calculate_fan_in_and_fan_out(weight);
  const double bound = 1.0 / std::sqrt(static_cast<double>(std::get<0>(fans)));
  torch::nn::init::uniform_(bias, -bound, bound);
}

MlpRegression::MlpRegression(const MlpConfig& config, AdamOptions adam)
    : widths_(config.widths), adam_(adam) {
  if (config.metrics) {
    mean_loss_ = std::make_unique<MeanLoss>(/*persistent=*/true);
    batch_mae_ = std::make_unique<BatchMeanAbsoluteError>(/*persistent=*/true);
  }
  TORCH_CHECK(widths_.size() >= 2, "an MLP needs at least an input and an output width");
  // nn::Linear initialises from the default CPU generator: seed it for a reproducible model.
  seed_default_generator(c10::Device(c10::kCPU), config.seed);
  for (size_t i = 0; i + 1 < widths_.size(); ++i) {
    if (i > 0) layers_->push_back(torch::nn::ReLU());
    if (config.materialize) {
      layers_->push_back(torch::nn::Linear(widths_[i], widths_[i + 1]));
    } else {
      layers_->push_back(MetaLinear(widths_[i], widths_[i + 1]));
    }
  }
}

at::Tensor MlpRegression::training_step(const Batch& batch) {
  const at::Tensor output = run_layers(batch.input);
  at::Tensor loss = at::mse_loss(output, batch.target);
  if (mean_loss_) {
    c10::AutoGradMode no_grad(false);
    mean_loss_->update(loss, output, batch.target);
    batch_mae_->update(loss, output, batch.target);
  }
  return loss;
}

std::vector<Metric*> MlpRegression::metrics() {
  if (!mean_loss_) return {};
  return {mean_loss_.get(), batch_mae_.get()};
}

std::unique_ptr<Optimizer> MlpRegression::configure_optimizers() {
  return std::make_unique<Adam>(parameters(), adam_);
}

}  // namespace harness::runtime

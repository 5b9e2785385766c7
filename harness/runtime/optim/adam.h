#pragma once
// Adam and AdamW, faithful to torch.optim.Adam / AdamW of PyTorch 2.11 (torch/optim/adam.py):
// the same ATen ops in the same order for each implementation, the same placement of `step`
// (a 0-dim float32 CPU tensor unless fused or capturable), `.item()` exactly where PyTorch calls
// `_get_value`, and load_state_dict placing state as PyTorch does. One parameter group.
#include <optional>
#include <string>
#include <vector>

#include "harness/runtime/optim/optimizer.h"

namespace harness::runtime {

enum class AdamImpl {
  ForLoop,  // torch.optim.Adam(foreach=False): _single_tensor_adam
  Foreach,  // foreach=True: _multi_tensor_adam (horizontally fused _foreach_* ops)
  Fused,    // fused=True: _fused_adam (one _fused_adam_ / _fused_adamw_ kernel per group)
};
const char* to_string(AdamImpl impl);

struct AdamOptions {
  double lr = 1e-3;
  // A 1-element tensor lr, used instead of `lr` when defined (fused or capturable, or the
  // for-loop; PyTorch refuses it for foreach without capturable). The for-loop then reads it on
  // the host every step (`addcdiv_(value=-step_size)` takes a number): a sync if it lives on the
  // device.
  at::Tensor lr_tensor;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool amsgrad = false;
  bool maximize = false;
  bool decoupled_weight_decay = false;  // true: AdamW
  AdamImpl impl = AdamImpl::Foreach;
  // capturable=True (for-loop or foreach): `step` on the device, bias corrections computed on the
  // device, no host reads. Needs a device that supports capture (cuda, sim).
  bool capturable = false;
};

// "forloop", "foreach", "fused", "forloop_capturable", "foreach_capturable".
std::string implementation_name(const AdamOptions& options);

struct AdamParamState {
  at::Tensor step;  // 0-dim float32; on the CPU unless fused or capturable
  at::Tensor exp_avg;
  at::Tensor exp_avg_sq;
  at::Tensor max_exp_avg_sq;  // amsgrad only
};

class Adam final : public Optimizer {
 public:
  Adam(std::vector<at::Tensor> params, AdamOptions options);

  void step() override;
  void zero_grad(bool set_to_none = true) override;
  OptimizerStateDict state_dict() const override;
  void load_state_dict(const OptimizerStateDict& state) override;
  void for_each_state_tensor(
      const std::function<void(const std::string&, at::Tensor&)>& fn) override;
  const std::vector<at::Tensor>& params() const override { return params_; }

  const AdamOptions& options() const { return options_; }
  // State of params()[i], or nullptr before its first step.
  const AdamParamState* state(size_t i) const;

 private:
  // The lists _init_group builds: parameters that have a gradient, and their state.
  struct Group {
    std::vector<at::Tensor> params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps;
  };
  Group init_group();
  // Optimizer._group_tensors_by_device_and_dtype: the lists of `g` split by the parameters'
  // device and dtype, in order of first appearance.
  static std::vector<Group> split_by_device_and_dtype(const Group& g);
  void single_tensor_adam(Group& g);
  void multi_tensor_adam(Group& g);
  void single_tensor_adam_capturable(Group& g);
  void multi_tensor_adam_capturable(Group& g);
  void fused_adam(Group& g);

  std::vector<at::Tensor> params_;
  AdamOptions options_;
  std::vector<std::optional<AdamParamState>> state_;
};

}  // namespace harness::runtime

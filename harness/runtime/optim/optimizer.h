#pragma once
// Optimizer: the interface the trainer and strategies drive, and the state_dict layout shared by
// every optimizer (the same layout as torch.optim.Optimizer.state_dict()).
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <ATen/core/ivalue.h>

namespace harness::runtime {

// torch.optim's state_dict: per-parameter state keyed by the parameter's index in the optimizer,
// and the hyperparameters of each parameter group with the indices of its parameters.
struct OptimizerStateDict {
  std::map<int64_t, std::map<std::string, at::Tensor>> state;
  struct Group {
    std::map<std::string, c10::IValue> options;  // "lr", "betas", "eps", "foreach", ...
    std::vector<int64_t> params;
  };
  std::vector<Group> param_groups;
};

// optimizer.zero_grad(): drops each parameter's gradient (set_to_none) or zeroes it in place.
inline void zero_grads(std::vector<at::Tensor>& params, bool set_to_none) {
  for (at::Tensor& p : params) {
    at::Tensor& grad = p.mutable_grad();
    if (!grad.defined()) continue;
    if (set_to_none) {
      grad.reset();
    } else {
      grad = grad.detach();
      grad.zero_();
    }
  }
}

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual void step() = 0;
  // set_to_none: as torch.optim's default, drop the gradients instead of zeroing them.
  virtual void zero_grad(bool set_to_none = true) = 0;
  virtual OptimizerStateDict state_dict() const = 0;
  virtual void load_state_dict(const OptimizerStateDict& state) = 0;
  // Visits every per-parameter state tensor (for strategies that move optimizer state).
  virtual void for_each_state_tensor(
      const std::function<void(const std::string& key, at::Tensor& value)>& fn) = 0;
  virtual const std::vector<at::Tensor>& params() const = 0;
};

}  // namespace harness::runtime

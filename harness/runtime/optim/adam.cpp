// Adam: state initialisation, state_dict / load_state_dict and the for-loop implementation
// (torch/optim/adam.py: Adam._init_group, Optimizer.load_state_dict, _single_tensor_adam).
// The foreach implementation is in adam_foreach.cpp.
#include "harness/runtime/optim/adam.h"

#include <ATen/ops/maximum.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>
#include <c10/core/GradMode.h>

#include <cmath>

#include "harness/errors.h"
#include "harness/runtime/optim/adam_internal.h"
#include "harness/instrument/site.h"

namespace harness::runtime {

const char* to_string(AdamImpl impl) {
  switch (impl) {
    case AdamImpl::ForLoop: return "forloop";
    case AdamImpl::Foreach: return "foreach";
    case AdamImpl::Fused: return "fused";
  }
  return "?";
}

std::string implementation_name(const AdamOptions& o) {
  return std::string(to_string(o.impl)) + (o.capturable && o.impl != AdamImpl::Fused
                                               ? "_capturable" : "");
}

namespace {
// _get_fused_kernels_supported_devices / _get_capturable_supported_devices of PyTorch 2.11, where
// "privateuseone" is the sim backend.
bool fused_supported(const at::Tensor& p) {
  const auto t = p.device().type();
  return (t == c10::DeviceType::CPU || t == c10::DeviceType::CUDA ||
          t == c10::DeviceType::PrivateUse1) &&
         p.is_floating_point();
}
bool capturable_supported(const at::Tensor& p) {
  const auto t = p.device().type();
  return t == c10::DeviceType::CUDA || t == c10::DeviceType::PrivateUse1;
}
}  // namespace

Adam::Adam(std::vector<at::Tensor> params, AdamOptions options)
    : params_(std::move(params)), options_(options), state_(params_.size()) {
  TORCH_CHECK(options_.lr >= 0.0, "Invalid learning rate: ", options_.lr);
  if (options_.lr_tensor.defined()) {
    TORCH_CHECK(options_.lr_tensor.numel() == 1, "Tensor lr must be 1-element");
    TORCH_CHECK(options_.impl != AdamImpl::Foreach || options_.capturable,
                "lr as a Tensor is not supported for capturable=False and foreach=True");
    options_.lr_tensor = options_.lr_tensor.reshape({});  // _to_scalar
  }
  TORCH_CHECK(options_.eps >= 0.0, "Invalid epsilon value: ", options_.eps);
  TORCH_CHECK(options_.beta1 >= 0.0 && options_.beta1 < 1.0, "Invalid beta parameter at index 0: ",
              options_.beta1);
  TORCH_CHECK(options_.beta2 >= 0.0 && options_.beta2 < 1.0, "Invalid beta parameter at index 1: ",
              options_.beta2);
  TORCH_CHECK(options_.weight_decay >= 0.0, "Invalid weight_decay value: ", options_.weight_decay);
}

const AdamParamState* Adam::state(size_t i) const {
  return state_.at(i).has_value() ? &*state_[i] : nullptr;
}

void Adam::zero_grad(bool set_to_none) { zero_grads(params_, set_to_none); }

Adam::Group Adam::init_group() {
  Group g;
  for (size_t i = 0; i < params_.size(); ++i) {
    const at::Tensor& p = params_[i];
    if (!p.grad().defined()) continue;
    TORCH_CHECK(!p.grad().is_sparse(), "Adam does not support sparse gradients");
    g.params.push_back(p);
    g.grads.push_back(p.grad());
    if (!state_[i]) {
      if (options_.impl == AdamImpl::Fused) {
        TORCH_CHECK(fused_supported(p), "`fused=True` requires all the params to be floating point "
                    "Tensors of supported devices: cpu, cuda, sim but ", p.dtype(), " and ",
                    p.device().type());
      }
      // [special device hosting for step]: on the CPU unless capturable or fused.
      AdamParamState s;
      s.step = options_.capturable || options_.impl == AdamImpl::Fused
                   ? at::zeros({}, p.options().dtype(at::kFloat))
                   : at::scalar_tensor(0.0, at::TensorOptions().dtype(at::kFloat));
      s.exp_avg = at::zeros_like(p, at::MemoryFormat::Preserve);
      s.exp_avg_sq = at::zeros_like(p, at::MemoryFormat::Preserve);
      if (options_.amsgrad) s.max_exp_avg_sq = at::zeros_like(p, at::MemoryFormat::Preserve);
      state_[i] = std::move(s);
    }
    AdamParamState& s = *state_[i];
    g.exp_avgs.push_back(s.exp_avg);
    g.exp_avg_sqs.push_back(s.exp_avg_sq);
    if (options_.amsgrad) g.max_exp_avg_sqs.push_back(s.max_exp_avg_sq);
    g.steps.push_back(s.step);
  }
  return g;
}

void Adam::step() {
  c10::AutoGradMode no_grad(false);  // _use_grad_for_differentiable with differentiable=False
  Group g = init_group();
  if (g.params.empty()) return;
  if (options_.capturable && options_.impl != AdamImpl::Fused) {
    for (size_t i = 0; i < g.params.size(); ++i) {
      TORCH_CHECK(g.params[i].device().type() == g.steps[i].device().type() &&
                      capturable_supported(g.params[i]),
                  "If capturable=True, params and state_steps must be on supported devices: "
                  "cuda, sim.");
    }
  }
  switch (options_.impl) {
    case AdamImpl::ForLoop:
      options_.capturable ? single_tensor_adam_capturable(g) : single_tensor_adam(g);
      break;
    case AdamImpl::Foreach:
      options_.capturable ? multi_tensor_adam_capturable(g) : multi_tensor_adam(g);
      break;
    case AdamImpl::Fused: fused_adam(g); break;
  }
}

// _single_tensor_adam, capturable=False, differentiable=False, real parameters.
void Adam::single_tensor_adam(Group& g) {
  const AdamOptions& o = options_;
  for (size_t i = 0; i < g.params.size(); ++i) {
    at::Tensor& param = g.params[i];
    at::Tensor grad = o.maximize ? -g.grads[i] : g.grads[i];
    at::Tensor& exp_avg = g.exp_avgs[i];
    at::Tensor& exp_avg_sq = g.exp_avg_sqs[i];
    at::Tensor& step_t = g.steps[i];

    step_t.add_(1);
    detail::decay_and_update_moments(o, param, grad, exp_avg, exp_avg_sq);

    HARNESS_SITE();
    const double step = step_t.item<double>();  // _get_value(step_t)
    const double bias_correction1 = 1 - std::pow(o.beta1, step);
    const double bias_correction2 = 1 - std::pow(o.beta2, step);
    const double bias_correction2_sqrt = std::pow(bias_correction2, 0.5);
    // value=-step_size: with a tensor lr, Python turns the tensor into a number (an `.item()`).
    HARNESS_SITE();
    const c10::Scalar neg_step_size = o.lr_tensor.defined()
                                          ? (-(o.lr_tensor / bias_correction1)).item()
                                          : c10::Scalar(-(o.lr / bias_correction1));

    at::Tensor denom;
    if (o.amsgrad) {
      at::maximum_out(g.max_exp_avg_sqs[i], g.max_exp_avg_sqs[i], exp_avg_sq);
      denom = (g.max_exp_avg_sqs[i].sqrt() / bias_correction2_sqrt).add_(o.eps);
    } else {
      denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(o.eps);
    }
    param.addcdiv_(exp_avg, denom, neg_step_size);
  }
}

OptimizerStateDict Adam::state_dict() const {
  OptimizerStateDict sd;
  for (size_t i = 0; i < state_.size(); ++i) {
    if (!state_[i]) continue;
    auto& entry = sd.state[static_cast<int64_t>(i)];
    entry["step"] = state_[i]->step;
    entry["exp_avg"] = state_[i]->exp_avg;
    entry["exp_avg_sq"] = state_[i]->exp_avg_sq;
    if (state_[i]->max_exp_avg_sq.defined()) entry["max_exp_avg_sq"] = state_[i]->max_exp_avg_sq;
  }
  OptimizerStateDict::Group group;
  const AdamOptions& o = options_;
  group.options = {
      {"lr", o.lr_tensor.defined() ? c10::IValue(o.lr_tensor) : c10::IValue(o.lr)},
      {"betas", c10::ivalue::Tuple::create({o.beta1, o.beta2})},
      {"eps", o.eps},
      {"weight_decay", o.weight_decay},
      {"amsgrad", o.amsgrad},
      {"maximize", o.maximize},
      {"foreach", o.impl == AdamImpl::Foreach},
      {"capturable", o.capturable},
      {"differentiable", false},
      {"fused", o.impl == AdamImpl::Fused ? c10::IValue(true) : c10::IValue()},
      {"decoupled_weight_decay", o.decoupled_weight_decay},
  };
  for (size_t i = 0; i < params_.size(); ++i) group.params.push_back(static_cast<int64_t>(i));
  sd.param_groups.push_back(std::move(group));
  return sd;
}

namespace {
double option_double(const OptimizerStateDict::Group& g, const char* key, double fallback) {
  auto it = g.options.find(key);
  if (it == g.options.end()) return fallback;
  TORCH_CHECK(it->second.isDouble() || it->second.isInt(), "optimizer state: '", key,
              "' is not a number");
  return it->second.isDouble() ? it->second.toDouble() : static_cast<double>(it->second.toInt());
}
bool option_bool(const OptimizerStateDict::Group& g, const char* key, bool fallback) {
  auto it = g.options.find(key);
  if (it == g.options.end() || it->second.isNone()) return fallback;
  TORCH_CHECK(it->second.isBool(), "optimizer state: '", key, "' is not a bool");
  return it->second.toBool();
}
}  // namespace

// Optimizer.load_state_dict: saved groups replace the hyperparameters; state is deep-copied and
// cast by _process_value_according_to_param_policy (step kept as is, unless fused/capturable;
// everything else moved to the parameter's device and dtype).
void Adam::load_state_dict(const OptimizerStateDict& sd) {
  if (sd.param_groups.size() != 1) {
    throw InputError("loaded optimizer state has " + std::to_string(sd.param_groups.size()) +
                     " parameter groups; this optimizer has 1");
  }
  const auto& saved = sd.param_groups[0];
  if (saved.params.size() != params_.size()) {
    throw InputError("loaded optimizer state has a parameter group of " +
                     std::to_string(saved.params.size()) + " parameters; this optimizer has " +
                     std::to_string(params_.size()));
  }
  AdamOptions o = options_;
  auto lr = saved.options.find("lr");
  if (lr != saved.options.end() && lr->second.isTensor()) {
    o.lr_tensor = lr->second.toTensor().clone();
  } else {
    o.lr = option_double(saved, "lr", o.lr);
    o.lr_tensor = at::Tensor();
  }
  auto betas = saved.options.find("betas");
  if (betas != saved.options.end()) {
    TORCH_CHECK(betas->second.isTuple() && betas->second.toTupleRef().elements().size() == 2,
                "optimizer state: 'betas' is not a pair");
    o.beta1 = betas->second.toTupleRef().elements()[0].toDouble();
    o.beta2 = betas->second.toTupleRef().elements()[1].toDouble();
  }
  o.eps = option_double(saved, "eps", o.eps);
  o.weight_decay = option_double(saved, "weight_decay", o.weight_decay);
  o.amsgrad = option_bool(saved, "amsgrad", o.amsgrad);
  o.maximize = option_bool(saved, "maximize", o.maximize);
  o.decoupled_weight_decay = option_bool(saved, "decoupled_weight_decay", o.decoupled_weight_decay);
  o.capturable = option_bool(saved, "capturable", o.capturable);
  if (option_bool(saved, "fused", o.impl == AdamImpl::Fused)) {
    o.impl = AdamImpl::Fused;
  } else {
    o.impl = option_bool(saved, "foreach", o.impl == AdamImpl::Foreach) ? AdamImpl::Foreach
                                                                         : AdamImpl::ForLoop;
  }
  options_ = o;
  const bool step_on_device = o.capturable || o.impl == AdamImpl::Fused;

  std::vector<std::optional<AdamParamState>> state(params_.size());
  for (size_t position = 0; position < saved.params.size(); ++position) {
    auto entry = sd.state.find(saved.params[position]);
    if (entry == sd.state.end()) continue;
    const at::Tensor& param = params_[position];
    auto cast = [&](const char* key) -> at::Tensor {
      auto it = entry->second.find(key);
      if (it == entry->second.end()) return {};
      at::Tensor value = it->second.clone();  // deepcopy(state_dict)
      if (std::string(key) == "step") {
        return step_on_device ? value.to(param.device(), at::kFloat) : value;
      }
      return param.is_floating_point() ? value.to(param.device(), param.scalar_type())
                                       : value.to(param.device());
    };
    AdamParamState s{cast("step"), cast("exp_avg"), cast("exp_avg_sq"), cast("max_exp_avg_sq")};
    if (!s.step.defined() || !s.exp_avg.defined() || !s.exp_avg_sq.defined()) {
      throw InputError("loaded optimizer state of parameter " + std::to_string(position) +
                       " lacks step, exp_avg or exp_avg_sq");
    }
    if (s.exp_avg.sizes() != param.sizes() || s.exp_avg_sq.sizes() != param.sizes()) {
      throw InputError("loaded optimizer state of parameter " + std::to_string(position) +
                       " does not match its shape");
    }
    state[position] = std::move(s);
  }
  state_ = std::move(state);
}

void Adam::for_each_state_tensor(const std::function<void(const std::string&, at::Tensor&)>& fn) {
  for (auto& s : state_) {
    if (!s) continue;
    fn("step", s->step);
    fn("exp_avg", s->exp_avg);
    fn("exp_avg_sq", s->exp_avg_sq);
    if (s->max_exp_avg_sq.defined()) fn("max_exp_avg_sq", s->max_exp_avg_sq);
  }
}

}  // namespace harness::runtime

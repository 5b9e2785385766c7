// Adam's foreach implementation: _multi_tensor_adam of torch/optim/adam.py (PyTorch 2.11),
// capturable=False, differentiable=False, real parameters. (Capturable and fused paths:
// adam_device_step.cpp.)
#include <ATen/ops/_foreach_add.h>
#include <ATen/ops/_foreach_addcdiv.h>
#include <ATen/ops/_foreach_addcmul.h>
#include <ATen/ops/_foreach_div.h>
#include <ATen/ops/_foreach_lerp.h>
#include <ATen/ops/_foreach_maximum.h>
#include <ATen/ops/_foreach_mul.h>
#include <ATen/ops/_foreach_neg.h>
#include <ATen/ops/_foreach_sqrt.h>
#include <ATen/ops/rsub.h>
#include <ATen/ops/scalar_tensor.h>

#include <algorithm>
#include <cmath>
#include <tuple>

#include "harness/runtime/optim/adam.h"
#include "harness/runtime/optim/adam_internal.h"
#include "harness/instrument/site.h"

namespace harness::runtime {

namespace {

std::vector<std::vector<size_t>> indices_by_device_and_dtype(const std::vector<at::Tensor>& params) {
  std::vector<std::tuple<c10::Device, at::ScalarType, std::vector<size_t>>> groups;
  for (size_t i = 0; i < params.size(); ++i) {
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) {
      return std::get<0>(g) == params[i].device() && std::get<1>(g) == params[i].scalar_type();
    });
    if (it == groups.end()) {
      groups.emplace_back(params[i].device(), params[i].scalar_type(), std::vector<size_t>{i});
    } else {
      std::get<2>(*it).push_back(i);
    }
  }
  std::vector<std::vector<size_t>> out;
  for (auto& g : groups) out.push_back(std::move(std::get<2>(g)));
  return out;
}

std::vector<at::Tensor> pick(const std::vector<at::Tensor>& all, const std::vector<size_t>& idx) {
  std::vector<at::Tensor> out;
  out.reserve(idx.size());
  for (size_t i : idx) out.push_back(all[i]);
  return out;
}

}  // namespace

std::vector<Adam::Group> Adam::split_by_device_and_dtype(const Group& g) {
  std::vector<Group> out;
  for (const std::vector<size_t>& idx : indices_by_device_and_dtype(g.params)) {
    out.push_back({pick(g.params, idx), pick(g.grads, idx), pick(g.exp_avgs, idx),
                   pick(g.exp_avg_sqs, idx),
                   g.max_exp_avg_sqs.empty() ? std::vector<at::Tensor>{}
                                             : pick(g.max_exp_avg_sqs, idx),
                   pick(g.steps, idx)});
  }
  return out;
}

namespace detail {

at::Tensor python_number(double value) {
  at::Tensor t = at::scalar_tensor(value, at::TensorOptions().dtype(at::kDouble));
  t.unsafeGetTensorImpl()->set_wrapped_number(true);
  return t;
}

void decay_and_update_moments(const AdamOptions& o, at::Tensor& param, at::Tensor grad,
                              at::Tensor& exp_avg, at::Tensor& exp_avg_sq) {
  if (o.weight_decay != 0) {
    if (o.decoupled_weight_decay) {
      if (o.lr_tensor.defined()) {
        param.mul_(at::rsub(o.lr_tensor * o.weight_decay, 1));
      } else {
        param.mul_(python_number(1 - o.lr * o.weight_decay));
      }
    } else {
      grad = grad.add(param, o.weight_decay);
    }
  }
  exp_avg.lerp_(grad, 1 - o.beta1);
  exp_avg_sq.mul_(python_number(o.beta2)).addcmul_(grad, grad, 1 - o.beta2);
}

void foreach_decay_and_update_moments(const AdamOptions& o, std::vector<at::Tensor>& params,
                                      std::vector<at::Tensor>& grads,
                                      std::vector<at::Tensor>& exp_avgs,
                                      std::vector<at::Tensor>& exp_avg_sqs) {
  if (o.weight_decay != 0) {
    if (o.decoupled_weight_decay) {
      if (o.lr_tensor.defined()) {
        at::_foreach_mul_(params, at::rsub(o.lr_tensor * o.weight_decay, 1));
      } else {
        at::_foreach_mul_(params, 1 - o.lr * o.weight_decay);
      }
    } else if (o.maximize) {
      at::_foreach_add_(grads, params, o.weight_decay);
    } else {
      grads = at::_foreach_add(grads, params, o.weight_decay);
    }
  }
  at::_foreach_lerp_(exp_avgs, grads, 1 - o.beta1);
  at::_foreach_mul_(exp_avg_sqs, o.beta2);
  at::_foreach_addcmul_(exp_avg_sqs, grads, grads, 1 - o.beta2);
}

std::vector<at::Tensor> foreach_second_moment_sqrt(const AdamOptions& o,
                                                   std::vector<at::Tensor>& max_exp_avg_sqs,
                                                   const std::vector<at::Tensor>& exp_avg_sqs) {
  if (!o.amsgrad) return at::_foreach_sqrt(exp_avg_sqs);
  at::_foreach_maximum_(max_exp_avg_sqs, exp_avg_sqs);
  return at::_foreach_sqrt(max_exp_avg_sqs);
}

}  // namespace detail

using detail::foreach_decay_and_update_moments;
using detail::foreach_second_moment_sqrt;

void Adam::multi_tensor_adam(Group& g) {
  const AdamOptions& o = options_;
  for (Group& group : split_by_device_and_dtype(g)) {
    auto& [params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps] = group;

    if (o.maximize) grads = at::_foreach_neg(grads);

    // "If steps are on CPU, foreach will fall back to the slow path": wrap 1 once.
    if (steps[0].device().is_cpu()) {
      at::_foreach_add_(steps, at::scalar_tensor(1.0, at::TensorOptions().dtype(at::kFloat)), 1.0);
    } else {
      at::_foreach_add_(steps, 1);
    }

    foreach_decay_and_update_moments(o, params, grads, exp_avgs, exp_avg_sqs);

    // Not capturable: bias corrections as host numbers, one `_get_value(step)` (an `.item()`)
    // per step tensor for each of the two corrections.
    std::vector<double> bias_correction1, bias_correction2;
    HARNESS_SITE();
    for (const at::Tensor& s : steps) bias_correction1.push_back(1 - std::pow(o.beta1, s.item<double>()));
    HARNESS_SITE();
    for (const at::Tensor& s : steps) bias_correction2.push_back(1 - std::pow(o.beta2, s.item<double>()));
    std::vector<c10::Scalar> step_size, bias_correction2_sqrt;
    for (double bc : bias_correction1) step_size.emplace_back((o.lr / bc) * -1);
    for (double bc : bias_correction2) bias_correction2_sqrt.emplace_back(std::pow(bc, 0.5));

    std::vector<at::Tensor> exp_avg_sq_sqrt =
        foreach_second_moment_sqrt(o, max_exp_avg_sqs, exp_avg_sqs);
    at::_foreach_div_(exp_avg_sq_sqrt, bias_correction2_sqrt);
    at::_foreach_add_(exp_avg_sq_sqrt, o.eps);
    at::_foreach_addcdiv_(params, exp_avgs, exp_avg_sq_sqrt, step_size);
  }
}

}  // namespace harness::runtime

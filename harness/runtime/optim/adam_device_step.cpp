// Adam's paths that keep `step` on the device and never read it back on the host
// (torch/optim/adam.py, PyTorch 2.11): _single_tensor_adam and _multi_tensor_adam with
// capturable=True, and _fused_adam. Python operators map to the ops PyTorch dispatches:
// `1 - t` is rsub, `x ** t` is pow(Scalar, Tensor), `x / t` is t.reciprocal() * x.
#include <ATen/TensorOperators.h>
#include <ATen/ops/_foreach_add.h>
#include <ATen/ops/_foreach_addcdiv.h>
#include <ATen/ops/_foreach_addcmul.h>
#include <ATen/ops/_foreach_div.h>
#include <ATen/ops/_foreach_lerp.h>
#include <ATen/ops/_foreach_maximum.h>
#include <ATen/ops/_foreach_mul.h>
#include <ATen/ops/_foreach_neg.h>
#include <ATen/ops/_foreach_pow.h>
#include <ATen/ops/_foreach_reciprocal.h>
#include <ATen/ops/_foreach_sqrt.h>
#include <ATen/ops/_foreach_sub.h>
#include <ATen/ops/_fused_adam.h>
#include <ATen/ops/_fused_adamw.h>
#include <ATen/ops/maximum.h>
#include <ATen/ops/pow.h>
#include <ATen/ops/rsub.h>

#include "harness/runtime/optim/adam.h"
#include "harness/runtime/optim/adam_internal.h"

namespace harness::runtime {

using detail::decay_and_update_moments;
using detail::foreach_decay_and_update_moments;
using detail::foreach_second_moment_sqrt;

void Adam::single_tensor_adam_capturable(Group& g) {
  const AdamOptions& o = options_;
  for (size_t i = 0; i < g.params.size(); ++i) {
    at::Tensor& param = g.params[i];
    at::Tensor grad = o.maximize ? -g.grads[i] : g.grads[i];
    at::Tensor& exp_avg = g.exp_avgs[i];
    at::Tensor& exp_avg_sq = g.exp_avg_sqs[i];
    at::Tensor& step_t = g.steps[i];

    step_t.add_(1);
    decay_and_update_moments(o, param, grad, exp_avg, exp_avg_sq);

    const at::Tensor bias_correction1 = at::rsub(at::pow(o.beta1, step_t), 1);
    const at::Tensor bias_correction2 = at::rsub(at::pow(o.beta2, step_t), 1);
    const at::Tensor step_size = o.lr_tensor.defined() ? o.lr_tensor / bias_correction1
                                                       : bias_correction1.reciprocal() * o.lr;
    const at::Tensor step_size_neg = step_size.neg();
    const at::Tensor bias_correction2_sqrt = bias_correction2.sqrt();

    at::Tensor denom;
    if (o.amsgrad) {
      g.max_exp_avg_sqs[i].copy_(at::maximum(g.max_exp_avg_sqs[i], exp_avg_sq));
      denom = (g.max_exp_avg_sqs[i].sqrt() / (bias_correction2_sqrt * step_size_neg))
                  .add_(step_size_neg.reciprocal() * o.eps);
    } else {
      denom = (exp_avg_sq.sqrt() / (bias_correction2_sqrt * step_size_neg))
                  .add_(step_size_neg.reciprocal() * o.eps);
    }
    param.addcdiv_(exp_avg, denom);
  }
}

void Adam::multi_tensor_adam_capturable(Group& g) {
  const AdamOptions& o = options_;
  for (Group& group : split_by_device_and_dtype(g)) {
    auto& [params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps] = group;

    if (o.maximize) grads = at::_foreach_neg(grads);
    at::_foreach_add_(steps, 1);
    foreach_decay_and_update_moments(o, params, grads, exp_avgs, exp_avg_sqs);

    std::vector<at::Tensor> bias_correction1 = at::_foreach_pow(o.beta1, steps);
    std::vector<at::Tensor> bias_correction2 = at::_foreach_pow(o.beta2, steps);
    at::_foreach_sub_(bias_correction1, 1);
    at::_foreach_sub_(bias_correction2, 1);
    at::_foreach_neg_(bias_correction2);
    if (o.lr_tensor.defined()) {
      at::_foreach_div_(bias_correction1, o.lr_tensor);
    } else {
      at::_foreach_div_(bias_correction1, o.lr);
    }
    at::_foreach_reciprocal_(bias_correction1);
    at::_foreach_sqrt_(bias_correction2);
    const std::vector<at::Tensor>& step_size = bias_correction1;
    const std::vector<at::Tensor>& bias_correction2_sqrt = bias_correction2;

    std::vector<at::Tensor> exp_avg_sq_sqrt =
        foreach_second_moment_sqrt(o, max_exp_avg_sqs, exp_avg_sqs);
    at::_foreach_div_(exp_avg_sq_sqrt, bias_correction2_sqrt);
    at::_foreach_add_(exp_avg_sq_sqrt, o.eps);
    at::_foreach_div_(exp_avg_sq_sqrt, step_size);
    at::_foreach_addcdiv_(params, exp_avgs, exp_avg_sq_sqrt);
  }
}

void Adam::fused_adam(Group& g) {
  const AdamOptions& o = options_;
  for (Group& group : split_by_device_and_dtype(g)) {
    auto& [params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps] = group;
    at::_foreach_add_(steps, 1);
    if (o.lr_tensor.defined()) {
      // A tensor lr on another device than the group's is moved there (non-blocking).
      const at::Tensor lr = o.lr_tensor.device().is_cpu() || o.lr_tensor.device() == params[0].device()
                                ? o.lr_tensor
                                : o.lr_tensor.to(params[0].device(), /*non_blocking=*/true);
      if (o.decoupled_weight_decay) {
        at::_fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, lr,
                          o.beta1, o.beta2, o.weight_decay, o.eps, o.amsgrad, o.maximize);
      } else {
        at::_fused_adam_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, lr,
                         o.beta1, o.beta2, o.weight_decay, o.eps, o.amsgrad, o.maximize);
      }
    } else if (o.decoupled_weight_decay) {
      at::_fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, o.lr,
                        o.beta1, o.beta2, o.weight_decay, o.eps, o.amsgrad, o.maximize);
    } else {
      at::_fused_adam_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, o.lr,
                       o.beta1, o.beta2, o.weight_decay, o.eps, o.amsgrad, o.maximize);
    }
  }
}

}  // namespace harness::runtime

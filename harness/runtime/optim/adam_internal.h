#pragma once
// Shared by the Adam implementation files: the part of a step every non-fused path has in common
// (weight decay and the two moment updates).
#include <ATen/core/Tensor.h>

#include <vector>

#include "harness/runtime/optim/adam.h"

namespace harness::runtime::detail {

// A Python float as torch's Python binding passes it to an in-place op: a 0-dim double CPU tensor
// marked as a wrapped number. `t.mul_(x)` from Python dispatches `aten::mul_.Tensor` with it,
// while C++'s `t.mul_(double)` is `aten::mul_.Scalar`, whose kernel redispatches to
// `aten::mul.out`: one launch either way, but named differently (found by the Python fidelity
// test, python/tests/test_fidelity.py).
at::Tensor python_number(double value);

// After `step += 1`: weight decay (L2 into the gradient, or decoupled into the parameter), then
// exp_avg.lerp_(grad, 1 - beta1); exp_avg_sq.mul_(beta2).addcmul_(grad, grad, 1 - beta2)
// (the multiplications by numbers as from Python, python_number).
void decay_and_update_moments(const AdamOptions& o, at::Tensor& param, at::Tensor grad,
                              at::Tensor& exp_avg, at::Tensor& exp_avg_sq);
// The same with _foreach_* ops. `maximize` matters: the negated gradients are updated in place.
void foreach_decay_and_update_moments(const AdamOptions& o, std::vector<at::Tensor>& params,
                                      std::vector<at::Tensor>& grads,
                                      std::vector<at::Tensor>& exp_avgs,
                                      std::vector<at::Tensor>& exp_avg_sqs);
// sqrt of the second moments (of their running max, updated first, with amsgrad), with
// _foreach_* ops: the denominator both foreach paths start from.
std::vector<at::Tensor> foreach_second_moment_sqrt(const AdamOptions& o,
                                                   std::vector<at::Tensor>& max_exp_avg_sqs,
                                                   const std::vector<at::Tensor>& exp_avg_sqs);

}  // namespace harness::runtime::detail

// Shape functions for ops that LibTorch alone has no meta function for (Compute::kShapes).
//
// Torch's meta functions for many ops live in Python (torch/_meta_registrations.py registers them
// at the Meta key when `import torch` runs): a Python process has them, `bench` (C++ only) has not.
// For those the sim uses its own, here: an op that writes into its arguments and returns them (an
// in-place op, a foreach or fused optimizer op) needs no function at all, its results are its
// arguments; a few functional ops have the shape rule of their kind. Anything else is refused by
// name (sim_kernels.cpp, run_meta_function).
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <ATen/ExpandUtils.h>
#include <c10/core/WrapDimMinimal.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/result_type.h>

#include <string_view>
#include <unordered_set>

#include "harness/instrument/sim/sim_internal.h"

namespace harness::sim {
namespace {

// Ops whose result has the shape, dtype and layout of their first argument (pointwise unary
// ops, and backward ops of the same kind).
bool shape_of_self(std::string_view name) {
  static const std::unordered_set<std::string_view> kOps = {
      "aten::relu",     "aten::sqrt",   "aten::rsqrt",         "aten::exp",
      "aten::log",      "aten::neg",    "aten::abs",           "aten::sigmoid",
      "aten::tanh",     "aten::sign",   "aten::reciprocal",
      "aten::gelu",     "aten::silu",   "aten::gelu_backward", "aten::silu_backward",
      "aten::hardtanh", "aten::square",
  };
  return kOps.count(name) > 0;
}

// Unary pointwise ops whose functional form torch implements through their out= variant (a
// CompositeExplicitAutograd kernel: `logical_not` makes a bool tensor and calls logical_not.out,
// as SDPA's causal mask does).
bool unary_pointwise_out(std::string_view name) {
  static const std::unordered_set<std::string_view> kOps = {"aten::logical_not"};
  return kOps.count(name) > 0;
}

// Ops that reduce every element to a 0-dim result of the argument's dtype (no dim argument).
bool reduces_to_scalar(const c10::OperatorHandle& op) {
  static const std::unordered_set<std::string_view> kOps = {"aten::max", "aten::min",
                                                           "aten::sum", "aten::mean"};
  return kOps.count(op.schema().name()) > 0 && op.schema().overload_name().empty();
}

// An op that only writes into arguments it returns (or returns nothing): a no-op on shapes.
// Out= variants are left out: their outputs are resized to a shape the op decides.
bool writes_its_arguments_only(const c10::FunctionSchema& schema) {
  bool writes = false;
  for (const c10::Argument& arg : schema.arguments()) {
    if (arg.is_out()) return false;
    writes = writes || (arg.alias_info() && arg.alias_info()->isWrite());
  }
  if (!writes) return false;
  for (const c10::Argument& ret : schema.returns()) {
    if (!ret.alias_info() || !ret.alias_info()->isWrite()) return false;
  }
  return true;
}

// The argument a returned alias refers to (same alias set), or -1.
int argument_of_return(const c10::FunctionSchema& schema, size_t ret) {
  const auto* info = schema.returns()[ret].alias_info();
  for (size_t i = 0; i < schema.arguments().size(); ++i) {
    const auto* arg = schema.arguments()[i].alias_info();
    if (arg && arg->beforeSets() == info->beforeSets()) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace

bool run_shape_function(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const c10::FunctionSchema& schema = op.schema();
  const size_t n = schema.arguments().size();
  c10::IValue* args = &(*stack)[stack->size() - n];
  if (writes_its_arguments_only(schema)) {
    std::vector<c10::IValue> results;
    for (size_t r = 0; r < schema.returns().size(); ++r) {
      const int i = argument_of_return(schema, r);
      if (i < 0) return false;
      results.push_back(args[i]);
    }
    torch::jit::drop(*stack, n);
    for (c10::IValue& v : results) torch::jit::push(*stack, std::move(v));
    return true;
  }
  if (n == 0 || !args[0].isTensor()) return false;
  const at::Tensor self = args[0].toTensor();
  if (schema.overload_name() == "out" && n == 2 && unary_pointwise_out(schema.name())) {
    // (self, *, out): out resized to self's sizes (its dtype is the caller's: bool here).
    at::Tensor out = args[1].toTensor();
    out.resize_(self.sizes());
    torch::jit::drop(*stack, n);
    torch::jit::push(*stack, std::move(out));
    return true;
  }
  at::Tensor result;
  if (shape_of_self(schema.name())) {
    result = at::empty_like(self);
  } else if (reduces_to_scalar(op)) {
    result = at::empty({}, self.options());
  } else if (schema.name() == "aten::mse_loss_backward" && n == 4) {
    result = at::empty_like(args[1].toTensor());  // (grad_output, self, target, reduction)
  } else if (schema.name() == "aten::mse_loss" && n == 3) {
    const at::Tensor target = args[1].toTensor();
    const bool none = args[2].toInt() == 0;  // at::Reduction::None
    result = none ? at::empty(at::infer_size(self.sizes(), target.sizes()), self.options())
                  : at::empty({}, self.options());
  } else if (schema.name() == "aten::index_select" && n == 3) {
    // (self, dim, index): self's sizes, dim's the index's length (an embedding's lookup).
    std::vector<int64_t> sizes = self.sizes().vec();
    if (!sizes.empty()) {
      sizes[c10::maybe_wrap_dim(args[1].toInt(), self.dim())] = args[2].toTensor().numel();
    }
    result = at::empty(sizes, self.options());
  } else if (schema.name() == "aten::where" && schema.overload_name() == "self" && n == 3) {
    // (condition, self, other): the three broadcast, in the values' promoted dtype.
    const at::Tensor a = args[1].toTensor(), b = args[2].toTensor();
    result = at::empty(at::infer_size(at::infer_size(self.sizes(), a.sizes()), b.sizes()),
                       self.options().dtype(at::result_type(a, b)));
  } else if (schema.name() == "aten::where" && schema.overload_name() == "self_out" && n == 4) {
    // (condition, self, other, *, out), which where.self calls: out resized to the three
    // broadcast (SDPA's math path turns a boolean mask into an additive one with it).
    const at::Tensor a = args[1].toTensor(), b = args[2].toTensor();
    result = args[3].toTensor();
    result.resize_(at::infer_size(at::infer_size(self.sizes(), a.sizes()), b.sizes()));
  } else if (schema.name() == "aten::embedding_dense_backward" && n == 5) {
    // (grad_output, indices, num_weights, padding_idx, scale_grad_by_freq): [num_weights, dim].
    result = at::empty({args[2].toInt(), self.size(-1)}, self.options());
  } else {
    return false;
  }
  torch::jit::drop(*stack, n);
  torch::jit::push(*stack, std::move(result));
  return true;
}

}  // namespace harness::sim

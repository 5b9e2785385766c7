// Normalization on sim as CUDA runs it (torch 2.11).
//
// RMS norm (native/layer_norm.cpp): `rms_norm` calls `_fused_rms_norm`, a CUDA kernel of its own
// whose composite a PrivateUse1 device took (pow, mean, add, rsqrt, mul...); its backward is
// `_fused_rms_norm_backward`. Sim runs both as one launch each.
//
// Batch norm (native/Normalization.cpp):
// `batch_norm` calls the composite `_batch_norm_impl_index`, which on CUDA hands the work to
// cuDNN when it can (`use_cudnn`: float32 or float16 input with float32 weight, not bfloat16;
// weight and bias given; running stats given, or neither while training; at least 3 dims; batch
// within cuDNN's limits): `cudnn_batch_norm` on contiguous arguments (in the input's suggested
// memory format), whose autograd formula runs `cudnn_batch_norm_backward` while training. Else
// `native_batch_norm`, as sim ran before. Sim registers its own kernel for the composite, at the
// autograd and the backend key (so autograd records `cudnn_batch_norm` as on CUDA), and for the
// two CUDA-only ops, each one launch computed by CPU's batch norm on host aliases.
#include <ATen/Context.h>
#include <ATen/TensorOperators.h>
#include <ATen/ops/_batch_norm_impl_index_native.h>
#include <ATen/ops/_fused_rms_norm.h>
#include <ATen/ops/cudnn_batch_norm.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/native_batch_norm.h>
#include <ATen/ops/native_batch_norm_backward.h>
#include <torch/library.h>

#include <array>
#include <limits>
#include <tuple>
#include <vector>

#include "harness/instrument/sim/host_compute.h"

namespace harness::sim {
namespace {

bool defined(const std::optional<at::Tensor>& t) { return t.has_value() && t->defined(); }

// Normalization.cpp's use_cudnn, for a device that has cuDNN 9 (its minimum epsilon is 0).
bool cudnn_would_run(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                     const std::optional<at::Tensor>& bias,
                     const std::optional<at::Tensor>& running_mean,
                     const std::optional<at::Tensor>& running_var, bool training, double eps,
                     bool cudnn_enabled) {
  if (!defined(weight) || !defined(bias)) return false;
  const c10::ScalarType in = input.scalar_type(), w = weight->scalar_type();
  const bool stats = defined(running_mean) && defined(running_var);
  const bool no_stats = !defined(running_mean) && !defined(running_var);
  return in != at::kBFloat16 && w != at::kBFloat16 && (in != at::kHalf || w == at::kFloat) &&
         (stats || (no_stats && training)) && input.dim() >= 3 &&
         ((training && input.size(0) <= 880801) || (!training && input.size(0) <= 65535)) &&
         eps >= 0.0 && cudnn_enabled && at::globalContext().userEnabledCuDNN() &&
         input.numel() < std::numeric_limits<int32_t>::max();
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, int64_t> batch_norm_impl_index(
    const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& running_mean,
    const std::optional<at::Tensor>& running_var, bool training, double momentum, double eps,
    bool cudnn_enabled) {
  if (input.numel() == 0 || !cudnn_would_run(input, weight, bias, running_mean, running_var,
                                             training, eps, cudnn_enabled)) {
    return at::native::_batch_norm_impl_index(input, weight, bias, running_mean, running_var,
                                              training, momentum, eps, cudnn_enabled);
  }
  const auto contiguous = [](const std::optional<at::Tensor>& t) {
    return defined(t) ? std::optional<at::Tensor>(t->contiguous()) : std::nullopt;
  };
  auto [output, save_mean, save_var, reserve] = at::cudnn_batch_norm(
      input.contiguous(input.suggest_memory_format()), weight->contiguous(), contiguous(bias),
      contiguous(running_mean), contiguous(running_var), training, momentum, eps);
  return {output, save_mean, save_var, reserve, 1};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> cudnn_batch_norm(
    const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
    const std::optional<at::Tensor>& running_mean, const std::optional<at::Tensor>& running_var,
    bool training, double exponential_average_factor, double epsilon) {
  return launch_on_host("aten::cudnn_batch_norm", input, [&] {
    const c10::Device device = input.device();
    auto [out, mean, invstd] =
        at::native_batch_norm(on_host(input), on_host(weight), on_host(bias), on_host(running_mean),
                              on_host(running_var), training, exponential_average_factor, epsilon);
    const at::TensorOptions host = input.options().device(at::kCPU);
    if (!training) {  // cuDNN's inference kernel saves nothing
      mean = at::empty({0}, host.dtype(weight.scalar_type()));
      invstd = at::empty({0}, host.dtype(weight.scalar_type()));
    }
    at::Tensor reserve = at::empty({0}, host.dtype(at::kByte));
    return std::make_tuple(to_device(out, device), to_device(mean, device),
                           to_device(invstd, device), to_device(reserve, device));
  });
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> cudnn_batch_norm_backward(
    const at::Tensor& input, const at::Tensor& grad_output, const at::Tensor& weight,
    const std::optional<at::Tensor>& running_mean, const std::optional<at::Tensor>& running_var,
    const std::optional<at::Tensor>& save_mean, const std::optional<at::Tensor>& save_var,
    double epsilon, const at::Tensor& /*reserveSpace*/) {
  return launch_on_host("aten::cudnn_batch_norm_backward", input, [&] {
    const c10::Device device = input.device();
    auto [gi, gw, gb] = at::native_batch_norm_backward(
        on_host(grad_output), on_host(input), on_host(weight), on_host(running_mean),
        on_host(running_var), on_host(save_mean), on_host(save_var), /*train=*/true, epsilon,
        {true, true, true});
    return std::make_tuple(to_device(gi, device), to_device(gw, device), to_device(gb, device));
  });
}

// The normalized dims of an rms norm over `normalized_shape`: the last ones.
std::vector<int64_t> normalized_dims(const at::Tensor& input, at::IntArrayRef normalized_shape) {
  std::vector<int64_t> dims;
  for (int64_t d = input.dim() - static_cast<int64_t>(normalized_shape.size()); d < input.dim();
       ++d) {
    dims.push_back(d);
  }
  return dims;
}

std::tuple<at::Tensor, at::Tensor> fused_rms_norm(const at::Tensor& input,
                                                  at::IntArrayRef normalized_shape,
                                                  const std::optional<at::Tensor>& weight,
                                                  std::optional<double> eps) {
  return launch_on_host("aten::_fused_rms_norm", input, [&] {
    const c10::Device device = input.device();
    // CPU's _fused_rms_norm is the composite: the same output and rstd (float32, 1 per row)
    auto [out, rstd] = at::_fused_rms_norm(on_host(input), normalized_shape, on_host(weight), eps);
    return std::make_tuple(to_device(out, device), to_device(rstd, device));
  });
}

std::tuple<at::Tensor, at::Tensor> fused_rms_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& input, at::IntArrayRef normalized_shape,
    const at::Tensor& rstd, const std::optional<at::Tensor>& weight, std::array<bool, 2> mask) {
  return launch_on_host("aten::_fused_rms_norm_backward", input, [&] {
    const c10::Device device = input.device();
    const std::vector<int64_t> dims = normalized_dims(input, normalized_shape);
    const at::Tensor g = on_host(grad_out).to(at::kFloat);
    const at::Tensor xhat = on_host(input).to(at::kFloat) * on_host(rstd);
    const at::Tensor gx = defined(weight) ? g * on_host(*weight).to(at::kFloat) : g;
    at::Tensor grad_input, grad_weight;
    if (mask[0]) {
      grad_input = (on_host(rstd) * (gx - xhat * (gx * xhat).mean(dims, /*keepdim=*/true)))
                       .to(input.scalar_type());
    }
    if (mask[1] && defined(weight)) {
      std::vector<int64_t> batch;
      for (int64_t d = 0; d < input.dim() - static_cast<int64_t>(normalized_shape.size()); ++d) {
        batch.push_back(d);
      }
      grad_weight = (batch.empty() ? g * xhat : (g * xhat).sum(batch)).to(weight->scalar_type());
    }
    return std::make_tuple(to_device(grad_input, device), to_device(grad_weight, device));
  });
}

}  // namespace

void register_cuda_normalization(c10::DispatchKey backend) {
  auto* impls = keep(new torch::Library(torch::Library::IMPL, "aten", backend, __FILE__, __LINE__));
  impls->impl("_batch_norm_impl_index", TORCH_FN(batch_norm_impl_index));
  impls->impl("cudnn_batch_norm", TORCH_FN(cudnn_batch_norm));
  impls->impl("cudnn_batch_norm_backward", TORCH_FN(cudnn_batch_norm_backward));
  // _fused_rms_norm is CompositeImplicitAutograd with an autograd kernel of its own: with a sim
  // kernel, AutogradPrivateUse1 takes that autograd kernel, as AutogradCUDA does.
  impls->impl("_fused_rms_norm", TORCH_FN(fused_rms_norm));
  impls->impl("_fused_rms_norm_backward", TORCH_FN(fused_rms_norm_backward));
  auto* autograd = keep(new torch::Library(torch::Library::IMPL, "aten",
                                           autograd_key_of(backend), __FILE__, __LINE__));
  autograd->impl("_batch_norm_impl_index", TORCH_FN(batch_norm_impl_index));
}

}  // namespace harness::sim

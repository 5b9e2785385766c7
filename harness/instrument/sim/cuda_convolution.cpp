// Convolution on sim as CUDA runs it (aten/src/ATen/native/Convolution.cpp, torch 2.11).
//
// `_convolution` (composite) picks a backend; for an out-of-tree device it calls
// `convolution_overrideable`, the hook sim implements here with CUDA's own choice:
//   - cuDNN: `cudnn_convolution` / `cudnn_convolution_transpose` on the input made contiguous in
//     the format cuDNN suggests (channels-last when the input or weight is), then the bias added
//     in place (`add_`), as `_convolution`'s ConvBackend::Cudnn and CudnnTranspose cases do;
//   - depthwise (groups == in channels > 1, not transposed): CUDA's own kernels
//     `_conv_depthwise2d` / `conv_depthwise3d` (bias fused), which `_convolution` prefers for
//     contiguous depthwise convolutions; channels-last depthwise goes to cuDNN.
// And cuDNN's grid sampler (`cudnn_grid_sampler`), which `grid_sampler` takes for a CUDA tensor
// where cuDNN accepts the sampling.
// Each is one launch of its CUDA name, computed by CPU's convolution on host aliases. The backward
// is `convolution_backward`, which CUDA registers as its own kernel: sim runs it as one op
// (cuda_kernel_ops.inc).
#include <ATen/Context.h>
#include <ATen/ops/_conv_depthwise2d.h>
#include <ATen/ops/conv_depthwise3d.h>
#include <ATen/ops/convolution.h>
#include <ATen/ops/cudnn_convolution.h>
#include <ATen/ops/cudnn_convolution_transpose.h>
#include <ATen/ops/grid_sampler_2d.h>
#include <ATen/ops/grid_sampler_2d_backward.h>
#include <torch/library.h>

#include <array>
#include <tuple>
#include <vector>

#include "harness/instrument/sim/host_compute.h"

namespace harness::sim {
namespace {

std::vector<int64_t> ints(c10::SymIntArrayRef v) {
  std::vector<int64_t> out;
  out.reserve(v.size());
  for (const c10::SymInt& i : v) out.push_back(i.expect_int());
  return out;
}

c10::MemoryFormat cudnn_memory_format(const at::Tensor& input, const at::Tensor& weight);

// A convolution without bias on the host, its result on the input's sim device; in `layout` where
// given (cuDNN's: the host kernel's own choice, and a meta function's, need not be CUDA's).
at::Tensor host_convolution(const at::Tensor& input, const at::Tensor& weight,
                            const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                            at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
                            at::IntArrayRef output_padding, int64_t groups,
                            std::optional<c10::MemoryFormat> layout = std::nullopt) {
  at::Tensor out = at::convolution(on_host(input), on_host(weight), on_host(bias), stride, padding,
                                   dilation, transposed, output_padding, groups);
  if (layout) out = out.contiguous(*layout);
  return to_device(out, input.device());
}

at::Tensor cudnn_convolution(const at::Tensor& self, const at::Tensor& weight,
                             c10::SymIntArrayRef padding, c10::SymIntArrayRef stride,
                             c10::SymIntArrayRef dilation, c10::SymInt groups, bool, bool, bool) {
  return launch_on_host("aten::cudnn_convolution", self, [&] {
    const std::vector<int64_t> zeros(padding.size(), 0);
    return host_convolution(self, weight, std::nullopt, ints(stride), ints(padding), ints(dilation),
                            false, zeros, groups.expect_int(), cudnn_memory_format(self, weight));
  });
}

at::Tensor cudnn_convolution_transpose(const at::Tensor& self, const at::Tensor& weight,
                                       c10::SymIntArrayRef padding,
                                       c10::SymIntArrayRef output_padding,
                                       c10::SymIntArrayRef stride, c10::SymIntArrayRef dilation,
                                       c10::SymInt groups, bool, bool, bool) {
  return launch_on_host("aten::cudnn_convolution_transpose", self, [&] {
    return host_convolution(self, weight, std::nullopt, ints(stride), ints(padding), ints(dilation),
                            true, ints(output_padding), groups.expect_int(),
                            cudnn_memory_format(self, weight));
  });
}

template <const char* Name>
at::Tensor conv_depthwise(const at::Tensor& self, const at::Tensor& weight,
                          c10::SymIntArrayRef /*kernel_size*/,
                          const std::optional<at::Tensor>& bias, c10::SymIntArrayRef stride,
                          c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation) {
  return launch_on_host(Name, self, [&] {
    const std::vector<int64_t> zeros(padding.size(), 0);
    return host_convolution(self, weight, bias, ints(stride), ints(padding), ints(dilation), false,
                            zeros, self.size(1));
  });
}
constexpr char kDepthwise2d[] = "aten::_conv_depthwise2d";
constexpr char kDepthwise3d[] = "aten::conv_depthwise3d";

c10::MemoryFormat cudnn_memory_format(const at::Tensor& input, const at::Tensor& weight) {
  // cudnn_conv_suggest_memory_format: channels-last when either is channels-last.
  const auto channels_last = [](const at::Tensor& t) {
    const c10::MemoryFormat f = t.suggest_memory_format();
    return f == c10::MemoryFormat::ChannelsLast || f == c10::MemoryFormat::ChannelsLast3d;
  };
  if (!channels_last(input) && !channels_last(weight)) return c10::MemoryFormat::Contiguous;
  return input.dim() == 5 ? c10::MemoryFormat::ChannelsLast3d : c10::MemoryFormat::ChannelsLast;
}

bool is_depthwise(const at::Tensor& input, const at::Tensor& weight, bool transposed,
                  int64_t groups) {
  return !transposed && (input.dim() == 4 || input.dim() == 5) && input.size(1) == groups &&
         groups > 1 && weight.size(0) % input.size(1) == 0;
}

// What `_convolution` runs on CUDA, for the sim's overrideable hook.
at::Tensor convolution_overrideable(const at::Tensor& input, const at::Tensor& weight,
                                    const std::optional<at::Tensor>& bias,
                                    c10::SymIntArrayRef stride, c10::SymIntArrayRef padding,
                                    c10::SymIntArrayRef dilation, bool transposed,
                                    c10::SymIntArrayRef output_padding, c10::SymInt groups) {
  const c10::MemoryFormat format = cudnn_memory_format(input, weight);
  const int64_t g = groups.expect_int();
  if (is_depthwise(input, weight, transposed, g) && format == c10::MemoryFormat::Contiguous) {
    std::vector<c10::SymInt> kernel(weight.sym_sizes().begin() + 2, weight.sym_sizes().end());
    return input.dim() == 4 ? at::_conv_depthwise2d_symint(input.contiguous(), weight, kernel, bias,
                                                           stride, padding, dilation)
                            : at::conv_depthwise3d_symint(input.contiguous(), weight, kernel, bias,
                                                          stride, padding, dilation);
  }
  const at::Context& ctx = at::globalContext();
  const bool deterministic = ctx.deterministicCuDNN() || ctx.deterministicAlgorithms();
  at::Tensor output =
      transposed ? at::cudnn_convolution_transpose_symint(
                       input.contiguous(format), weight, padding, output_padding, stride, dilation,
                       groups, ctx.benchmarkCuDNN(), deterministic, ctx.allowTF32CuDNN())
                 : at::cudnn_convolution_symint(input.contiguous(format), weight, padding, stride,
                                                dilation, groups, ctx.benchmarkCuDNN(),
                                                deterministic, ctx.allowTF32CuDNN());
  if (bias.has_value() && bias->defined()) {
    std::vector<int64_t> shape(input.dim(), 1);
    shape[1] = -1;
    output.add_(bias->reshape(shape));  // _convolution's reshape_bias, then add_
  }
  return output;
}

// cuDNN's grid sampler, which `grid_sampler` takes for a CUDA tensor where cuDNN accepts it
// (bilinear, zero padding, align_corners: GridSampler.cpp's cond_cudnn_grid_sampler): the native
// 2-d sampler's values with those settings, on the host; its output contiguous, as cuDNN's.
at::Tensor cudnn_grid_sampler(const at::Tensor& self, const at::Tensor& grid) {
  return launch_on_host("aten::cudnn_grid_sampler", self, [&] {
    at::Tensor out = at::grid_sampler_2d(on_host(self), on_host(grid), /*interpolation=*/0,
                                         /*padding=*/0, /*align_corners=*/true);
    return to_device(out.contiguous(), self.device());
  });
}

std::tuple<at::Tensor, at::Tensor> cudnn_grid_sampler_backward(const at::Tensor& self,
                                                               const at::Tensor& grid,
                                                               const at::Tensor& grad_output) {
  return launch_on_host("aten::cudnn_grid_sampler_backward", self, [&] {
    const std::array<bool, 2> both{true, true};
    auto [grad_self, grad_grid] = at::grid_sampler_2d_backward(
        on_host(grad_output), on_host(self), on_host(grid), 0, 0, true, both);
    return std::make_tuple(to_device(grad_self.contiguous(), self.device()),
                           to_device(grad_grid.contiguous(), self.device()));
  });
}

}  // namespace

void register_cuda_convolution(c10::DispatchKey backend) {
  auto* impls = keep(new torch::Library(torch::Library::IMPL, "aten", backend, __FILE__, __LINE__));
  impls->impl("convolution_overrideable", TORCH_FN(convolution_overrideable));
  impls->impl("cudnn_convolution", TORCH_FN(cudnn_convolution));
  impls->impl("cudnn_convolution_transpose", TORCH_FN(cudnn_convolution_transpose));
  impls->impl("_conv_depthwise2d", TORCH_FN(conv_depthwise<kDepthwise2d>));
  impls->impl("conv_depthwise3d", TORCH_FN(conv_depthwise<kDepthwise3d>));
  impls->impl("cudnn_grid_sampler", TORCH_FN(cudnn_grid_sampler));
  impls->impl("cudnn_grid_sampler_backward", TORCH_FN(cudnn_grid_sampler_backward));
}

}  // namespace harness::sim

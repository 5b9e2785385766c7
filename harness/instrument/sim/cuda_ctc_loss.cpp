// CTC loss on sim serving CUDA, as a CUDA build of torch 2.11 runs it (aten/src/ATen/native/
// LossCTC.cpp, native/cudnn/LossCTC.cpp, native/miopen/LossCTC_miopen.cpp).
//
// `ctc_loss` (composite, torch's own code) asks `_use_cudnn_ctc_loss` and `_use_miopen_ctc_loss`,
// CUDA-only ops, which path to take; without kernels for them it failed on CUDA tensors. Sim
// answers as a CUDA build with cuDNN does:
//   - `_use_miopen_ctc_loss`: false (a build without ROCm);
//   - `_use_cudnn_ctc_loss` (lengths as lists): cuDNN for blank 0, float32 log-probabilities of
//     3 dims, int32 targets on the CPU, contiguous and of 1 dim, every input length the full T and
//     every target length under 256 and at most its input's; (lengths as tensors) the same for
//     int32 lengths, whose values are read on the host: each `.to(kCPU)` of a CUDA length tensor
//     is a counted copy and sync, made as often as cuDNN's check makes it (once, then twice per
//     sample until the answer is no);
//   - `_cudnn_ctc_loss`: one launch, giving the costs and the gradient cuDNN computes with them
//     (the derivative of `_cudnn_ctc_loss` in derivatives.yaml scales that gradient): CPU's
//     `_ctc_loss` and `_ctc_loss_backward` on host aliases. The lengths-as-tensors overload first
//     moves CPU targets and lengths to the device (counted H2D copies), as cuDNN's v8 API reads
//     them there. (With CPU length tensors and reduction "mean", torch's composite then divides
//     the device's losses by the CPU lengths and fails, on CUDA as here.)
// Otherwise `ctc_loss` runs `_ctc_loss` (CUDA's kernel: the fallback) as before.
#include <ATen/Context.h>
#include <ATen/TensorUtils.h>
#include <ATen/ops/_ctc_loss.h>
#include <ATen/ops/_ctc_loss_backward.h>
#include <ATen/ops/ones.h>
#include <c10/util/irange.h>
#include <torch/library.h>

#include <tuple>
#include <vector>

#include "harness/instrument/sim/host_compute.h"

namespace harness::sim {
namespace {

// The conditions both of cuDNN's checks share, before the lengths.
bool cudnn_takes(const at::Tensor& log_probs, const at::Tensor& targets, int64_t blank) {
  return at::globalContext().userEnabledCuDNN() && blank == 0 && targets.dim() == 1 &&
         log_probs.scalar_type() == at::kFloat && targets.scalar_type() == at::kInt &&
         log_probs.device().type() == at::kCUDA && targets.is_contiguous() && log_probs.dim() == 3;
}

bool use_cudnn_ctc_loss(const at::Tensor& log_probs, const at::Tensor& targets,
                        at::IntArrayRef input_lengths, at::IntArrayRef target_lengths,
                        int64_t blank) {
  bool use = cudnn_takes(log_probs, targets, blank) && targets.device().type() == at::kCPU;
  if (!use) return false;
  for (const int64_t length : input_lengths) use = use && length == log_probs.size(0);
  for (const auto b : c10::irange(target_lengths.size())) {
    // Index b of the input lengths as cuDNN reads it (a shorter list is cuDNN's own problem).
    use = use && target_lengths[b] < 256 && target_lengths[b] <= input_lengths[b];
  }
  return use;
}

bool use_cudnn_ctc_loss_tensor(const at::Tensor& log_probs, const at::Tensor& targets,
                               const at::Tensor& input_lengths, const at::Tensor& target_lengths,
                               int64_t blank) {
  bool use = cudnn_takes(log_probs, targets, blank) && input_lengths.scalar_type() == at::kInt &&
             target_lengths.scalar_type() == at::kInt;
  if (!use) return false;
  // Not capturing a CUDA graph (sim never is): the lengths are read on the host, copied again for
  // every sample checked, as cuDNN's check does.
  const at::Tensor tlc = target_lengths.to(c10::Device(at::kCPU), at::kLong).contiguous();
  for (const auto b : c10::irange(tlc.numel())) {
    const at::Tensor ilc_b = input_lengths.to(c10::Device(at::kCPU), at::kLong).contiguous();
    const at::Tensor tlc_b = target_lengths.to(c10::Device(at::kCPU), at::kLong).contiguous();
    const int64_t tl = tlc_b.const_data_ptr<int64_t>()[b];
    use = use && tl < 256 && tl <= ilc_b.const_data_ptr<int64_t>()[b];
    if (!use) break;
  }
  return use;
}

bool use_miopen_ctc_loss(const at::Tensor&, const at::Tensor&, at::IntArrayRef, at::IntArrayRef,
                         int64_t) {
  return false;
}

bool use_miopen_ctc_loss_tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                const at::Tensor&, int64_t) {
  return false;
}

// cuDNN's costs (the negative log-likelihood of each sample) and its gradient with respect to
// the log-probabilities taken as unnormalised scores (CUDNN_LOSS_NORMALIZATION_SOFTMAX): what
// CPU's `_ctc_loss_backward` computes for an output gradient of ones.
std::tuple<at::Tensor, at::Tensor> host_cudnn_ctc_loss(const at::Tensor& log_probs,
                                                       const at::Tensor& targets,
                                                       at::IntArrayRef input_lengths,
                                                       at::IntArrayRef target_lengths) {
  const at::Tensor lp = on_host(log_probs);
  const at::Tensor tg = on_host(targets).to(at::kLong);
  const auto [costs, log_alpha] = at::_ctc_loss(lp, tg, input_lengths, target_lengths, 0, false);
  const at::Tensor grad =
      at::_ctc_loss_backward(at::ones({lp.size(1)}, lp.options()), lp, tg, input_lengths,
                             target_lengths, costs, log_alpha, 0, false)
          .contiguous();
  return {to_device(costs, log_probs.device()), to_device(grad, log_probs.device())};
}

void check_cudnn_arguments(const at::Tensor& log_probs, const at::Tensor& targets,
                           c10::Backend targets_backend, int64_t batch_size_of_inputs,
                           int64_t batch_size_of_targets, int64_t blank) {
  const at::CheckedFrom c = "cudnn_ctc_loss";
  const at::TensorArg lp{log_probs, "log_probs", 1};
  const at::TensorArg tg{targets, "targets", 2};
  at::checkDim(c, lp, 3);
  at::checkScalarType(c, lp, at::kFloat);
  at::checkDim(c, tg, 1);
  at::checkScalarType(c, tg, at::kInt);
  at::checkContiguous(c, tg);
  at::checkBackend(c, {*lp}, c10::Backend::CUDA);
  at::checkBackend(c, {*tg}, targets_backend);
  TORCH_CHECK(batch_size_of_inputs == log_probs.size(1),
              "input_lengths needs to have size to match batch_size");
  TORCH_CHECK(batch_size_of_targets == log_probs.size(1),
              "target_lengths needs to have size to match batch_size");
  TORCH_CHECK(blank == 0, "blank must be label 0 for cudnn_ctc_loss");
}

std::tuple<at::Tensor, at::Tensor> cudnn_ctc_loss(const at::Tensor& log_probs,
                                                  const at::Tensor& targets,
                                                  at::IntArrayRef input_lengths,
                                                  at::IntArrayRef target_lengths, int64_t blank,
                                                  bool /*deterministic*/, bool /*zero_infinity*/) {
  check_cudnn_arguments(log_probs, targets, c10::Backend::CPU,
                        static_cast<int64_t>(input_lengths.size()),
                        static_cast<int64_t>(target_lengths.size()), blank);
  return launch_on_host("aten::_cudnn_ctc_loss", log_probs, [&] {
    return host_cudnn_ctc_loss(log_probs, targets, input_lengths, target_lengths);
  });
}

std::vector<int64_t> lengths_on_host(const at::Tensor& lengths) {
  const at::Tensor host = on_host(lengths).to(at::kLong).contiguous().reshape({-1});
  return {host.const_data_ptr<int64_t>(), host.const_data_ptr<int64_t>() + host.numel()};
}

std::tuple<at::Tensor, at::Tensor> cudnn_ctc_loss_tensor(
    const at::Tensor& log_probs, const at::Tensor& targets, const at::Tensor& input_lengths,
    const at::Tensor& target_lengths, int64_t blank, bool /*deterministic*/,
    bool /*zero_infinity*/) {
  // cuDNN's v8 API reads targets and lengths on the device: what is on the CPU is moved there
  // first (the target lengths when the input lengths are on the CPU: cuDNN's own condition).
  const auto to_cuda = [](const at::Tensor& t) { return t.to(c10::Device(at::kCUDA)); };
  const bool lengths_on_cpu = input_lengths.device().type() == at::kCPU;
  const at::Tensor targets_d = targets.device().type() == at::kCPU ? to_cuda(targets) : targets;
  const at::Tensor input_lengths_d = lengths_on_cpu ? to_cuda(input_lengths) : input_lengths;
  const at::Tensor target_lengths_d = lengths_on_cpu ? to_cuda(target_lengths) : target_lengths;
  check_cudnn_arguments(log_probs, targets_d, c10::Backend::CUDA,
                        input_lengths_d.dim() > 0 ? input_lengths_d.size(0) : 1,
                        target_lengths_d.dim() > 0 ? target_lengths_d.size(0) : 1, blank);
  return launch_on_host("aten::_cudnn_ctc_loss", log_probs, [&] {
    // The kernel reads the lengths on the device: no copy the host waits for.
    return host_cudnn_ctc_loss(log_probs, targets_d, lengths_on_host(input_lengths_d),
                               lengths_on_host(target_lengths_d));
  });
}

}  // namespace

void register_cuda_ctc_loss(c10::DispatchKey backend) {
  auto* impls = keep(new torch::Library(torch::Library::IMPL, "aten", backend, __FILE__, __LINE__));
  impls->impl("_use_cudnn_ctc_loss", TORCH_FN(use_cudnn_ctc_loss));
  impls->impl("_use_cudnn_ctc_loss.Tensor", TORCH_FN(use_cudnn_ctc_loss_tensor));
  impls->impl("_use_miopen_ctc_loss", TORCH_FN(use_miopen_ctc_loss));
  impls->impl("_use_miopen_ctc_loss.Tensor", TORCH_FN(use_miopen_ctc_loss_tensor));
  impls->impl("_cudnn_ctc_loss", TORCH_FN(cudnn_ctc_loss));
  impls->impl("_cudnn_ctc_loss.Tensor", TORCH_FN(cudnn_ctc_loss_tensor));
}

}  // namespace harness::sim

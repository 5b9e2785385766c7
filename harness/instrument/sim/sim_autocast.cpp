// Mixed precision on sim as on CUDA: `torch.autocast("sim", dtype)` follows the policy the PyTorch
// it is compiled against (2.11 to 2.15) gives CUDA (aten/src/ATen/autocast_mode.cpp registers it for AutocastCUDA). The op lists
// are PyTorch's own X-macros from ATen/autocast_mode.h (AT_FORALL_LOWER_PRECISION_FP, _FP32,
// _FP32_SET_OPT_DTYPE, _DIFFERENT_REDISPATCH_SIGNATURE, _PROMOTE), registered here for the
// AutocastPrivateUse1 key with the same policies, so a sim run casts (and counts the casts of)
// exactly the ops a CUDA run casts. Every other op falls through, as CUDA's do; without that
// fallthrough, an op without a rule inside an autocast region had no kernel at all.
#include <ATen/autocast_mode.h>
#include <torch/library.h>

#include "harness/instrument/sim/sim_internal.h"
#include "harness/instrument/sim/torch_release.h"

namespace harness::sim {
namespace {

// CUDA bans binary_cross_entropy under autocast (autocast_mode.cpp, with this advice); so does sim.
at::Tensor binary_cross_entropy_banned(const at::Tensor&, const at::Tensor&,
                                       const std::optional<at::Tensor>&, int64_t) {
  TORCH_CHECK(false,
              "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to "
              "autocast.\nMany models use a sigmoid layer right before the binary cross entropy "
              "layer.\nIn this case, combine the two layers using "
              "torch.nn.functional.binary_cross_entropy_with_logits\nor torch.nn.BCEWithLogitsLoss."
              "  binary_cross_entropy_with_logits and BCEWithLogits are\nsafe to autocast.");
}

void register_policy(torch::Library& m) {
  using namespace at;  // the lists' signatures name Tensor, Scalar, ... as autocast_mode.cpp does
#define HARNESS_SIM_LOWER_PRECISION_FP(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
#define HARNESS_SIM_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
#define HARNESS_SIM_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
#define HARNESS_SIM_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
  AT_FORALL_LOWER_PRECISION_FP(HARNESS_SIM_LOWER_PRECISION_FP)
  AT_FORALL_FP32(HARNESS_SIM_FP32)
  AT_FORALL_FP32_SET_OPT_DTYPE(HARNESS_SIM_FP32_SET_OPT_DTYPE)
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)
  AT_FORALL_PROMOTE(HARNESS_SIM_PROMOTE)
#undef HARNESS_SIM_LOWER_PRECISION_FP
#undef HARNESS_SIM_FP32
#undef HARNESS_SIM_FP32_SET_OPT_DTYPE
#undef HARNESS_SIM_PROMOTE
  // What autocast_mode.cpp registers for CUDA beyond the lists (`_cudnn_rnn`'s kernel is in
  // cuda_rnn.cpp, as AutocastRNN.cpp is CUDA's).
  KERNEL_PRIVATEUSEONE(cudnn_convolution, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(cudnn_convolution_transpose, lower_precision_fp)
#if HARNESS_TORCH_RELEASE >= 215  // torch_release.h
  KERNEL_PRIVATEUSEONE(linalg_matrix_sqrth, fp32)
#endif
  m.impl(TORCH_SELECTIVE_NAME("aten::binary_cross_entropy"), TORCH_FN(binary_cross_entropy_banned));
}

}  // namespace

void register_autocast() {
  // torch::Library objects live for the rest of the process (the registrations with them).
  static auto* fallthrough = new torch::Library(
      torch::Library::IMPL, "_", c10::DispatchKey::AutocastPrivateUse1, __FILE__, __LINE__);
  fallthrough->fallback(torch::CppFunction::makeFallthrough());
  static auto* policy = new torch::Library(
      torch::Library::IMPL, "aten", c10::DispatchKey::AutocastPrivateUse1, __FILE__, __LINE__);
  register_policy(*policy);
}

}  // namespace harness::sim

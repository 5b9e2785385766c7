#pragma once
// The PyTorch release sim is compiled against, and what CUDA does differently between the
// releases it supports (2.11, the bench's LibTorch, to 2.15): each fact below is named by the
// behaviour, true from the release whose PyTorch source changed it (file, release, PR). sim's
// CUDA rules (cuda_*.cpp) branch on these facts only, never on the version numbers themselves;
// docs/counting.md ("CUDA's choice of op") has the table.
//
// Evidence: the sources named, the headers of both releases (sdp_utils_cpp.h), and the filter
// functions and messages in each release's libtorch_cuda.so. Where the first release is not
// established, the fact is keyed on the first release whose binary has it, as said beside it.
#include <torch/version.h>

namespace harness::sim::torch_release {

constexpr int kMajor = TORCH_VERSION_MAJOR;
constexpr int kMinor = TORCH_VERSION_MINOR;

constexpr bool at_least(int major, int minor) {
  return kMajor > major || (kMajor == major && kMinor >= minor);
}

// For what the preprocessor must decide (an op only a newer release declares): 211 for 2.11.
#define HARNESS_TORCH_RELEASE (TORCH_VERSION_MAJOR * 100 + TORCH_VERSION_MINOR)

// ----- host syncs (sync_rules.cpp) -------------------------------------------------------------

// native/DistributionTemplates.h CHECK_NORMAL_TENSOR_STD: `normal` with a tensor std reads
// std.min().ge(0) back to the host (.item()), in normal_impl and again in the normal_out_impl
// it calls; from 2.14 CUDA checks with at::_assert_async instead and does not wait. 2.14, #186508.
constexpr bool kNormalReadsTensorStdOnHost = !at_least(2, 14);

// ----- autocast (sim_autocast.cpp) -------------------------------------------------------------
// ATen/autocast_mode.cpp registers linalg_matrix_sqrth, an op new in 2.15, for AutocastCUDA with
// the fp32 policy, outside the header's lists (libtorch_cpu.so of 2.15:
// WrapFunction_<fp32, CUDA, linalg_matrix_sqrth>): HARNESS_TORCH_RELEASE >= 215.

// The cuDNN of the release's Linux CUDA wheel (its nvidia-cudnn-cu13 pin), as
// at::detail::getCUDAHooks().versionRuntimeCuDNN() reports it: 9.19.0 with 2.11, 9.26.0 with
// 2.15. A release between takes 2.11's (its pin is not modelled).
constexpr long kWheelCudnnVersion = at_least(2, 15) ? 92600 : 91900;

// ----- scaled_dot_product_attention: aten/src/ATen/native/transformers/attention.cpp,
// sdp_utils_cpp.h, cuda/sdp_utils.cpp ----------------------------------------------------------

// attention.cpp scaled_dot_product_attention: dense q, k and v of 3 dims get a batch dimension
// (sdp_utils_cpp.h normalize_unbatched_input; a mask is unsqueezed until it has 4) before the
// backend is chosen, and the output is squeezed back. Before, 3-d inputs always ran math
// (check_tensor_shapes wants 4 dims). 2.14, #192271.
constexpr bool kSdpaNormalizesUnbatchedInput = at_least(2, 14);

// sdp_utils_cpp.h check_batch_size_and_num_heads_dense<..., supports_mqa>: cuDNN, flash and
// memory-efficient take k and v of one head for a query of several (implicit MQA) without
// enable_gqa. 2.14, #191085.
constexpr bool kSdpaFusedAcceptImplicitMqa = at_least(2, 14);

// sdp_utils.cpp can_use_mem_efficient_attention: grouped-query heads with enable_gqa (k and v
// one head count that divides q's), check_batch_size_and_num_heads_dense<true, true, true>;
// before, <false>: one head count. 2.14, #191085.
constexpr bool kSdpaMemEfficientSupportsGqa = at_least(2, 14);

// sdp_utils.cpp check_data_ptr_alignment_mem_efficient (sm 8.0 and newer): the storage offsets
// of q, k and v times the element size a multiple of minimum_gemm_alignment * element size
// (16 bytes on sm 9.0), empty tensors exempt. #184258: in 2.15's binary, not in 2.11's; its
// number lies between #180718 (2.13) and #185553 (2.14), keyed on 2.14.
constexpr bool kSdpaMemEfficientNeedsAlignedOffsets = at_least(2, 14);

// sdp_utils.cpp check_cudnn_dropout: cuDNN takes a dropout_p that is a multiple of 1/16 only.
// 2.12, #174245.
constexpr bool kSdpaCudnnDropoutInSixteenths = at_least(2, 12);

// sdp_utils.cpp check_cudnn_tensor_shapes: cuDNN takes a batch and a head count of at most
// 65535 only. 2.13, #180718.
constexpr bool kSdpaCudnnBatchAndHeadsAtMost65535 = at_least(2, 13);

// sdp_utils.cpp check_flash_attention_grid_size: flash likewise (batch and heads <= 65535). In
// 2.15's binary, not in 2.11's; the release between is not established, keyed on 2.15.
constexpr bool kSdpaFlashBatchAndHeadsAtMost65535 = at_least(2, 15);

// sdp_utils.cpp check_cudnn_tensor_shapes and check_cudnn_d256_bprop_head_dim on sm 9.0: head
// dimensions up to 256 need cuDNN newer than 9.22 (and cudnn-frontend 1.24, which the wheels
// have had since 2.13), where they needed cuDNN 9.10; and with them, when q, k or v requires
// grad, only (d_qk, d_v) both <= 128, (192, 128) or (256, 256). 2.14, #185553.
constexpr bool kSdpaCudnnHeadDim256NeedsCudnn922 = at_least(2, 14);
constexpr bool kSdpaCudnnBackwardHeadDimPairs = at_least(2, 14);

}  // namespace harness::sim::torch_release

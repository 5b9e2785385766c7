// Scaled dot-product attention on sim as CUDA runs it on an H100 (aten/src/ATen/native/
// transformers/attention.cpp and cuda/sdp_utils.cpp) in the torch release sim is compiled
// against: 2.11's rules, and where a later release changed one, torch_release.h says which.
//
// `scaled_dot_product_attention` is composite: it asks the device for a backend and runs it. On
// CUDA (sm 9.0, the wheel's cuDNN: 9.19 with 2.11, 9.26 with 2.15) sdp_utils.cpp tries cuDNN
// attention, flash, memory-efficient, then the math composite; sim answers the same question
// with the same checks (attention_backend below) and runs the same ops:
//   - from 2.14, q, k and v of 3 dims first get a batch dimension (and the output loses it);
//   - a boolean mask becomes an additive one first: where(mask, scalar_tensor(0), -inf), with
//     -65504 for cuDNN;
//   - cuDNN: `_scaled_dot_product_cudnn_attention` (a 2-d or 4-d mask as it is);
//   - flash: the head dimension padded to a multiple of 8 where it is not, then
//     `_scaled_dot_product_flash_attention` (backward
//     `_scaled_dot_product_flash_attention_backward`);
//   - efficient: the mask padded to an 8-aligned last dimension where it is not and expanded, then
//     `_scaled_dot_product_efficient_attention` (backward `..._efficient_attention_backward`);
//   - math: `_scaled_dot_product_attention_math`, composite on CUDA too (bmm, softmax, ...).
// Outputs and gradients come in the kernels' memory layouts (a later `.contiguous()` copies what
// it would on CUDA).
// The fused ops are one launch each, computed on the host: by CPU's own fused attention and its
// backward where it runs, else written out in float32 (the backward recomputing the
// probabilities; the forward keeps the RNG state where dropout needs it, in the output CUDA keeps
// its Philox state in).
#include <ATen/Context.h>
#include <ATen/TensorOperators.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/_scaled_dot_product_attention_math.h>
#include <ATen/ops/amax.h>
#include <ATen/ops/_scaled_dot_product_cudnn_attention.h>
#include <ATen/ops/_scaled_dot_product_efficient_attention.h>
#include <ATen/ops/_scaled_dot_product_flash_attention.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu_backward.h>
#include <ATen/ops/constant_pad_nd.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/logsumexp.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/native_dropout.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros_like.h>
#include <torch/library.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <numeric>
#include <string>
#include <tuple>
#include <vector>

#include "harness/instrument/sim/host_compute.h"
#include "harness/instrument/sim/torch_release.h"

namespace harness::sim {
namespace {

using at::SDPBackend;
namespace release = torch_release;

bool same_heads(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  return q.size(1) == k.size(1) && q.size(1) == v.size(1);
}

// check_batch_size_and_num_heads_dense's head counts without enable_gqa: one for all, or (implicit
// MQA, from 2.14) one for k and v.
bool heads_without_gqa(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  return same_heads(q, k, v) || (release::kSdpaFusedAcceptImplicitMqa && q.size(1) > 0 &&
                                 k.size(1) == 1 && v.size(1) == 1);
}

// Grouped-query heads with enable_gqa where k and v must have one head count
// (check_grouped_query_attention<requires_same_num_heads = true>).
bool grouped_heads_same_kv(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  return k.size(1) == v.size(1) && k.size(1) > 0 && q.size(1) % k.size(1) == 0;
}

// check_cudnn_tensor_shapes / check_flash_attention_grid_size (from 2.13 / 2.15): the kernels'
// grid takes a batch and a head count of at most 65535.
bool batch_and_heads_at_most_65535(const at::Tensor& q) {
  return q.size(0) <= 65535 && q.size(1) <= 65535;
}

bool requires_grad(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  return at::GradMode::is_enabled() &&
         (q.requires_grad() || k.requires_grad() || v.requires_grad());
}

bool dense_4d(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  const auto last_stride_one = [](const at::Tensor& t) {
    return t.stride(-1) == 1 || t.size(-1) == 1;
  };
  return q.dim() == 4 && k.dim() == 4 && v.dim() == 4 && q.size(0) == k.size(0) &&
         q.size(0) == v.size(0) && q.size(2) > 0 && k.size(2) > 0 && last_stride_one(q) &&
         last_stride_one(k) && last_stride_one(v) && k.scalar_type() == q.scalar_type() &&
         v.scalar_type() == q.scalar_type();
}

bool low_precision(const at::Tensor& q) {
  return q.scalar_type() == at::kHalf || q.scalar_type() == at::kBFloat16;
}

// check_cudnn_tensor_shapes's head-dimension limit on sm 9.0 with the wheel's cuDNN: 256 from
// cuDNN 9.10 (2.11); from 2.14, 256 only past cuDNN 9.22, else 128 (192 for (192, 128)).
int64_t cudnn_head_dim_limit(int64_t d_qk, int64_t d_v) {
  constexpr long cudnn = release::kWheelCudnnVersion;
  if (release::kSdpaCudnnHeadDim256NeedsCudnn922) {
    if (cudnn > 92200) return 256;
    return cudnn >= 91100 && d_qk == 192 && d_v == 128 ? 192 : 128;
  }
  return cudnn >= 91000 ? 256 : 128;
}

// check_cudnn_d256_bprop_head_dim (from 2.14, with a cuDNN past 9.22): when an input requires
// grad, only the head dimensions cuDNN's backward has: both <= 128, (192, 128) or (256, 256).
bool cudnn_backward_has_head_dims(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  if (!release::kSdpaCudnnBackwardHeadDimPairs || release::kWheelCudnnVersion <= 92200 ||
      !requires_grad(q, k, v)) {
    return true;
  }
  const int64_t d_qk = q.size(-1), d_v = v.size(-1);
  return (d_qk <= 128 && d_v <= 128) || (d_qk == 192 && d_v == 128) || (d_qk == 256 && d_v == 256);
}

// sdp_utils.cpp's can_use_cudnn_attention on sm 9.0: 16-bit types; head dimensions multiples of
// 8 up to the limit above; a 2-d or 4-d mask that needs no gradient; grouped-query heads allowed;
// more than one key (and query, with dropout); not under deterministic algorithms. From 2.12 a
// dropout_p in 1/16ths, from 2.13 at most 65535 batches and heads, from 2.14 implicit MQA and
// the backward's head dimensions.
bool cudnn_can_run(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                   const std::optional<at::Tensor>& mask, double dropout_p, bool enable_gqa) {
  const at::Context& ctx = at::globalContext();
  if (!ctx.userEnabledCuDNNSDP() || ctx.deterministicAlgorithms() || !dense_4d(q, k, v) ||
      !low_precision(q)) {
    return false;
  }
  if (release::kSdpaCudnnDropoutInSixteenths && dropout_p * 16.0 != std::floor(dropout_p * 16.0)) {
    return false;
  }
  if (release::kSdpaCudnnBatchAndHeadsAtMost65535 && !batch_and_heads_at_most_65535(q)) {
    return false;
  }
  const int64_t d_qk = q.size(-1), d_v = v.size(-1);
  const int64_t limit = cudnn_head_dim_limit(d_qk, d_v);
  if (k.size(-1) != d_qk || d_qk % 8 != 0 || d_v % 8 != 0 || d_qk > limit || d_v > limit) {
    return false;
  }
  if (k.size(2) == 1 || (dropout_p > 0.0 && q.size(2) == 1)) return false;
  if (!heads_without_gqa(q, k, v) && !(enable_gqa && k.size(1) > 0 && v.size(1) > 0 &&
                                       q.size(1) % k.size(1) == 0 && q.size(1) % v.size(1) == 0)) {
    return false;
  }
  if (!cudnn_backward_has_head_dims(q, k, v)) return false;
  if (mask.has_value()) {
    const at::Tensor& m = *mask;
    if (m.requires_grad() || (m.dim() != 2 && m.dim() != 4)) return false;
    if (m.size(-2) != q.size(2) && m.size(-2) != 1) return false;
    if (m.size(-1) != k.size(2) && m.size(-1) != 1) return false;
    if (m.dim() == 4 && ((m.size(0) != 1 && m.size(0) != q.size(0)) ||
                         (m.size(1) != 1 && m.size(1) != q.size(1)))) {
      return false;
    }
  }
  return true;
}

// can_use_flash_attention on sm 9.0: 16-bit types, no mask, one head dimension of at most 256
// (padded to a multiple of 8), is_causal only with as many queries as keys. From 2.14 implicit
// MQA, from 2.15 at most 65535 batches and heads.
bool flash_can_run(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool has_mask,
                   bool is_causal, bool enable_gqa) {
  if (!at::globalContext().userEnabledFlashSDP() || !dense_4d(q, k, v) || has_mask ||
      !low_precision(q)) {
    return false;
  }
  if (release::kSdpaFlashBatchAndHeadsAtMost65535 && !batch_and_heads_at_most_65535(q)) {
    return false;
  }
  const bool heads = heads_without_gqa(q, k, v) || (enable_gqa && grouped_heads_same_kv(q, k, v));
  return heads && q.size(-1) == k.size(-1) && q.size(-1) == v.size(-1) && q.size(-1) <= 256 &&
         (!is_causal || q.size(2) == k.size(2));
}

// check_data_ptr_alignment_mem_efficient (from 2.14): storage_offset * element_size a multiple of
// minimum_gemm_alignment * element_size (16 bytes on sm 9.0), that is the offset a multiple of
// `alignment` elements; empty tensors exempt. (The caching allocator's base pointers are aligned
// more than that.)
bool offset_aligned(const at::Tensor& t, int64_t alignment) {
  return t.numel() == 0 || t.storage_offset() % alignment == 0;
}

// can_use_mem_efficient_attention on sm 9.0: float32 or 16-bit types, head dimensions aligned (4
// elements for float32, 8 for 16-bit types), one head count. From 2.14 grouped-query heads (with
// enable_gqa) and implicit MQA, and storage offsets aligned as the head dimensions.
bool efficient_can_run(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                       bool enable_gqa) {
  if (!at::globalContext().userEnabledMemEfficientSDP() || !dense_4d(q, k, v)) return false;
  if (q.scalar_type() != at::kFloat && !low_precision(q)) return false;
  const int64_t alignment = q.scalar_type() == at::kFloat ? 4 : 8;
  if (!(q.size(-1) == k.size(-1) && q.size(-1) % alignment == 0 && v.size(-1) % alignment == 0)) {
    return false;
  }
  if (release::kSdpaMemEfficientNeedsAlignedOffsets &&
      !(offset_aligned(q, alignment) && offset_aligned(k, alignment) &&
        offset_aligned(v, alignment))) {
    return false;
  }
  return heads_without_gqa(q, k, v) ||
         (release::kSdpaMemEfficientSupportsGqa && enable_gqa && grouped_heads_same_kv(q, k, v));
}

// The order CUDA tries the backends in: the context's (torch.nn.attention.sdpa_kernel can set
// it); while that is still the default, sdp_utils.cpp's priority_order() puts cuDNN first on
// sm 9.0 with a cuDNN newer than 9.15 (the wheels' are: 9.19 with 2.11, 9.26 with 2.15), unless
// TORCH_CUDNN_SDPA_DEPRIORITIZED is set.
std::array<SDPBackend, at::num_sdp_backends> backend_order() {
  std::array<SDPBackend, at::num_sdp_backends> order = at::globalContext().sDPPriorityOrder();
  static const std::array<SDPBackend, at::num_sdp_backends> kDefault = {
      SDPBackend::flash_attention, SDPBackend::efficient_attention, SDPBackend::math,
      SDPBackend::cudnn_attention, SDPBackend::overrideable};
  static const bool cudnn_first = [] {
    const char* env = std::getenv("TORCH_CUDNN_SDPA_DEPRIORITIZED");
    return release::kWheelCudnnVersion > 91500 &&
           (env == nullptr || std::string(env) == "0" || std::string(env).empty());
  }();
  if (cudnn_first && order == kDefault) {
    order = {SDPBackend::cudnn_attention, SDPBackend::flash_attention,
             SDPBackend::efficient_attention, SDPBackend::math, SDPBackend::overrideable};
  }
  return order;
}

SDPBackend attention_backend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                             const std::optional<at::Tensor>& mask, double dropout_p,
                             bool is_causal, bool enable_gqa) {
  for (const SDPBackend backend : backend_order()) {
    switch (backend) {
      case SDPBackend::cudnn_attention:
        if (cudnn_can_run(q, k, v, mask, dropout_p, enable_gqa)) return backend;
        break;
      case SDPBackend::flash_attention:
        if (flash_can_run(q, k, v, mask.has_value(), is_causal, enable_gqa)) return backend;
        break;
      case SDPBackend::efficient_attention:
        if (efficient_can_run(q, k, v, enable_gqa)) return backend;
        break;
      case SDPBackend::math:
        if (at::globalContext().userEnabledMathSDP()) return backend;
        break;
      default: break;
    }
  }
  TORCH_CHECK(false,
              "No available kernel. Aborting execution. (sim: no enabled backend of "
              "scaled_dot_product_attention can run these inputs on an H100)");
}

// ----- the host's attention: the fused ops' forward and (under autograd) backward --------------

double scale_of(const at::Tensor& q, std::optional<double> scale) {
  return scale.has_value() ? *scale : 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
}

// Attention written out, in float32 as the fused kernels accumulate, for what CPU's fused kernel
// does not take (dropout, grouped-query heads, a mask that needs a gradient). `mask` is additive
// (or undefined). The probabilities are kept for the backward only as long as it runs: like the
// GPU kernels, the backward recomputes them (and redraws the dropout mask from the RNG state the
// forward kept), so sim holds no more device memory than CUDA does.
struct AttentionProbs {
  at::Tensor q, k, v;  // float32; k and v with grouped-query heads repeated
  at::Tensor probs;    // softmax of the scores, before dropout
  at::Tensor lse;      // logsumexp of the scores over the keys
};

AttentionProbs attention_probs(const at::Tensor& q, at::Tensor k, at::Tensor v,
                               const at::Tensor& mask, bool is_causal, double scale) {
  if (k.size(1) != q.size(1)) {  // grouped-query heads
    k = k.repeat_interleave(q.size(1) / k.size(1), 1);
    v = v.repeat_interleave(q.size(1) / v.size(1), 1);
  }
  AttentionProbs a{q.to(at::kFloat), k.to(at::kFloat), v.to(at::kFloat), {}, {}};
  at::Tensor scores = at::matmul(a.q, a.k.transpose(-2, -1)) * scale;
  if (is_causal) {
    // Above the diagonal: masked (triu, not tril's logical_not, which has no meta function in
    // LibTorch alone, so that --compute shapes runs it without Python).
    const at::Tensor masked =
        at::ones({q.size(2), k.size(2)}, q.options().dtype(at::kBool)).triu(1);
    scores = scores.masked_fill(masked, -std::numeric_limits<float>::infinity());
  }
  if (mask.defined()) scores = scores + mask.to(at::kFloat);
  // Under --compute shapes only the shape: logsumexp's kernel reads the maxima (abs.out, which
  // has no meta function in LibTorch alone); amax has one, of the same result shape and dtype.
  a.lse = computes_shapes_only() ? at::amax(scores, -1) : at::logsumexp(scores, -1);
  a.probs = at::softmax(scores, -1);
  return a;
}

// The dropped-out probabilities and the mask that kept them (undefined without dropout).
std::tuple<at::Tensor, at::Tensor> drop(const at::Tensor& probs, double dropout_p) {
  if (dropout_p <= 0.0) return {probs, at::Tensor()};
  auto [dropped, keep] = at::native_dropout(probs, dropout_p, /*train=*/true);
  return {dropped, keep};
}

std::tuple<at::Tensor, at::Tensor> host_attention_math(const at::Tensor& q, const at::Tensor& k,
                                                       const at::Tensor& v, const at::Tensor& mask,
                                                       double dropout_p, bool is_causal,
                                                       double scale) {
  AttentionProbs a = attention_probs(q, k, v, mask, is_causal, scale);
  auto [dropped, keep] = drop(a.probs, dropout_p);
  return {at::matmul(dropped, a.v).to(q.scalar_type()), a.lse};
}

// Sums a gradient of `like`'s repeated heads back to its own (grouped-query heads).
at::Tensor per_own_head(const at::Tensor& grad, const at::Tensor& like) {
  if (grad.size(1) == like.size(1)) return grad;
  const int64_t groups = grad.size(1) / like.size(1);
  return grad.unflatten(1, {like.size(1), groups}).sum(2);
}

// The gradients of host_attention_math for q, k, v (and for the mask where `mask_grad`), from the
// recomputed probabilities: dV = P'^T dO, dP' = dO V^T, dS = P * (dP - rowsum(dP * P)),
// dQ = scale dS K, dK = scale dS^T Q, where P' is P with dropout applied.
std::vector<at::Tensor> host_attention_math_backward(const at::Tensor& grad_out,
                                                     const at::Tensor& q, const at::Tensor& k,
                                                     const at::Tensor& v, const at::Tensor& mask,
                                                     bool mask_grad, double dropout_p,
                                                     bool is_causal, double scale,
                                                     const at::Tensor& rng_state) {
  std::optional<HostRngRestore> rng;
  if (dropout_p > 0.0) rng.emplace(rng_state);  // the forward's draw, again
  AttentionProbs a = attention_probs(q, k, v, mask, is_causal, scale);
  auto [dropped, keep] = drop(a.probs, dropout_p);
  const at::Tensor g = grad_out.to(at::kFloat);
  const at::Tensor grad_v = at::matmul(dropped.transpose(-2, -1), g);
  at::Tensor grad_probs = at::matmul(g, a.v.transpose(-2, -1));
  if (keep.defined()) grad_probs = grad_probs * keep / (1.0 - dropout_p);
  const at::Tensor grad_scores =
      a.probs * (grad_probs - (grad_probs * a.probs).sum(-1, /*keepdim=*/true));
  std::vector<at::Tensor> grads = {
      (at::matmul(grad_scores, a.k) * scale).to(q.scalar_type()),
      per_own_head(at::matmul(grad_scores.transpose(-2, -1), a.q) * scale, k).to(k.scalar_type()),
      per_own_head(grad_v, v).to(v.scalar_type())};
  if (mask_grad) grads.push_back(grad_scores.sum_to_size(mask.sizes()).to(mask.scalar_type()));
  return grads;
}

// Whether CPU's own fused attention (_scaled_dot_product_flash_attention_for_cpu, the kernel a
// CPU run of the same model takes) computes the op: no dropout, one head count, one head
// dimension, a float mask of 2 or 4 dims that needs no gradient.
bool cpu_fused_runs(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                    const at::Tensor& mask, bool mask_grad, double dropout_p) {
  const bool heads = q.size(1) == k.size(1) && q.size(1) == v.size(1);
  const bool dims = q.size(-1) == k.size(-1) && q.size(-1) == v.size(-1);
  const bool mask_ok =
      !mask.defined() ||
      (!mask_grad && (mask.dim() == 2 || mask.dim() == 4) &&
       (mask.scalar_type() == at::kFloat || mask.scalar_type() == q.scalar_type()));
  return dropout_p == 0.0 && heads && dims && mask_ok;
}

// The fused ops' forward on the host: (output, logsumexp [B, H, Lq] float32).
std::tuple<at::Tensor, at::Tensor> host_attention(const at::Tensor& q, const at::Tensor& k,
                                                  const at::Tensor& v, const at::Tensor& mask,
                                                  double dropout_p, bool is_causal, double scale) {
  if (cpu_fused_runs(q, k, v, mask, false, dropout_p)) {
    return at::_scaled_dot_product_flash_attention_for_cpu(
        q, k, v, 0.0, is_causal, mask.defined() ? std::optional<at::Tensor>(mask) : std::nullopt,
        scale);
  }
  return host_attention_math(q, k, v, mask, dropout_p, is_causal, scale);
}

// The gradients for q, k, v (and an additive mask that needs one): CPU's fused backward from the
// forward's output and logsumexp where its forward ran, else host_attention_math_backward.
std::vector<at::Tensor> host_attention_backward(const at::Tensor& grad_out, const at::Tensor& q,
                                                const at::Tensor& k, const at::Tensor& v,
                                                const at::Tensor& out, const at::Tensor& lse,
                                                const at::Tensor& mask, bool mask_grad,
                                                double dropout_p, bool is_causal, double scale,
                                                const at::Tensor& rng_state) {
  if (cpu_fused_runs(q, k, v, mask, mask_grad, dropout_p) && lse.defined() && lse.numel() > 0) {
    auto [gq, gk, gv] = at::_scaled_dot_product_flash_attention_for_cpu_backward(
        grad_out, q, k, v, out, lse, 0.0, is_causal,
        mask.defined() ? std::optional<at::Tensor>(mask) : std::nullopt, scale);
    return {gq, gk, gv};
  }
  return host_attention_math_backward(grad_out, q, k, v, mask, mask_grad, dropout_p, is_causal,
                                      scale, rng_state);
}

at::Tensor rng_state_for(double dropout_p, const at::Tensor& like) {
  // Without dropout: a 0-dim seed, as the kernels' (and their meta functions', which inductor
  // checks a compiled graph's outputs against). With it, the host generator's state, which the
  // backward replays.
  return dropout_p > 0.0 ? save_host_rng_state()
                         : at::zeros({}, like.options().device(at::kCPU).dtype(at::kLong));
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, c10::SymInt, c10::SymInt, at::Tensor,
           at::Tensor, at::Tensor>
flash_attention(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                double dropout_p, bool is_causal, bool /*return_debug_mask*/,
                std::optional<double> scale) {
  return launch_on_host("aten::_scaled_dot_product_flash_attention", query, [&] {
    const c10::Device device = query.device();
    at::Tensor rng_state = rng_state_for(dropout_p, query);
    auto [out, lse] = host_attention(on_host(query), on_host(key), on_host(value), at::Tensor(),
                                     dropout_p, is_causal, scale_of(query, scale));
    const at::TensorOptions host = query.options().device(at::kCPU);
    at::Tensor none = at::zeros({}, host.dtype(at::kLong));  // the offset: 0-dim
    // flash_api.cpp's mha_fwd allocates its output with empty_like of the query, its logsumexp
    // [B, H, Lq] contiguous (the CPU kernel's is strided as [B, Lq, H]; inductor checks strides)
    return std::make_tuple(to_device(with_layout_of(out, query), device),
                           to_device(lse.contiguous(), device),
                           at::Tensor(), at::Tensor(), c10::SymInt(query.size(2)),
                           c10::SymInt(key.size(2)), to_device(rng_state, device),
                           to_device(none, device), to_device(at::empty({0}, host), device));
  });
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> flash_attention_backward(
    const at::Tensor& grad_out, const at::Tensor& query, const at::Tensor& key,
    const at::Tensor& value, const at::Tensor& out, const at::Tensor& logsumexp,
    const at::Tensor& /*cum_seq_q*/, const at::Tensor& /*cum_seq_k*/, c10::SymInt, c10::SymInt,
    double dropout_p, bool is_causal, const at::Tensor& philox_seed,
    const at::Tensor& /*philox_offset*/, std::optional<double> scale) {
  return launch_on_host("aten::_scaled_dot_product_flash_attention_backward", query, [&] {
    const c10::Device device = query.device();
    auto g =
        host_attention_backward(on_host(grad_out), on_host(query), on_host(key), on_host(value),
                                on_host(out), on_host(logsumexp), at::Tensor(), false, dropout_p,
                                is_causal, scale_of(query, scale), on_host(philox_seed));
    // the kernels allocate each gradient like its input
    return std::make_tuple(to_device(with_layout_of(g[0], query), device),
                           to_device(with_layout_of(g[1], key), device),
                           to_device(with_layout_of(g[2], value), device));
  });
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> efficient_attention(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
    const std::optional<at::Tensor>& attn_bias, bool compute_log_sumexp, double dropout_p,
    bool is_causal, std::optional<double> scale) {
  return launch_on_host("aten::_scaled_dot_product_efficient_attention", query, [&] {
    const c10::Device device = query.device();
    at::Tensor rng_state = rng_state_for(dropout_p, query);
    const at::Tensor bias = attn_bias.has_value() ? on_host(*attn_bias) : at::Tensor();
    auto [out, lse] = host_attention(on_host(query), on_host(key), on_host(value), bias, dropout_p,
                                     is_causal, scale_of(query, scale));
    // [B, H, Lq rounded up to 32], contiguous, as the kernel's (and its meta function's)
    const int64_t lq = query.size(2);
    lse = compute_log_sumexp
              ? at::constant_pad_nd(lse.contiguous(), {0, (lq + 31) / 32 * 32 - lq}, 0.0)
              : at::empty({0}, lse.options());
    at::Tensor offset = at::zeros({}, query.options().device(at::kCPU).dtype(at::kLong));
    // _efficient_attention_forward's output is (B, Lq, H, Dv), returned transposed to BHSD
    return std::make_tuple(to_device(with_memory_order(out, {0, 2, 1, 3}), device),
                           to_device(lse, device), to_device(rng_state, device),
                           to_device(offset, device));
  });
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> efficient_attention_backward(
    const at::Tensor& grad_out, const at::Tensor& query, const at::Tensor& key,
    const at::Tensor& value, const at::Tensor& attn_bias, const at::Tensor& out,
    const at::Tensor& logsumexp, const at::Tensor& philox_seed, const at::Tensor& /*philox_offset*/,
    double dropout_p, std::array<bool, 4> grad_input_mask, bool is_causal,
    std::optional<double> scale) {
  return launch_on_host("aten::_scaled_dot_product_efficient_attention_backward", query, [&] {
    const c10::Device device = query.device();
    const bool has_bias = attn_bias.defined();
    const bool bias_grad = has_bias && grad_input_mask[3];
    at::Tensor lse = on_host(logsumexp);  // rounded up to 32 queries by the forward
    if (lse.defined() && lse.dim() == 3 && lse.size(2) > query.size(2)) {
      lse = lse.narrow(2, 0, query.size(2));
    }
    auto g =
        host_attention_backward(on_host(grad_out), on_host(query), on_host(key), on_host(value),
                                on_host(out), lse, on_host(attn_bias), bias_grad,
                                dropout_p, is_causal, scale_of(query, scale), on_host(philox_seed));
    return std::make_tuple(
        to_device(with_layout_of(g[0], query), device),
        to_device(with_layout_of(g[1], key), device),
        to_device(with_layout_of(g[2], value), device),
        bias_grad ? to_device(g[3].to(attn_bias.scalar_type()), device) : at::Tensor());
  });
}

// cuDNN's output keeps the query's stride order (alloc_with_matching_layout), with the value's
// head dimension where that differs from the query's.
at::Tensor in_query_layout(const at::Tensor& out, const at::Tensor& query) {
  if (out.sizes() == query.sizes()) return with_layout_of(out, query);
  std::vector<int64_t> order(static_cast<size_t>(query.dim()));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return query.stride(a) > query.stride(b); });
  return with_memory_order(out, order);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, c10::SymInt, c10::SymInt, at::Tensor,
           at::Tensor, at::Tensor>
cudnn_attention(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                const std::optional<at::Tensor>& attn_bias, bool compute_log_sumexp,
                double dropout_p, bool is_causal, bool /*return_debug_mask*/,
                std::optional<double> scale) {
  return launch_on_host("aten::_scaled_dot_product_cudnn_attention", query, [&] {
    const c10::Device device = query.device();
    at::Tensor rng_state = rng_state_for(dropout_p, query);
    const at::Tensor bias = attn_bias.has_value() ? on_host(*attn_bias) : at::Tensor();
    auto [out, lse] = host_attention(on_host(query), on_host(key), on_host(value), bias, dropout_p,
                                     is_causal, scale_of(query, scale));
    // [B, H, Lq, 1] contiguous, as cuDNN's
    lse = compute_log_sumexp ? lse.contiguous().unsqueeze(-1) : at::Tensor();
    at::Tensor offset = at::empty({}, query.options().device(at::kCPU).dtype(at::kLong));
    return std::make_tuple(to_device(in_query_layout(out, query), device), to_device(lse, device),
                           at::Tensor(), at::Tensor(), c10::SymInt(query.size(2)),
                           c10::SymInt(key.size(2)), to_device(rng_state, device),
                           to_device(offset, device), at::Tensor());
  });
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> cudnn_attention_backward(
    const at::Tensor& grad_out, const at::Tensor& query, const at::Tensor& key,
    const at::Tensor& value, const at::Tensor& out, const at::Tensor& logsumexp,
    const at::Tensor& philox_seed, const at::Tensor& /*philox_offset*/, const at::Tensor& attn_bias,
    const at::Tensor& /*cum_seq_q*/, const at::Tensor& /*cum_seq_k*/, c10::SymInt, c10::SymInt,
    double dropout_p, bool is_causal, std::optional<double> scale) {
  return launch_on_host("aten::_scaled_dot_product_cudnn_attention_backward", query, [&] {
    const c10::Device device = query.device();
    const at::Tensor lse = logsumexp.defined() ? on_host(logsumexp).squeeze(-1) : logsumexp;
    auto g =
        host_attention_backward(on_host(grad_out), on_host(query), on_host(key), on_host(value),
                                on_host(out), lse, on_host(attn_bias), false, dropout_p, is_causal,
                                scale_of(query, scale), on_host(philox_seed));
    // the kernels allocate each gradient like its input
    return std::make_tuple(to_device(with_layout_of(g[0], query), device),
                           to_device(with_layout_of(g[1], key), device),
                           to_device(with_layout_of(g[2], value), device));
  });
}

// ----- the composite, with CUDA's choice ---------------------------------------------------------

// attention.cpp's convert_boolean_attn_mask (-inf where masked out) and, for cuDNN,
// convert_boolean_attn_mask_cudnn (-65504): where(mask, scalar_tensor(0), fill).
std::optional<at::Tensor> additive_mask(const std::optional<at::Tensor>& mask,
                                        c10::ScalarType dtype, double masked_out) {
  if (!mask.has_value() || !mask->defined()) return std::nullopt;
  if (mask->scalar_type() != at::kBool) return mask;
  const at::Tensor zero = at::scalar_tensor(0.0, mask->options().dtype(dtype));
  return at::where(*mask, zero, masked_out);
}

// pad_last_dim<Alignment, false> (flash) and pad_bias<Alignment> (efficient's mask).
at::Tensor pad_last_dim(const at::Tensor& t, int64_t alignment, bool keep_padded) {
  const int64_t last = t.size(-1);
  if (last % alignment == 0) return t;
  at::Tensor padded = at::constant_pad_nd(t, {0, alignment - last % alignment}, 0);
  return keep_padded ? padded : padded.slice(-1, 0, last);
}

bool aligned(const at::Tensor& t, int64_t alignment) {
  for (int64_t i = 0; i + 1 < t.dim(); ++i) {
    if (t.stride(i) % alignment != 0) return false;
  }
  return t.stride(-1) == 1;
}

bool logsumexp_needed(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  return at::GradMode::is_enabled() &&
         (q.requires_grad() || k.requires_grad() || v.requires_grad());
}

// sdp_utils_cpp.h normalize_unbatched_input (from 2.14): dense strided q, k and v of 3 dims.
bool unbatched(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  for (const at::Tensor* t : {&q, &k, &v}) {
    if (t->is_nested() || t->layout() != at::kStrided || t->dim() != 3) return false;
  }
  return true;
}

at::Tensor scaled_dot_product_attention(const at::Tensor& query, const at::Tensor& key,
                                        const at::Tensor& value,
                                        const std::optional<at::Tensor>& attn_mask,
                                        double dropout_p, bool is_causal,
                                        std::optional<double> scale, bool enable_gqa) {
  std::optional<at::Tensor> given =
      attn_mask.has_value() && attn_mask->defined() ? attn_mask : std::nullopt;
  if (release::kSdpaNormalizesUnbatchedInput && unbatched(query, key, value)) {
    // attention.cpp: the whole op again on a batch of one (so a fused backend can take it), its
    // output squeezed back; the mask is unsqueezed until it has 4 dimensions
    while (given.has_value() && given->dim() < 4) given = given->unsqueeze(0);
    return harness::sim::scaled_dot_product_attention(query.unsqueeze(0), key.unsqueeze(0),
                                                      value.unsqueeze(0), given, dropout_p,
                                                      is_causal, scale, enable_gqa)
        .squeeze(0);
  }
  const SDPBackend backend =
      attention_backend(query, key, value, given, dropout_p, is_causal, enable_gqa);
  std::optional<at::Tensor> mask = additive_mask(
      given, query.scalar_type(),
      backend == SDPBackend::cudnn_attention ? -65504.0 : -std::numeric_limits<double>::infinity());
  switch (backend) {
    case SDPBackend::cudnn_attention:
      return std::get<0>(at::_scaled_dot_product_cudnn_attention(
          query, key, value, mask, logsumexp_needed(query, key, value), dropout_p, is_causal, false,
          scale));
    case SDPBackend::flash_attention: {
      const int64_t head_dim = query.size(-1);
      const double og_scale = scale_of(query, scale);  // of the unpadded head dimension
      auto out = at::_scaled_dot_product_flash_attention(
          pad_last_dim(query, 8, true), pad_last_dim(key, 8, true), pad_last_dim(value, 8, true),
          dropout_p, is_causal, false, og_scale);
      at::Tensor output = std::get<0>(out);
      return output.size(-1) != head_dim ? output.slice(-1, 0, head_dim) : output;
    }
    case SDPBackend::efficient_attention:
      if (mask.has_value()) {
        at::Tensor m = aligned(*mask, 8) ? *mask : pad_last_dim(*mask, 8, false);
        mask = m.expand({query.size(0), query.size(1), query.size(2), key.size(2)});
      }
      return std::get<0>(at::_scaled_dot_product_efficient_attention(
          query, key, value, mask, logsumexp_needed(query, key, value), dropout_p, is_causal,
          scale));
    default:
      return std::get<0>(at::_scaled_dot_product_attention_math(
          query, key, value, mask, dropout_p, is_causal, std::nullopt, scale, enable_gqa));
  }
}

}  // namespace

void register_cuda_attention(c10::DispatchKey backend) {
  auto* impls = keep(new torch::Library(torch::Library::IMPL, "aten", backend, __FILE__, __LINE__));
  impls->impl("scaled_dot_product_attention", TORCH_FN(scaled_dot_product_attention));
  impls->impl("_scaled_dot_product_flash_attention", TORCH_FN(flash_attention));
  impls->impl("_scaled_dot_product_flash_attention_backward", TORCH_FN(flash_attention_backward));
  impls->impl("_scaled_dot_product_cudnn_attention", TORCH_FN(cudnn_attention));
  impls->impl("_scaled_dot_product_cudnn_attention_backward", TORCH_FN(cudnn_attention_backward));
  impls->impl("_scaled_dot_product_efficient_attention", TORCH_FN(efficient_attention));
  impls->impl("_scaled_dot_product_efficient_attention_backward",
              TORCH_FN(efficient_attention_backward));
  auto* autograd = keep(new torch::Library(torch::Library::IMPL, "aten",
                                           autograd_key_of(backend), __FILE__, __LINE__));
  autograd->impl("scaled_dot_product_attention", TORCH_FN(scaled_dot_product_attention));
}

}  // namespace harness::sim

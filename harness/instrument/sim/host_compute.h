#pragma once
// What the sim's kernels for CUDA-only ops share (cuda_*.cpp): an op that CPU PyTorch has no
// kernel for (cudnn_convolution, _cudnn_rnn, _scaled_dot_product_flash_attention, ...) runs as
// one launch of its own name, its result computed by CPU ops on host aliases of the sim tensors.
// Nothing the CPU ops do is counted (they are the sim's own work, as the fallback's CPU kernel
// is); what they allocate is the device's memory.
#include <ATen/core/Tensor.h>
#include <c10/core/DeviceGuard.h>

#include <optional>
#include <string_view>
#include <tuple>
#include <utility>

#include "harness/instrument/collector.h"
#include "harness/instrument/memory_ledger.h"
#include "harness/instrument/sim/sim_device.h"
#include "harness/instrument/sim/sim_internal.h"

namespace harness::sim {

// A CPU tensor over the memory of a sim tensor (under Compute::kShapes a meta tensor of its
// geometry: the host computation then runs meta functions only); undefined stays undefined; a CPU
// tensor, such as a 0-dim scalar argument, stays itself.
inline at::Tensor on_host(const at::Tensor& t) {
  return is_sim(t) ? compute_alias(t) : t;
}
inline std::optional<at::Tensor> on_host(const std::optional<at::Tensor>& t) {
  return t.has_value() ? std::optional<at::Tensor>(on_host(*t)) : std::nullopt;
}

// A host result in the memory layout a CUDA kernel gives its output (copied on the host, not
// counted): as `like`'s strides (a kernel that allocates with empty_like(like)), or in memory
// order `order` (a permutation of its dims; {0, 2, 1, 3}: a BHSD result held as BSHD). Layouts
// decide whether a later `.contiguous()` or reshape copies, so they are part of what is counted.
at::Tensor with_layout_of(const at::Tensor& values, const at::Tensor& like);
at::Tensor with_memory_order(const at::Tensor& values, at::IntArrayRef order);

// One launch of `op` on the device of `like`: runs `compute` (CPU ops on on_host() aliases) with
// what it allocates charged to that device, and records the launch with the time it took.
template <class Compute>
auto launch_on_host(std::string_view op, const at::Tensor& like, Compute&& compute) {
  const c10::DeviceGuard guard(like.device());
  const int64_t begin = events::begin_time();
  auto result = [&] {
    const memory::ChargeTo charge_to(like.device().index());
    return compute();
  }();
  events::record_launch(op, begin);
  return result;
}

// While alive: autograd enabled on CPU tensors, inside a sim kernel (where the dispatcher has
// excluded the autograd keys): for a backward computed by recomputing the forward on the host.
class HostAutogradScope {
 public:
  HostAutogradScope();
  ~HostAutogradScope();
  HostAutogradScope(const HostAutogradScope&) = delete;
  HostAutogradScope& operator=(const HostAutogradScope&) = delete;

 private:
  struct State;
  State* state_;
};

// The CPU generator's state, saved into a tensor at a forward op (a "reserve" of the op) and put
// back for the host recomputation in its backward, so that dropout draws the same mask.
at::Tensor save_host_rng_state();
class HostRngRestore {
 public:
  explicit HostRngRestore(const at::Tensor& saved_state);
  ~HostRngRestore();
  HostRngRestore(const HostRngRestore&) = delete;
  HostRngRestore& operator=(const HostRngRestore&) = delete;

 private:
  at::Tensor previous_;
};

// Registers the sim's kernels for CUDA-only ops and CUDA's choice of op in composite code at
// `backend` (PrivateUse1 or CUDA) and its autograd key (called by register_kernels(); the
// torch::Library objects live for the rest of the process, the registrations with them).
void register_cuda_convolution(c10::DispatchKey backend);
void register_cuda_normalization(c10::DispatchKey backend);
void register_cuda_rnn(c10::DispatchKey backend);
void register_cuda_attention(c10::DispatchKey backend);
void register_cuda_out_dtype(c10::DispatchKey backend);
void register_cuda_ctc_loss(c10::DispatchKey backend);

inline c10::DispatchKey autograd_key_of(c10::DispatchKey backend) {
  return c10::getAutogradKeyFromBackend(c10::toBackendComponent(backend));
}

}  // namespace harness::sim

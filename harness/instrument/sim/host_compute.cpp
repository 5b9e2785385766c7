// The pieces host_compute.h declares for the sim's kernels of CUDA-only ops.
#include "harness/instrument/sim/host_compute.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include <vector>

namespace harness::sim {

at::Tensor with_layout_of(const at::Tensor& values, const at::Tensor& like) {
  if (!values.defined()) return values;
  at::Tensor out = at::empty_like(on_host(like), values.options());  // keeps dense strides
  return out.copy_(values);
}

at::Tensor with_memory_order(const at::Tensor& values, at::IntArrayRef order) {
  if (!values.defined()) return values;
  std::vector<int64_t> sizes, inverse(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    sizes.push_back(values.size(order[i]));
    inverse[order[i]] = static_cast<int64_t>(i);
  }
  return at::empty(sizes, values.options()).permute(inverse).copy_(values);
}

struct HostAutogradScope::State {
  c10::impl::ForceDispatchKeyGuard keys{c10::default_included_set, c10::default_excluded_set};
  at::AutoGradMode grad{true};
};

HostAutogradScope::HostAutogradScope() : state_(new State()) {}
HostAutogradScope::~HostAutogradScope() { delete state_; }

at::Tensor save_host_rng_state() { return at::detail::getDefaultCPUGenerator().get_state(); }

HostRngRestore::HostRngRestore(const at::Tensor& saved_state) {
  if (saved_state.is_meta()) return;  // Compute::kShapes: no numbers drawn, none to replay
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  const std::lock_guard<std::mutex> lock(generator.mutex());
  previous_ = generator.get_state();
  generator.set_state(saved_state);
}

HostRngRestore::~HostRngRestore() {
  if (!previous_.defined()) return;
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  const std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_state(previous_);
}

}  // namespace harness::sim

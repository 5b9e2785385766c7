#include "harness/runtime/parallel/zero.h"

#include <ATen/ops/add.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/full.h>
#include <ATen/ops/tensor.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <cstring>
#include <numeric>

#include "harness/runtime/checkpoint/checkpoint.h"
#include "harness/instrument/site.h"

namespace harness::runtime {

const char* to_string(ParamBroadcast mode) {
  return mode == ParamBroadcast::Bucketed ? "bucketed" : "per_param";
}

const char* to_string(Consolidation how) {
  switch (how) {
    case Consolidation::ObjectList: return "object_list";
    case Consolidation::Object: return "object";
    case Consolidation::Tensor: return "tensor";
  }
  return "?";
}

std::vector<int> partition_parameters(const std::vector<at::Tensor>& params, int world_size) {
  TORCH_CHECK(world_size >= 1, "world size must be at least 1");
  std::vector<size_t> order(params.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return params[a].numel() > params[b].numel(); });
  std::vector<int64_t> load(static_cast<size_t>(world_size), 0);
  std::vector<int> owners(params.size(), 0);
  for (size_t i : order) {
    const auto least = std::min_element(load.begin(), load.end());
    owners[i] = static_cast<int>(least - load.begin());
    *least += params[i].numel();
  }
  return owners;
}

namespace {

// A CPU tensor holding `bytes` (torch.ByteTensor(storage)).
at::Tensor byte_tensor(const std::vector<char>& bytes) {
  at::Tensor t = at::empty({static_cast<int64_t>(bytes.size())}, at::kByte);
  if (!bytes.empty()) std::memcpy(t.data_ptr(), bytes.data(), bytes.size());
  return t;
}

std::vector<char> bytes_of(const at::Tensor& cpu_bytes, int64_t n) {
  const auto* p = static_cast<const char*>(cpu_bytes.data_ptr());
  return std::vector<char>(p, p + n);
}

// torch.LongTensor([value]).to(device): built on the host, then copied (blocking).
at::Tensor long_on(int64_t value, c10::Device device) {
  HARNESS_SITE();
  return at::tensor({value}, at::kLong).to(device);
}

}  // namespace

ZeroRedundancyOptimizer::ZeroRedundancyOptimizer(std::vector<at::Tensor> params,
                                                 Communicator& comm, AdamOptions adam,
                                                 ParamBroadcast broadcast)
    : params_(std::move(params)), comm_(comm), adam_(std::move(adam)), broadcast_(broadcast) {
  TORCH_CHECK(!params_.empty(), "ZeroRedundancyOptimizer needs parameters");
  for (const at::Tensor& p : params_) {
    TORCH_CHECK(p.device() == params_[0].device() && p.dtype() == params_[0].dtype(),
                "ZeroRedundancyOptimizer takes parameters of one device and dtype");
  }
  owners_ = partition_parameters(params_, comm_.world_size());
  if (broadcast_ == ParamBroadcast::Bucketed) {
    // parameters_as_bucket_view: each rank's parameters become views into one flat bucket.
    c10::AutoGradMode no_grad(false);
    for (int r = 0; r < comm_.world_size(); ++r) {
      int64_t total = 0;
      for (size_t i = 0; i < params_.size(); ++i) total += owners_[i] == r ? params_[i].numel() : 0;
      at::Tensor bucket = at::empty({total}, params_[0].options().requires_grad(false));
      int64_t offset = 0;
      for (size_t i = 0; i < params_.size(); ++i) {
        if (owners_[i] != r) continue;
        const int64_t n = params_[i].numel();
        at::Tensor view = bucket.narrow(0, offset, n).view(params_[i].sizes());
        view.copy_(params_[i].detach());
        params_[i].set_data(view);
        offset += n;
      }
      buckets_.push_back(bucket);
    }
  }
  std::vector<at::Tensor> mine;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (owners_[i] != comm_.rank()) continue;
    mine.push_back(params_[i]);
    local_to_global_.push_back(static_cast<int64_t>(i));
  }
  if (!mine.empty()) local_ = std::make_unique<Adam>(std::move(mine), adam_);
}

void ZeroRedundancyOptimizer::step() {
  if (local_) local_->step();
  ++steps_;
  consolidated_.reset();
  broadcast_parameters();
}

void ZeroRedundancyOptimizer::broadcast_parameters() {
  c10::AutoGradMode no_grad(false);
  if (broadcast_ == ParamBroadcast::Bucketed) {
    for (int r = 0; r < comm_.world_size(); ++r) {
      if (buckets_[r].numel() > 0) comm_.broadcast(buckets_[r], r);
    }
    return;
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    at::Tensor data = params_[i].detach();
    comm_.broadcast(data, owners_[i]);
  }
}

void ZeroRedundancyOptimizer::zero_grad(bool set_to_none) { zero_grads(params_, set_to_none); }

OptimizerStateDict ZeroRedundancyOptimizer::local_state_dict() const {
  OptimizerStateDict out;
  if (!local_) return out;
  OptimizerStateDict sd = local_->state_dict();
  for (auto& [index, entries] : sd.state) out.state[local_to_global_.at(index)] = entries;
  return out;
}

OptimizerStateDict ZeroRedundancyOptimizer::state_dict() const {
  TORCH_CHECK(consolidated_.has_value(),
              "ZeroRedundancyOptimizer::state_dict: call consolidate_state_dict on every rank "
              "first; only the rank it consolidated to holds the whole state");
  return *consolidated_;
}

void ZeroRedundancyOptimizer::load_state_dict(const OptimizerStateDict& state) {
  if (!local_) return;
  OptimizerStateDict mine;
  for (size_t local = 0; local < local_to_global_.size(); ++local) {
    auto it = state.state.find(local_to_global_[local]);
    if (it != state.state.end()) mine.state[static_cast<int64_t>(local)] = it->second;
  }
  OptimizerStateDict::Group group;
  if (!state.param_groups.empty()) group.options = state.param_groups[0].options;
  for (size_t i = 0; i < local_to_global_.size(); ++i) group.params.push_back(static_cast<int64_t>(i));
  mine.param_groups.push_back(std::move(group));
  local_->load_state_dict(mine);
}

void ZeroRedundancyOptimizer::for_each_state_tensor(
    const std::function<void(const std::string&, at::Tensor&)>& fn) {
  if (local_) local_->for_each_state_tensor(fn);
}

void ZeroRedundancyOptimizer::consolidate_state_dict(Consolidation how, int to) {
  TORCH_CHECK(steps_ > 0, "consolidate_state_dict before the first step: there is no state");
  const int me = comm_.rank();
  // torch's consolidate_state_dict first builds, on every rank, the placeholder it hands
  // _broadcast_object where it receives: `empty_messenger = torch.tensor([0], dtype=torch.uint8,
  // device=...)`, a blocking H2D (found by the parity test against torch's own ZeRO).
  at::Tensor empty_messenger;
  if (how == Consolidation::Object) {
    HARNESS_SITE();
    empty_messenger = at::zeros({1}, at::kByte).to(params_[0].device());
  }
  OptimizerStateDict merged;
  for (int src = 0; src < comm_.world_size(); ++src) {
    OptimizerStateDict part;
    if (src == to) {
      if (me == to) part = local_state_dict();  // nothing to send: it is already here
    } else if (how == Consolidation::Tensor) {
      part = broadcast_state_tensors(src);
    } else if (me == src) {
      send_object(local_state_dict(), how);
    } else {
      part = receive_object(src, how);
    }
    if (me != to) continue;
    // _recursive_copy_to_device(..., non_blocking=True, device="cpu")
    for (auto& [index, entries] : part.state) {
      auto& dst = merged.state[index];
      HARNESS_SITE();
      for (auto& [key, tensor] : entries) dst[key] = tensor.to(at::kCPU, /*non_blocking=*/true);
    }
  }
  if (me != to) {
    consolidated_.reset();
    return;
  }
  OptimizerStateDict::Group group;
  if (local_) group.options = local_->state_dict().param_groups.at(0).options;
  for (size_t i = 0; i < params_.size(); ++i) group.params.push_back(static_cast<int64_t>(i));
  merged.param_groups.push_back(std::move(group));
  consolidated_ = std::move(merged);
}

void ZeroRedundancyOptimizer::send_object(const OptimizerStateDict& state, Consolidation how) {
  const c10::Device device = params_[0].device();
  const int me = comm_.rank();
  // Both ways pickle the state as torch.save does: every device tensor copied to the host.
  const std::vector<char> bytes = pickle_optimizer_state(state);
  const auto n = static_cast<int64_t>(bytes.size());
  if (how == Consolidation::ObjectList) {
    // _object_to_tensor: ByteTensor(...).to(device), LongTensor([numel]).to(device); then
    // object_sizes_tensor = torch.cat(size_list).
    HARNESS_SITE();
    at::Tensor object_tensor = byte_tensor(bytes).to(device);
    at::Tensor sizes = at::cat({long_on(n, device)});
    comm_.broadcast(sizes, me);
    comm_.broadcast(object_tensor, me);
    return;
  }
  // ZeRO's _broadcast_object: length first, then the bytes.
  at::Tensor length = long_on(n, device);
  HARNESS_SITE();
  at::Tensor data = byte_tensor(bytes).to(device);
  comm_.broadcast(length, me);
  comm_.broadcast(data, me);
}

OptimizerStateDict ZeroRedundancyOptimizer::receive_object(int src, Consolidation how) {
  const c10::Device device = params_[0].device();
  if (how == Consolidation::ObjectList) {
    at::Tensor sizes = at::empty({1}, at::TensorOptions().dtype(at::kLong).device(device));
    comm_.broadcast(sizes, src);
    HARNESS_SITE();
    at::Tensor object_tensor =
        at::empty({sizes.sum().item<int64_t>()}, at::TensorOptions().dtype(at::kByte).device(device));
    comm_.broadcast(object_tensor, src);
    // for i, obj_size in enumerate(object_sizes_tensor): with offset = 0
    const at::Tensor obj_size = sizes.select(0, 0);
    const at::Tensor end = at::add(obj_size, 0);                     // offset + obj_size
    HARNESS_SITE();
    const at::Tensor view = object_tensor.slice(0, 0, end.item<int64_t>());  // __index__
    at::add(obj_size, 0);  // offset += obj_size: a launch; with one object nothing reads it
    // _tensor_to_object(obj_view, obj_size): tensor.cpu(), then bytes[:tensor_size] (__index__)
    HARNESS_SITE();
    const at::Tensor host = view.cpu();
    HARNESS_SITE();
    const int64_t n = obj_size.item<int64_t>();
    // The unpickler puts every tensor back on the device it was saved from: the sender's.
    return unpickle_optimizer_state(bytes_of(host, n), std::nullopt);
  }
  at::Tensor length = long_on(0, device);
  comm_.broadcast(length, src);
  HARNESS_SITE();
  at::Tensor data =
      at::empty({length.item<int64_t>()}, at::TensorOptions().dtype(at::kByte).device(device));
  comm_.broadcast(data, src);
  HARNESS_SITE();
  const at::Tensor host = data.cpu();
  return unpickle_optimizer_state(bytes_of(host, host.numel()), device);  // map_location
}

OptimizerStateDict ZeroRedundancyOptimizer::broadcast_state_tensors(int src) {
  // Every rank knows the partition, the shapes and Adam's state layout, so each state tensor can
  // be broadcast into a buffer that is already on this rank's device. A CPU `step` (for-loop and
  // foreach Adam) is the same on every rank, since all of them step together: it is rebuilt from
  // this rank's own step count instead of being sent.
  const c10::Device device = params_[0].device();
  const bool step_on_device = adam_.impl == AdamImpl::Fused || adam_.capturable;
  std::vector<std::string> keys = {"exp_avg", "exp_avg_sq"};
  if (adam_.amsgrad) keys.push_back("max_exp_avg_sq");
  const bool sending = comm_.rank() == src;
  const OptimizerStateDict local = sending ? local_state_dict() : OptimizerStateDict{};
  OptimizerStateDict part;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (owners_[i] != src) continue;
    auto& entries = part.state[static_cast<int64_t>(i)];
    const auto* mine = sending ? &local.state.at(static_cast<int64_t>(i)) : nullptr;
    for (const std::string& key : keys) {
      at::Tensor t = sending ? mine->at(key) : at::empty_like(params_[i].detach(), at::MemoryFormat::Contiguous);
      comm_.broadcast(t, src);
      entries[key] = t;
    }
    if (step_on_device) {
      at::Tensor step = sending ? mine->at("step")
                                : at::empty({}, at::TensorOptions().dtype(at::kFloat).device(device));
      comm_.broadcast(step, src);
      entries["step"] = step;
    } else {
      entries["step"] = at::full({}, static_cast<double>(steps_), at::kFloat);
    }
  }
  return part;
}

}  // namespace harness::runtime

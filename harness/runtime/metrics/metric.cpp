#include "harness/runtime/metrics/metric.h"

#include <ATen/ops/abs.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/constant_pad_nd.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/max.h>
#include <ATen/ops/mean.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>
#include <c10/core/GradMode.h>

#include <algorithm>

#include "harness/errors.h"
#include "harness/instrument/site.h"

namespace harness::runtime {

const char* to_string(Reduction reduction) {
  switch (reduction) {
    case Reduction::Sum: return "sum";
    case Reduction::Mean: return "mean";
    case Reduction::Max: return "max";
    case Reduction::Cat: return "cat";
  }
  return "?";
}

namespace {

// _simple_gather_all_tensors: world_size zeros_like buffers, one all_gather.
std::vector<at::Tensor> simple_gather(const at::Tensor& tensor, Communicator& comm) {
  std::vector<at::Tensor> out;
  for (int r = 0; r < comm.world_size(); ++r) out.push_back(at::zeros_like(tensor));
  comm.all_gather(out, tensor);
  return out;
}

}  // namespace

std::vector<at::Tensor> gather_all_tensors(const at::Tensor& tensor, Communicator& comm) {
  const at::Tensor result = tensor.contiguous();
  HARNESS_SITE();
  comm.barrier();
  if (result.dim() == 0) return simple_gather(result, comm);
  // torch.tensor(result.shape, device=result.device): built on the host, copied over.
  HARNESS_SITE();
  const at::Tensor local_size = at::tensor(result.sizes(), at::kLong).to(result.device());
  std::vector<at::Tensor> local_sizes = simple_gather(local_size, comm);
  const at::Tensor max_size = std::get<0>(at::stack(local_sizes).max(0));
  // all(all(ls == max_size) for ls in local_sizes): one host read per element, short-circuited.
  bool all_equal = true;
  for (const at::Tensor& ls : local_sizes) {
    const at::Tensor equal = ls.eq(max_size);
    HARNESS_SITE();
    for (int64_t d = 0; d < result.dim() && all_equal; ++d) all_equal = equal[d].item<bool>();
    if (!all_equal) break;
  }
  if (all_equal) return simple_gather(result, comm);
  HARNESS_SITE();
  const at::Tensor pad_by = (max_size - local_size).cpu();
  std::vector<int64_t> pad;
  for (int64_t d = result.dim() - 1; d >= 0; --d) {
    pad.push_back(0);
    HARNESS_SITE();
    pad.push_back(pad_by[d].item<int64_t>());
  }
  std::vector<at::Tensor> gathered = simple_gather(at::constant_pad_nd(result, pad), comm);
  for (size_t r = 0; r < gathered.size(); ++r) {
    for (int64_t d = 0; d < result.dim(); ++d) {
      HARNESS_SITE();
      gathered[r] = gathered[r].narrow(d, 0, local_sizes[r][d].item<int64_t>());
    }
  }
  return gathered;
}

Metric::State& Metric::find(const std::string& name) {
  for (State& s : states_) {
    if (s.name == name) return s;
  }
  TORCH_CHECK(false, "metric ", name_, " has no state '", name, "'");
}

const Metric::State& Metric::find(const std::string& name) const {
  return const_cast<Metric*>(this)->find(name);
}

void Metric::add_state(const std::string& name, at::Tensor initial, Reduction reduction,
                       bool persistent) {
  TORCH_CHECK(reduction != Reduction::Cat, "a cat state is a list state (add_list_state)");
  State s;
  s.name = name;
  s.reduction = reduction;
  s.persistent = persistent;
  s.initial = initial;
  s.value = initial.clone();
  states_.push_back(std::move(s));
}

void Metric::add_list_state(const std::string& name, bool persistent) {
  State s;
  s.name = name;
  s.reduction = Reduction::Cat;
  s.is_list = true;
  s.persistent = persistent;
  s.initial = at::empty({0});  // what an empty list syncs and saves as
  states_.push_back(std::move(s));
}

at::Tensor& Metric::state(const std::string& name) { return find(name).value; }
const at::Tensor& Metric::state(const std::string& name) const { return find(name).value; }
std::vector<at::Tensor>& Metric::list_state(const std::string& name) { return find(name).items; }
const std::vector<at::Tensor>& Metric::list_state(const std::string& name) const {
  return find(name).items;
}

void Metric::reset() {
  c10::AutoGradMode no_grad(false);
  for (State& s : states_) {
    if (s.is_list) {
      s.items.clear();
    } else {
      s.value = s.initial.clone();  // default.detach().clone().to(device)
    }
  }
  cache_.reset();
}

void Metric::set_persistent(bool persistent) {
  for (State& s : states_) s.persistent = persistent;
}

void Metric::to(c10::Device device) {
  for (State& s : states_) {
    HARNESS_SITE();
    if (s.initial.defined()) s.initial = s.initial.to(device);
    if (s.value.defined()) s.value = s.value.to(device);
    for (at::Tensor& t : s.items) t = t.to(device);
  }
}

void Metric::sync(Communicator* comm) {
  if (comm == nullptr || comm->world_size() == 1 || synced()) return;
  c10::AutoGradMode no_grad(false);
  cache_ = states_;
  for (State& s : states_) {
    at::Tensor local;
    if (s.is_list) {
      // Pre-concatenated (one launch), or a 0-length tensor when empty.
      local = s.items.size() == 1 ? s.items.front()
              : s.items.empty()   ? s.initial  // 0-length
                                  : at::cat(s.items);
    } else {
      local = s.value;
    }
    std::vector<at::Tensor> gathered = gather_all_tensors(local, *comm);
    switch (s.reduction) {
      case Reduction::Sum: s.value = at::stack(gathered).sum(0); break;
      case Reduction::Mean: s.value = at::stack(gathered).mean(0); break;
      case Reduction::Max: s.value = std::get<0>(at::stack(gathered).max(0)); break;
      case Reduction::Cat: s.items = {at::cat(gathered)}; break;
    }
  }
}

void Metric::unsync() {
  if (!cache_) return;
  states_ = std::move(*cache_);
  cache_.reset();
}

std::vector<std::pair<std::string, at::Tensor>> Metric::state_dict() const {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const State& s : states_) {
    if (!s.persistent) continue;
    at::Tensor value = !s.is_list            ? s.value
                       : s.items.size() == 1 ? s.items.front()
                       : s.items.empty()     ? s.initial
                                             : at::cat(s.items);
    out.emplace_back(name_ + "." + s.name, value.detach());
  }
  return out;
}

void Metric::load_state_dict(const std::vector<std::pair<std::string, at::Tensor>>& entries) {
  c10::AutoGradMode no_grad(false);
  for (State& s : states_) {
    if (!s.persistent) continue;
    const std::string key = name_ + "." + s.name;
    auto it =
        std::find_if(entries.begin(), entries.end(), [&](const auto& e) { return e.first == key; });
    if (it == entries.end()) throw InputError("checkpoint lacks the metric state '" + key + "'");
    if (s.is_list) {
      s.items.clear();
      HARNESS_SITE();
      if (it->second.numel() > 0) s.items.push_back(it->second.to(s.initial.device()));
      continue;
    }
    if (it->second.sizes() != s.value.sizes()) {
      throw InputError("checkpoint metric state '" + key + "' has shape " +
                       c10::str(it->second.sizes()) + ", the metric has " +
                       c10::str(s.value.sizes()));
    }
    s.value.copy_(it->second);
  }
}

// ----- the MLP's metrics ------------------------------------------------------------------------

MeanLoss::MeanLoss(bool persistent) : Metric("mean_loss") {
  add_state("sum", at::zeros({}), Reduction::Sum, persistent);
  add_state("count", at::zeros({}), Reduction::Sum, persistent);
}

void MeanLoss::update(const at::Tensor& loss, const at::Tensor& output, const at::Tensor&) {
  state("sum").add_(loss.detach() * static_cast<double>(output.size(0)));
  state("count").add_(static_cast<double>(output.size(0)));
}

at::Tensor MeanLoss::compute() const { return state("sum") / state("count"); }

BatchMeanAbsoluteError::BatchMeanAbsoluteError(bool persistent) : Metric("batch_mae") {
  add_list_state("errors", persistent);
}

void BatchMeanAbsoluteError::update(const at::Tensor&, const at::Tensor& output,
                                    const at::Tensor& target) {
  list_state("errors").push_back((output.detach() - target).abs().mean().reshape({1}));
}

at::Tensor BatchMeanAbsoluteError::compute() const {
  const std::vector<at::Tensor>& errors = list_state("errors");
  TORCH_CHECK(!errors.empty(), "batch_mae has seen no batch");
  return (errors.size() == 1 ? errors.front() : at::cat(errors)).mean();
}

}  // namespace harness::runtime

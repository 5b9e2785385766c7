#include "harness/runtime/sharded_model.h"

#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/zeros.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <stdexcept>

namespace harness::runtime {

const char* to_string(UnitStatus status) {
  switch (status) {
    case UnitStatus::NotAvailable: return "NOT_AVAILABLE";
    case UnitStatus::Inflight: return "INFLIGHT";
    case UnitStatus::Available: return "AVAILABLE";
  }
  return "?";
}

at::Tensor FlatUnit::shard_of(const at::Tensor& flat, int rank) const {
  at::Tensor shard = at::empty({shard_numel}, flat.options());
  const int64_t first = shard_numel * rank;
  const int64_t valid = std::clamp<int64_t>(numel - first, 0, shard_numel);
  if (valid > 0) shard.narrow(0, 0, valid).copy_(flat.narrow(0, first, valid));
  if (valid < shard_numel) shard.narrow(0, valid, shard_numel - valid).zero_();
  return shard;
}

at::Tensor FlatUnit::weight() const {
  return full.narrow(0, 0, out_features * in_features).view({out_features, in_features});
}

at::Tensor FlatUnit::bias() const {
  return full.narrow(0, out_features * in_features, out_features);
}

namespace {

// One unit's forward and backward as one autograd node: forward uses the full parameter the
// engine's hooks gathered; backward gathers it again, computes the gradients of input, weight and
// bias (the ops of Linear's own backward), reduce-scatters the flat gradient onto the shards and
// frees the full parameter.
struct ShardedLinearFn : public torch::autograd::Function<ShardedLinearFn> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& input,
                            const at::Tensor& shard, int64_t unit_address, int64_t model_address) {
    (void)shard;  // an input so that autograd routes the unit's gradient to it
    const auto* unit = reinterpret_cast<const FlatUnit*>(unit_address);
    // DeepSpeed's `assert param.ds_status == ZeroParamStatus.AVAILABLE`.
    TORCH_CHECK(unit->status == UnitStatus::Available, unit->name, " is ", to_string(unit->status),
                " in its forward; it must be AVAILABLE");
    ctx->save_for_backward({input});
    ctx->saved_data["unit"] = unit_address;
    ctx->saved_data["model"] = model_address;
    return at::linear(input, unit->weight(), unit->bias());
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto* unit = reinterpret_cast<FlatUnit*>(ctx->saved_data["unit"].toInt());
    auto* model = reinterpret_cast<ShardedModel*>(ctx->saved_data["model"].toInt());
    ShardedEngine* engine = model->active_engine();
    TORCH_CHECK(engine != nullptr, "backward of ", unit->name, " with no engine on the module");
    engine->fetch(*unit, /*prefetch_next=*/false, /*wrap=*/false);
    const at::Tensor& grad_out = grads[0];
    const at::Tensor input = ctx->get_saved_variables()[0];
    at::Tensor grad_input;
    if (ctx->needs_input_grad(0)) grad_input = grad_out.mm(unit->weight());
    std::vector<at::Tensor> pieces = {grad_out.t().mm(input).reshape(-1), grad_out.sum(0)};
    const int world = model->comm().world_size();
    const int64_t padding = unit->padded_numel(world) - unit->numel;
    if (padding > 0) pieces.push_back(at::zeros({padding}, grad_out.options()));
    const at::Tensor flat_grad = at::cat(pieces);
    at::Tensor grad_shard = at::empty({unit->shard_numel}, grad_out.options());
    model->comm().reduce_scatter_sum(grad_shard, flat_grad);
    grad_shard.div_(world);  // the mean over ranks, as DDP averages
    engine->release(*unit);
    return {grad_input, grad_shard, at::Tensor(), at::Tensor()};
  }
};

}  // namespace

// ----- ShardedModel ---------------------------------------------------------------------------

ShardedModel::ShardedModel(Communicator& comm, std::vector<FlatUnit> units)
    : comm_(comm), units_(std::move(units)) {}

std::vector<at::Tensor> ShardedModel::shards() {
  std::vector<at::Tensor> out;
  for (FlatUnit& u : units_) out.push_back(u.shard);
  return out;
}

FlatUnit* ShardedModel::next_unit(const FlatUnit& unit, bool wrap) {
  const size_t i = static_cast<size_t>(&unit - units_.data());
  if (i + 1 < units_.size()) return &units_[i + 1];
  return wrap && units_.size() > 1 ? &units_.front() : nullptr;
}

void ShardedModel::remove_hooks(const ShardedEngine* engine) {
  hooked_.erase(std::remove(hooked_.begin(), hooked_.end(), engine), hooked_.end());
}

at::Tensor ShardedModel::forward(torch::nn::Sequential& layers, const at::Tensor& input) {
  TORCH_CHECK(!hooked_.empty(), "a sharded module runs only under an engine (none is set up)");
  // An eval forward is a whole step: the engine's prefetch wraps around to the first unit.
  const bool wrap = !layers->is_training();
  at::Tensor x = input;
  size_t next = 0;
  size_t index = 0;
  for (auto it = layers->begin(); it != layers->end(); ++it, ++index) {
    FlatUnit* unit =
        next < units_.size() && units_[next].layer_index == index ? &units_[next++] : nullptr;
    if (unit == nullptr) {
      x = it->forward<at::Tensor>(x);
      continue;
    }
    for (ShardedEngine* engine : hooked_) engine->fetch(*unit, /*prefetch_next=*/true, wrap);
    x = ShardedLinearFn::apply(x, unit->shard, reinterpret_cast<int64_t>(unit),
                               reinterpret_cast<int64_t>(this));
    for (ShardedEngine* engine : hooked_) engine->release(*unit);
  }
  return x;
}

// ----- ShardedEngine --------------------------------------------------------------------------

ShardedEngine::ShardedEngine(ShardedModel& model, EngineOptions options)
    : model_(model), options_(std::move(options)) {
  model_.add_hooks(this);
}

GatherRegistry& ShardedEngine::registry() {
  return options_.private_registry ? own_registry_ : model_.registry();
}

void ShardedEngine::fetch(FlatUnit& unit, bool prefetch_next, bool wrap) {
  c10::AutoGradMode no_grad(false);
  Communicator& comm = model_.comm();
  if (unit.status == UnitStatus::Inflight) {
    auto it = registry().find(&unit);
    if (it == registry().end()) {
      throw std::runtime_error(unit.name + " is INFLIGHT, but engine '" + options_.name +
                               "' has no gather in flight for it: engine '" + unit.inflight_by +
                               "' issued it into a registry of its own (expected AVAILABLE)");
    }
    it->second->wait();
    registry().erase(it);
    unit.status = UnitStatus::Available;
  } else if (unit.status == UnitStatus::NotAvailable) {
    unit.full = at::empty({unit.padded_numel(comm.world_size())}, unit.shard.options());
    comm.all_gather_into(unit.full, unit.shard.detach());
    unit.status = UnitStatus::Available;
  }
  if (!prefetch_next || !options_.prefetch) return;
  FlatUnit* next = model_.next_unit(unit, wrap);
  if (next == nullptr || next->status != UnitStatus::NotAvailable) return;
  next->full = at::empty({next->padded_numel(comm.world_size())}, next->shard.options());
  registry()[next] = comm.all_gather_into_async(next->full, next->shard.detach());
  next->status = UnitStatus::Inflight;
  next->inflight_by = options_.name;
}

void ShardedEngine::release(FlatUnit& unit) {
  if (unit.status != UnitStatus::Available) return;
  unit.full = at::Tensor();
  unit.status = UnitStatus::NotAvailable;
}

std::unique_ptr<Optimizer> ShardedEngine::setup_optimizer(const AdamOptions& adam) {
  if (!options_.defragment) return std::make_unique<Adam>(model_.shards(), adam);
  c10::AutoGradMode no_grad(false);
  for (FlatUnit& unit : model_.units()) {
    fetch(unit, /*prefetch_next=*/false, /*wrap=*/false);
    release(unit);
  }
  // Defragment: the shards out to the host and back as one flat device buffer.
  std::vector<at::Tensor> host;
  for (FlatUnit& unit : model_.units()) host.push_back(unit.shard.detach().to(at::kCPU));
  const at::Tensor flat = at::cat(host).to(model_.units().front().shard.device());
  int64_t offset = 0;
  for (FlatUnit& unit : model_.units()) {
    unit.shard.set_data(flat.narrow(0, offset, unit.shard_numel));
    offset += unit.shard_numel;
  }
  return std::make_unique<Adam>(model_.shards(), adam);
}

void ShardedEngine::teardown() {
  if (torn_down_) return;
  GatherRegistry& gathers = registry();
  for (auto it = gathers.begin(); it != gathers.end();) {
    if (it->first->inflight_by != options_.name) {
      ++it;
      continue;
    }
    it->second->wait();
    it->first->status = UnitStatus::Available;
    it = gathers.erase(it);
  }
  for (FlatUnit& unit : model_.units()) release(unit);
  model_.remove_hooks(this);
  torn_down_ = true;
}

}  // namespace harness::runtime

#include "harness/runtime/sharded/sharded_model.h"
#include "harness/instrument/site.h"
#include "harness/instrument/sim/sim_device.h"

#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/zeros.h>
#include <c10/core/DeviceGuard.h>
#include <torch/csrc/autograd/autograd.h>
#include <c10/core/GradMode.h>
#include <c10/util/strides.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <tuple>
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

std::vector<at::Tensor> FlatUnit::parameter_leaves() const {
  std::vector<at::Tensor> out;
  out.reserve(slots.size());
  for (const ParamSlot& slot : slots) {
    at::Tensor leaf = at::empty({0}, full.options());
    leaf.set_(full.storage(), full.storage_offset() + slot.offset, slot.sizes,
              c10::contiguous_strides(slot.sizes));
    out.push_back(leaf.requires_grad_(true));
  }
  return out;
}

std::vector<at::Tensor> FlatUnit::unflatten(const at::Tensor& flat) const {
  std::vector<at::Tensor> out;
  out.reserve(slots.size());
  for (const ParamSlot& slot : slots) {
    out.push_back(flat.narrow(0, slot.offset, slot.numel).view(slot.sizes));
  }
  return out;
}

c10::ScalarType FlatUnit::gather_dtype() const {
  return compute_dtype == c10::ScalarType::Undefined ? shard.scalar_type() : compute_dtype;
}

namespace {

// A host copy of `t` (a D2H copy); under sim's --compute shapes one without bytes, as the host
// may not hold a full-size model's (the copy is counted the same).
at::Tensor to_host(const at::Tensor& t) {
  if (!sim::computes_shapes_only()) return t.to(at::kCPU);
  at::Tensor host = sim::host_tensor_without_bytes(t.sizes(), t.scalar_type());
  host.copy_(t);
  return host;
}

// The host tensors one after another (host work, not counted); under --compute shapes their
// sizes only.
at::Tensor host_cat(const std::vector<at::Tensor>& pieces) {
  if (!sim::computes_shapes_only()) return at::cat(pieces);
  int64_t elements = 0;
  for (const at::Tensor& p : pieces) elements += p.numel();
  return sim::host_tensor_without_bytes({elements}, pieces.front().scalar_type());
}

// A unit's whole (padded) flat gradient onto its shard: reduce-scattered and averaged over the
// ranks (as DDP averages); or, with gradient sync off, kept whole on this rank and summed until a
// backward that reduces it (FSDP2 keeps the unsharded gradients while requires_gradient_sync is
// off): then no collective and no shard gradient (undefined).
at::Tensor reduce_unit_gradient(FlatUnit& unit, ShardedModel& model, at::Tensor flat_grad) {
  if (!model.gradient_sync()) {
    if (unit.unreduced_grad.defined()) {
      unit.unreduced_grad.add_(flat_grad);
    } else {
      unit.unreduced_grad = flat_grad;
    }
    return at::Tensor();
  }
  if (unit.unreduced_grad.defined()) {
    flat_grad.add_(unit.unreduced_grad);
    unit.unreduced_grad = at::Tensor();
  }
  at::Tensor grad_shard = at::empty({unit.shard_numel}, flat_grad.options());
  model.comm().reduce_scatter_sum(grad_shard, flat_grad);
  grad_shard.div_(model.comm().world_size());
  return grad_shard;
}

// What a unit's backward starts with: the unit and the model its forward saved, and the engine
// of the newest hooks, which gathers the unit again.
std::tuple<FlatUnit*, ShardedModel*, ShardedEngine*> gathered_for_backward(
    torch::autograd::AutogradContext* ctx) {
  auto* unit = reinterpret_cast<FlatUnit*>(ctx->saved_data["unit"].toInt());
  auto* model = reinterpret_cast<ShardedModel*>(ctx->saved_data["model"].toInt());
  ShardedEngine* engine = model->active_engine();
  TORCH_CHECK(engine != nullptr, "backward of ", unit->name, " with no engine on the module");
  engine->fetch(*unit, /*prefetch_next=*/false, /*wrap=*/false);
  return {unit, model, engine};
}

// DeepSpeed's `assert param.ds_status == ZeroParamStatus.AVAILABLE`, in a unit's forward.
void check_available(const FlatUnit& unit) {
  TORCH_CHECK(unit.status == UnitStatus::Available, unit.name, " is ", to_string(unit.status),
              " in its forward; it must be AVAILABLE");
}

// One unit's forward and backward as one autograd node: forward uses the full parameter the
// engine's hooks gathered; backward gathers it again, computes the gradients of input, weight and
// bias (the ops of Linear's own backward), reduce-scatters the flat gradient onto the shards and
// frees the full parameter.
struct ShardedLinearFn : public torch::autograd::Function<ShardedLinearFn> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& input,
                            const at::Tensor& shard, int64_t unit_address, int64_t model_address) {
    (void)shard;  // an input so that autograd routes the unit's gradient to it
    const auto* unit = reinterpret_cast<const FlatUnit*>(unit_address);
    check_available(*unit);
    ctx->save_for_backward({input});
    ctx->saved_data["unit"] = unit_address;
    ctx->saved_data["model"] = model_address;
    return at::linear(input, unit->weight(), unit->bias());
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto [unit, model, engine] = gathered_for_backward(ctx);
    const at::Tensor& grad_out = grads[0];
    const at::Tensor input = ctx->get_saved_variables()[0];
    at::Tensor grad_input;
    if (ctx->needs_input_grad(0)) grad_input = grad_out.mm(unit->weight());
    std::vector<at::Tensor> pieces = {grad_out.t().mm(input).reshape(-1), grad_out.sum(0)};
    const int64_t padding = unit->padded_numel(model->comm().world_size()) - unit->numel;
    if (padding > 0) pieces.push_back(at::zeros({padding}, grad_out.options()));
    at::Tensor grad_shard = reduce_unit_gradient(*unit, *model, at::cat(pieces));
    engine->release(*unit);
    return {grad_input, grad_shard, at::Tensor(), at::Tensor()};
  }
};

// A unit of several parameters (a FunctionalLayer) as one autograd node. Forward runs the layer
// on leaves over the gathered parameter; when a backward will come it runs under autograd and
// keeps that graph (as a module's own forward keeps its graph). Backward gathers the parameter
// again into the same storage, runs the kept graph for the gradients of the input and the
// parameters, and reduce-scatters them, flat, onto the shard.
struct ShardedModuleFn : public torch::autograd::Function<ShardedModuleFn> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& input,
                            const at::Tensor& shard, int64_t unit_address, int64_t model_address,
                            bool backward_will_come) {
    (void)shard;  // an input so that autograd routes the unit's gradient to it
    const auto* unit = reinterpret_cast<const FlatUnit*>(unit_address);
    check_available(*unit);
    std::vector<at::Tensor> params = unit->parameter_leaves();
    if (!backward_will_come) return unit->layer->forward_with(input, params);
    at::Tensor inner_input = input.detach();
    if (input.requires_grad()) inner_input.requires_grad_(true);
    at::Tensor output;
    {
      c10::AutoGradMode grad(true);
      output = unit->layer->forward_with(inner_input, params);
    }
    ctx->saved_data["unit"] = unit_address;
    ctx->saved_data["model"] = model_address;
    ctx->saved_data["input"] = inner_input;
    ctx->saved_data["output"] = output;
    ctx->saved_data["params"] = params;
    return output.detach();
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto [unit, model, engine] = gathered_for_backward(ctx);
    const at::Tensor input = ctx->saved_data["input"].toTensor();
    const at::Tensor output = ctx->saved_data["output"].toTensor();
    std::vector<at::Tensor> wrt = ctx->saved_data["params"].toTensorVector();
    const bool input_grad = input.requires_grad();
    if (input_grad) wrt.push_back(input);
    // The kept graph freed as it runs (retain_graph false), as the module's own would be.
    std::vector<at::Tensor> computed =
        torch::autograd::grad({output}, wrt, {grads[0]}, /*retain_graph=*/false,
                              /*create_graph=*/false, /*allow_unused=*/true);
    for (const char* key : {"input", "output", "params"}) ctx->saved_data.erase(key);
    at::Tensor grad_input = input_grad ? computed.back() : at::Tensor();
    std::vector<at::Tensor> pieces;
    for (size_t i = 0; i < unit->slots.size(); ++i) {
      pieces.push_back(computed[i].defined()
                           ? computed[i].reshape(-1)
                           : at::zeros({unit->slots[i].numel}, unit->full.options()));
    }
    const int64_t padding = unit->padded_numel(model->comm().world_size()) - unit->numel;
    if (padding > 0) pieces.push_back(at::zeros({padding}, unit->full.options()));
    // Reduced in the shard's dtype (FSDP2's reduce_dtype: float32 for bf16 compute).
    at::Tensor flat_grad = at::cat(pieces);
    if (flat_grad.scalar_type() != unit->shard.scalar_type()) {
      flat_grad = flat_grad.to(unit->shard.scalar_type());
    }
    at::Tensor grad_shard = reduce_unit_gradient(*unit, *model, flat_grad);
    engine->release(*unit);
    return {grad_input, grad_shard, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

// ----- ShardedModel ---------------------------------------------------------------------------

const char* to_string(HookKind kind) {
  switch (kind) {
    case HookKind::EngineForwardPrologue: return "engine_forward_prologue";
    case HookKind::EngineForwardEpilogue: return "engine_forward_epilogue";
    case HookKind::StartOfForward: return "start_of_forward";
    case HookKind::FetchBeforeForward: return "fetch_before_forward";
    case HookKind::ReleaseAfterForward: return "release_after_forward";
    case HookKind::AttachPreBackward: return "attach_pre_backward";
    case HookKind::AttachPostBackward: return "attach_post_backward";
  }
  return "?";
}

ShardedModel::ShardedModel(Communicator& comm, std::vector<FlatUnit> units,
                           std::vector<std::string> modules)
    : comm_(comm), units_(std::move(units)), modules_(std::move(modules)) {
  TORCH_CHECK(!modules_.empty() && modules_.front().empty(),
              "a sharded model's module names start with the root's (\"\")");
  // The Sequential's name: the parent of the first layer's ("layers" of "layers.0").
  for (const std::string& name : modules_) {
    const size_t dot = name.rfind('.');
    if (dot != std::string::npos && name.substr(dot + 1) == "0") {
      layers_name_ = name.substr(0, dot);
      break;
    }
  }
  // The modules a forward enters before the layers, outermost first: the root, then down to the
  // layers' Sequential.
  for (const std::string& name : modules_) {
    if (name.empty() || layers_name_ == name ||
        layers_name_.compare(0, name.size() + 1, name + ".") == 0) {
      outer_modules_.push_back(name);
    }
  }
}

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

uint64_t ShardedModel::register_hook(HookKind kind, const std::string& module,
                                     ShardedEngine* engine) {
  hooks_.push_back({next_hook_id_++, kind, module, engine});
  ++hooks_registered_;
  return hooks_.back().id;
}

void ShardedModel::remove_hook(uint64_t id) {
  auto it = std::find_if(hooks_.begin(), hooks_.end(),
                         [id](const ModuleHook& h) { return h.id == id; });
  if (it == hooks_.end()) return;  // removed already (a handle removed twice, as torch allows)
  hooks_.erase(it);
  ++hooks_removed_;
}

void ShardedModel::remove_all_hooks() {
  hooks_removed_ += static_cast<int64_t>(hooks_.size());
  hooks_.clear();
}

void ShardedModel::run_hooks(HookKind kind, const std::string& module, FlatUnit* unit,
                             bool wrap) {
  // What a hook does (fetch, release) never registers or removes hooks: no copy of the list.
  for (const ModuleHook& hook : hooks_) {
    if (hook.kind != kind || hook.module != module) continue;
    ++hook_calls_;
    hook.engine->run_hook(kind, unit, wrap);
  }
}

at::Tensor ShardedModel::forward(torch::nn::Sequential& layers, const at::Tensor& input) {
  TORCH_CHECK(!hooks_.empty(), "a sharded module runs only under an engine (none is set up)");
  // An eval forward is a whole step: the engine's prefetch wraps around to the first unit.
  const bool wrap = !layers->is_training();
  const auto enter = [&](const std::string& module, FlatUnit* unit) {
    run_hooks(HookKind::FetchBeforeForward, module, unit, wrap);
    run_hooks(HookKind::AttachPostBackward, module, unit, wrap);
  };
  const auto leave = [&](const std::string& module, FlatUnit* unit) {
    run_hooks(HookKind::ReleaseAfterForward, module, unit, wrap);
    run_hooks(HookKind::AttachPreBackward, module, unit, wrap);
  };
  // The root's forward pre-hooks in the order they were registered: the engine's, then ZeRO's.
  run_hooks(HookKind::EngineForwardPrologue, "", nullptr, wrap);
  run_hooks(HookKind::StartOfForward, "", nullptr, wrap);
  for (const std::string& module : outer_modules_) enter(module, nullptr);
  at::Tensor x = input;
  size_t next = 0;
  size_t index = 0;
  for (auto it = layers->begin(); it != layers->end(); ++it, ++index) {
    FlatUnit* unit =
        next < units_.size() && units_[next].layer_index == index ? &units_[next++] : nullptr;
    const std::string layer = layers_name_.empty() ? std::to_string(index)
                                                   : layers_name_ + "." + std::to_string(index);
    enter(layer, unit);
    if (unit == nullptr) {
      x = it->forward<at::Tensor>(x);
    } else if (unit->layer != nullptr) {
      const bool backward_will_come =
          c10::GradMode::is_enabled() && (unit->shard.requires_grad() || x.requires_grad());
      x = ShardedModuleFn::apply(x, unit->shard, reinterpret_cast<int64_t>(unit),
                                 reinterpret_cast<int64_t>(this), backward_will_come);
    } else {
      x = ShardedLinearFn::apply(x, unit->shard, reinterpret_cast<int64_t>(unit),
                                 reinterpret_cast<int64_t>(this));
    }
    leave(layer, unit);
  }
  for (auto it = outer_modules_.rbegin(); it != outer_modules_.rend(); ++it) {
    // The root's forward hooks: the engine's first (registered before ZeRO's).
    if (it->empty()) run_hooks(HookKind::EngineForwardEpilogue, "", nullptr, wrap);
    leave(*it, nullptr);
  }
  return x;
}

// ----- ShardedEngine --------------------------------------------------------------------------

ShardedEngine::ShardedEngine(ShardedModel& model, EngineOptions options)
    : model_(model), options_(std::move(options)) {
  // As DeepSpeed registers them: the engine's two on the root, the root's start-of-forward hook,
  // then depth first (children before their parent) the four hooks of every module.
  hook_ids_.push_back(model_.register_hook(HookKind::EngineForwardPrologue, "", this));
  hook_ids_.push_back(model_.register_hook(HookKind::EngineForwardEpilogue, "", this));
  hook_ids_.push_back(model_.register_hook(HookKind::StartOfForward, "", this));
  const std::vector<std::string>& modules = model_.module_names();
  for (auto it = modules.rbegin(); it != modules.rend(); ++it) {
    for (HookKind kind : {HookKind::FetchBeforeForward, HookKind::ReleaseAfterForward,
                          HookKind::AttachPreBackward, HookKind::AttachPostBackward}) {
      hook_ids_.push_back(model_.register_hook(kind, *it, this));
    }
  }
}

void ShardedEngine::remove_hooks() {
  for (uint64_t id : hook_ids_) model_.remove_hook(id);
  hook_ids_.clear();
}

void ShardedEngine::run_hook(HookKind kind, FlatUnit* unit, bool wrap) {
  if (unit == nullptr) return;  // a module without parameters of its own: nothing to gather
  if (kind == HookKind::FetchBeforeForward) fetch(*unit, /*prefetch_next=*/true, wrap);
  if (kind == HookKind::ReleaseAfterForward) release(*unit);
}

GatherRegistry& ShardedEngine::registry() {
  return options_.private_registry ? own_registry_ : model_.registry();
}

void ShardedEngine::fetch(FlatUnit& unit, bool prefetch_next, bool wrap) {
  c10::AutoGradMode no_grad(false);
  Communicator& comm = model_.comm();
  // As DeepSpeed's fetch_sub_module: first wait for the gather in flight that this engine's
  // registry holds for the unit...
  if (unit.status == UnitStatus::Inflight) {
    auto it = registry().find(&unit);
    if (it != registry().end()) {
      it->second->wait();
      registry().erase(it);
      unit.status = UnitStatus::Available;
    }
  }
  // ...then all_gather what is NOT_AVAILABLE. Init._all_gather (partition_parameters.py) gathers
  // only NOT_AVAILABLE parameters: one still INFLIGHT through another registry is skipped, not
  // waited for.
  if (unit.status == UnitStatus::NotAvailable) {
    comm.all_gather_into(gather_buffer(unit), gather_input(unit));
    unit.status = UnitStatus::Available;
  }
  // DeepSpeed's `assert param.ds_status == ZeroParamStatus.AVAILABLE`: the #17523 failure.
  if (unit.status != UnitStatus::Available) {
    throw std::runtime_error(unit.name + " is " + to_string(unit.status) +
                             ", expected AVAILABLE: engine '" + options_.name +
                             "' has no gather in flight for it, so its all_gather skipped it "
                             "(engine '" + unit.inflight_by +
                             "' issued the gather into a registry of its own)");
  }
  if (!prefetch_next || !options_.prefetch) return;
  FlatUnit* next = model_.next_unit(unit, wrap);
  if (next == nullptr || next->status != UnitStatus::NotAvailable) return;
  registry()[next] = comm.all_gather_into_async(gather_buffer(*next), gather_input(*next));
  next->status = UnitStatus::Inflight;
  next->inflight_by = options_.name;
}

at::Tensor& ShardedEngine::gather_buffer(FlatUnit& unit) {
  const int64_t elements = unit.padded_numel(model_.comm().world_size());
  if (unit.layer == nullptr || !unit.full.defined()) {
    unit.full = at::empty({elements}, unit.shard.options().dtype(unit.gather_dtype()));
    return unit.full;
  }
  // A FunctionalLayer unit keeps its storage (graphs of earlier forwards hold leaves over it):
  // its bytes come back, from the allocator of the device the storage is on.
  c10::StorageImpl* storage = unit.full.storage().unsafeGetStorageImpl();
  const c10::DeviceGuard on(unit.full.device());
  storage->set_data_ptr_noswap(storage->allocator()->allocate(unit.full.nbytes()));
  storage->set_nbytes(unit.full.nbytes());
  return unit.full;
}

at::Tensor ShardedEngine::gather_input(const FlatUnit& unit) {
  const at::Tensor shard = unit.shard.detach();
  return shard.scalar_type() == unit.gather_dtype() ? shard : shard.to(unit.gather_dtype());
}

void ShardedEngine::release(FlatUnit& unit) {
  if (unit.status != UnitStatus::Available) return;
  if (unit.layer == nullptr) {
    unit.full = at::Tensor();
  } else {
    // The bytes freed, the storage kept (FSDP2: unsharded_param.untyped_storage().resize_(0)).
    unit.full.storage().unsafeGetStorageImpl()->reset();
  }
  unit.status = UnitStatus::NotAvailable;
}

std::unique_ptr<Optimizer> ShardedEngine::setup_optimizer(const AdamOptions& adam) {
  if (!options_.defragment) return std::make_unique<Adam>(model_.shards(), adam);
  c10::AutoGradMode no_grad(false);
  // DeepSpeedZeroOptimizer_Stage3._create_fp16_partitions_with_defragmentation (stage3.py)
  // begins with dist.barrier().
  HARNESS_SITE();
  model_.comm().barrier();
  for (FlatUnit& unit : model_.units()) {
    fetch(unit, /*prefetch_next=*/false, /*wrap=*/false);
    release(unit);
  }
  // Defragment: the shards out to the host and back as one flat device buffer.
  std::vector<at::Tensor> host;
  HARNESS_SITE();
  for (FlatUnit& unit : model_.units()) host.push_back(to_host(unit.shard.detach()));
  const at::Tensor flat = host_cat(host).to(model_.units().front().shard.device());
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
  remove_hooks();
  torn_down_ = true;
}

}  // namespace harness::runtime

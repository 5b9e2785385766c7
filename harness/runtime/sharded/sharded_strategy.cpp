#include "harness/runtime/sharded/sharded_strategy.h"

#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <optional>
#include <string>

#include "harness/errors.h"
#include "harness/runtime/parallel/data_parallel.h"
#include "harness/runtime/mlp.h"
#include "harness/instrument/site.h"

namespace harness::runtime {

const char* to_string(ShardedSetup setup) {
  switch (setup) {
    case ShardedSetup::FullThenShard: return "full_then_shard";
    case ShardedSetup::MetaInit: return "meta_init";
    case ShardedSetup::Rank0Broadcast: return "rank0_broadcast";
  }
  return "?";
}

bool builds_on_host(ShardedSetup setup, int rank) {
  return setup == ShardedSetup::FullThenShard ||
         (setup == ShardedSetup::Rank0Broadcast && rank == 0);
}

const char* to_string(ShardedCheckpoint format) {
  return format == ShardedCheckpoint::Consolidated ? "consolidated" : "per_rank";
}

const char* to_string(EnginePolicy policy) {
  switch (policy) {
    case EnginePolicy::NewPerStage: return "new_engine_per_stage";
    case EnginePolicy::NewPerStagePrivate: return "new_engine_private_registry";
    case EnginePolicy::Reuse: return "reuse_engine";
    case EnginePolicy::DestroyBetween: return "destroy_between";
  }
  return "?";
}

namespace {

// A layer the strategy shards: its parameters (named_parameters order), on whatever device (meta
// included) the module was built; `functional` when the layer runs with given parameters (a
// unit of several), null for a Linear (weight [out, in], bias [out]).
struct LayerParameters {
  size_t index;
  std::string kind;  // the layer's class, for the unit's name
  std::vector<std::string> names;
  std::vector<at::Tensor> params;
  const FunctionalLayer* functional = nullptr;
};

// "DecoderBlock" of "harness::runtime::(anonymous namespace)::DecoderBlockImpl".
std::string short_kind(const std::string& name) {
  std::string kind = name.substr(name.rfind(':') == std::string::npos ? 0 : name.rfind(':') + 1);
  if (kind.size() > 4 && kind.compare(kind.size() - 4, 4, "Impl") == 0) kind.resize(kind.size() - 4);
  return kind;
}

std::vector<LayerParameters> shardable_layers(TrainModule& module) {
  torch::nn::Sequential* layers = module.layers();
  if (layers == nullptr) throw InputError("the sharded strategy needs a module with layers");
  std::vector<LayerParameters> out;
  for (size_t i = 0; i < (*layers)->size(); ++i) {
    const std::shared_ptr<torch::nn::Module>& layer = (*layers)->ptr(i);
    auto named = layer->named_parameters(/*recurse=*/true);
    if (named.is_empty()) continue;
    LayerParameters entry{i, short_kind(layer->name()), {}, {}, nullptr};
    for (const auto& item : named) {
      entry.names.push_back(item.key());
      entry.params.push_back(item.value());
    }
    entry.functional = dynamic_cast<const FunctionalLayer*>(layer.get());
    const bool linear = entry.params.size() == 2 && entry.names[0] == "weight" &&
                        entry.names[1] == "bias" && entry.params[0].dim() == 2 &&
                        entry.params[1].dim() == 1;
    TORCH_CHECK(entry.functional != nullptr || linear,
                "the sharded strategy shards Linear layers and FunctionalLayers (layer ", i,
                " is ", layer->name(), ")");
    out.push_back(std::move(entry));
  }
  TORCH_CHECK(!out.empty(), "the module has no layer to shard");
  return out;
}

FlatUnit describe_unit(const LayerParameters& layer, int world,
                       std::optional<c10::ScalarType> compute_dtype) {
  FlatUnit u;
  u.layer_index = layer.index;
  for (size_t i = 0; i < layer.params.size(); ++i) {
    const at::Tensor& p = layer.params[i];
    u.slots.push_back({layer.names[i], p.sizes().vec(), u.numel, p.numel()});
    u.numel += p.numel();
  }
  if (layer.functional != nullptr) {
    u.layer = layer.functional;
    if (compute_dtype) u.compute_dtype = *compute_dtype;
    u.name = "layer " + std::to_string(layer.index) + " (" + layer.kind + ", " +
             std::to_string(u.numel) + " parameters)";
  } else {
    u.out_features = layer.params[0].size(0);
    u.in_features = layer.params[0].size(1);
    u.name = "layer " + std::to_string(layer.index) + " (Linear " +
             std::to_string(u.in_features) + "->" + std::to_string(u.out_features) + ")";
  }
  u.shard_numel = (u.numel + world - 1) / world;
  return u;
}

// This rank's shard of a unit's flat parameter `flat` (unpadded, on the device).
void take_shard(FlatUnit& unit, const at::Tensor& flat, int rank) {
  unit.shard = unit.shard_of(flat, rank);
  unit.shard.set_requires_grad(true);
}

at::Tensor flatten(const std::vector<at::Tensor>& params) {
  std::vector<at::Tensor> flat;
  for (const at::Tensor& p : params) flat.push_back(p.reshape(-1));
  return at::cat(flat);
}

// Drops a layer's own parameters' memory (the shards hold the values from now on).
void free_layer(const LayerParameters& layer) {
  for (at::Tensor t : layer.params) t.set_data(at::empty({0}, t.options()));
}

// The layer's parameters made on `device` and initialised there, as the layer would.
std::vector<at::Tensor> materialize(const LayerParameters& layer, c10::Device device) {
  std::vector<at::Tensor> params;
  for (const at::Tensor& p : layer.params) {
    params.push_back(at::empty(p.sizes(), p.options().device(device)));
  }
  if (layer.functional != nullptr) {
    layer.functional->init_parameters(params);
  } else {
    init_linear_parameters(params[0], params[1]);
  }
  return params;
}

}  // namespace

ShardedStrategy::ShardedStrategy(Communicator& comm, c10::Device device, ShardedOptions options)
    : comm_(comm), device_(device), options_(std::move(options)) {}

ShardedModel& ShardedStrategy::model() {
  TORCH_CHECK(model_ != nullptr, "the sharded strategy has not set up a module");
  return *model_;
}

void ShardedStrategy::setup_module(TrainModule& module) {
  if (auto existing = std::dynamic_pointer_cast<ShardedModel>(module.layer_runner())) {
    model_ = existing;  // already sharded: parameters are not sharded again
    return;
  }
  c10::AutoGradMode no_grad(false);
  std::vector<FlatUnit> units;
  switch (options_.setup) {
    case ShardedSetup::FullThenShard: units = shard_full_then(module); break;
    case ShardedSetup::MetaInit: units = shard_meta_init(module); break;
    case ShardedSetup::Rank0Broadcast: units = shard_rank0_broadcast(module); break;
  }
  // The engines' hooks go on every module of the tree DeepSpeed is given: Lightning gives it the
  // LightningModule, the root (""), whose layers' Sequential is "layers".
  std::vector<std::string> modules{""};
  for (const auto& item : module.module().named_modules()) {
    modules.push_back(item.key().empty() ? "layers" : "layers." + item.key());
  }
  model_ = std::make_shared<ShardedModel>(comm_, std::move(units), std::move(modules));
  module.set_layer_runner(model_);
}

std::vector<FlatUnit> ShardedStrategy::shard_full_then(TrainModule& module) {
  module.module().to(device_);  // the whole module lands on the device first
  std::vector<FlatUnit> units;
  for (const LayerParameters& layer : shardable_layers(module)) {
    FlatUnit unit = describe_unit(layer, comm_.world_size(), options_.compute_dtype);
    take_shard(unit, flatten(layer.params), comm_.rank());
    free_layer(layer);
    units.push_back(std::move(unit));
  }
  return units;
}

std::vector<FlatUnit> ShardedStrategy::shard_meta_init(TrainModule& module) {
  seed_default_generator(device_, options_.init_seed);
  std::vector<FlatUnit> units;
  for (const LayerParameters& layer : shardable_layers(module)) {
    TORCH_CHECK(layer.params[0].is_meta(), "meta_init needs a module built on the meta device");
    FlatUnit unit = describe_unit(layer, comm_.world_size(), options_.compute_dtype);
    // to_empty, then the layer's own init, on the device.
    take_shard(unit, flatten(materialize(layer, device_)), comm_.rank());
    units.push_back(std::move(unit));
  }
  return units;
}

std::vector<FlatUnit> ShardedStrategy::shard_rank0_broadcast(TrainModule& module) {
  const bool root = comm_.rank() == 0;
  std::vector<FlatUnit> units;
  for (const LayerParameters& layer : shardable_layers(module)) {
    TORCH_CHECK(layer.params[0].is_meta() != root,
                root ? "rank 0 must build the module on the host for rank0_broadcast"
                     : "ranks other than 0 build the module on meta for rank0_broadcast");
    FlatUnit unit = describe_unit(layer, comm_.world_size(), options_.compute_dtype);
    at::Tensor bucket;
    if (root) {
      std::vector<at::Tensor> on_device;
      for (const at::Tensor& p : layer.params) on_device.push_back(p.to(device_));
      bucket = flatten(on_device);
      on_device.clear();
      free_layer(layer);
    } else {
      bucket = at::empty({unit.numel}, layer.params[0].options().device(device_));
    }
    // _broadcast_coalesced: one broadcast per bucket of at most broadcast_bucket_bytes.
    const int64_t per_bucket =
        std::max<int64_t>(1, options_.broadcast_bucket_bytes / bucket.element_size());
    for (int64_t first = 0; first < unit.numel; first += per_bucket) {
      at::Tensor piece = bucket.narrow(0, first, std::min(per_bucket, unit.numel - first));
      comm_.broadcast(piece, 0);
    }
    take_shard(unit, bucket, comm_.rank());
    units.push_back(std::move(unit));
  }
  return units;
}

std::unique_ptr<Optimizer> ShardedStrategy::setup_optimizer(TrainModule& /*module*/) {
  return nullptr;  // the engine of the first stage that needs one builds it (begin_stage)
}

std::unique_ptr<ShardedEngine> ShardedStrategy::new_engine(Stage stage) {
  ++engines_built_;
  EngineOptions o;
  o.name = std::string(to_string(stage)) + "#" + std::to_string(engines_built_);
  o.private_registry = options_.engines == EnginePolicy::NewPerStagePrivate;
  o.prefetch = options_.prefetch;
  o.defragment = options_.deepspeed_optimizer_setup;
  return std::make_unique<ShardedEngine>(model(), o);
}

void ShardedStrategy::begin_stage(TrainModule& /*module*/, Stage stage,
                                  std::unique_ptr<Optimizer>& optimizer) {
  if (options_.engines == EnginePolicy::Reuse) {
    if (!engines_.empty()) return;  // the stage only switches mode
    engines_.push_back(new_engine(stage));
    optimizer = engines_.back()->setup_optimizer(options_.adam);
    return;
  }
  if (options_.engines == EnginePolicy::DestroyBetween && !engines_.empty()) {
    engines_.back()->teardown();
    engines_.clear();
  }
  // Lightning (2.6) clears every hook on the module before it builds an evaluation engine
  // (_initialize_deepspeed_inference: remove_module_hooks), not before a training one.
  if (stage != Stage::Fit) model().remove_all_hooks();
  engines_.push_back(new_engine(stage));
  if (stage == Stage::Fit) optimizer = engines_.back()->setup_optimizer(options_.adam);
}

Batch ShardedStrategy::batch_to_device(const Batch& batch) {
  return rank_rows_on_device(batch, comm_, device_);
}

at::Tensor ShardedStrategy::gather_unpadded(const FlatUnit& unit, const at::Tensor& shard) {
  at::Tensor full = at::empty({unit.padded_numel(comm_.world_size())}, shard.options());
  comm_.all_gather_into(full, shard.detach().contiguous());
  return full.narrow(0, 0, unit.numel);
}

std::vector<at::Tensor> ShardedStrategy::gather_full_parameters() {
  c10::AutoGradMode no_grad(false);
  std::vector<at::Tensor> out;
  for (FlatUnit& unit : model().units()) {
    HARNESS_SITE();
    const at::Tensor host = gather_unpadded(unit, unit.shard).to(at::kCPU);
    for (at::Tensor& p : unit.unflatten(host)) out.push_back(std::move(p));
  }
  return out;
}

}  // namespace harness::runtime

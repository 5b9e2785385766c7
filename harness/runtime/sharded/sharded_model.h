#pragma once
// ZeRO-3 / FSDP-style parameter sharding, one flat parameter per unit.
//
// A unit is one layer of a module's Sequential that has parameters -- a Linear, or a
// FunctionalLayer of several (a transformer block: FSDP2's fully_shard per block) -- its
// parameters flattened into one flat parameter, padded to a multiple of the world size (as FSDP
// pads) and split evenly over the ranks. Each rank keeps only its shard (`FlatUnit::shard`, the optimizer's parameter). Before a
// unit runs forward -- and again before its backward -- its full parameter is gathered with one
// all_gather; after use it is freed back to the shard (reshard after forward). The gradient of the
// full parameter is reduce-scattered onto the shards (averaged over ranks, as DDP averages).
//
// Each unit has a status, as DeepSpeed's ZeRO-3 parameters do: NOT_AVAILABLE (shard only),
// INFLIGHT (a gather was issued and not yet waited for: a prefetch) and AVAILABLE (the full
// parameter is there). Gathers in flight are kept in a GatherRegistry. An engine (ShardedEngine,
// in the manner of DeepSpeed's engine) fetches and releases units through its registry; the
// registry is either the module's (one for every engine: DeepSpeed >= 0.9.3) or the engine's own
// (before: a second engine meets a unit the first left INFLIGHT and fails, Lightning #17523).
//
// A FunctionalLayer unit may be gathered in a lower precision than its shards keep (FSDP2's
// MixedPrecisionPolicy: bf16 for compute, float32 shards, gradients reduced in float32). Its
// forward runs the layer on the gathered parameters under autograd and keeps that graph for the
// backward; after the forward the gathered parameter's bytes are freed and its storage kept (as
// FSDP2 resizes the unsharded parameters' storage to 0), and the backward's gather refills the
// same storage, so the graph's saved parameters see the values again.
//
// ShardedModel is what stays on the module (as its LayerRunner): the units, the module's
// registry and the hooks every engine registered on it. An engine registers its hooks as
// DeepSpeed 0.16.9's ZeRO-3 engine does, counted from DeepSpeed itself on sim ranks
// (examples/programs/lightning_deepspeed.py): DeepSpeedEngine's forward pre-hook and forward hook
// on the root (_create_module_forward_pre_hook / _post_hook, deepspeed/runtime/engine.py), then
// DeepSpeedZeRoOffload's (setup_zero_stage3_hooks and _register_deepspeed_module in
// deepspeed/runtime/zero/parameter_offload.py): one start-of-forward hook on the root module, and
// on every module of the tree, recursively (the root -- the LightningModule --, the layers'
// Sequential, every layer, parameterless ones included) four: a forward pre-hook that fetches the
// module's parameters, a forward hook that releases them, a forward hook that attaches the
// pre-backward function to the outputs and a forward pre-hook that attaches the post-backward
// function to the inputs: 2 + 1 + 4 x 11 = 47 for the MLP. An engine's hooks are removed when it
// is torn down or destroyed; Lightning removes every hook on the module before it builds an
// evaluation engine (remove_module_hooks in lightning/pytorch/strategies/deepspeed.py, 2.6).
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "harness/runtime/optim/adam.h"
#include "harness/runtime/dist/communicator.h"
#include "harness/runtime/module.h"

namespace harness::runtime {

enum class UnitStatus { NotAvailable, Inflight, Available };
const char* to_string(UnitStatus status);

// One of a unit's parameters: where its elements lie in the flat parameter.
struct ParamSlot {
  std::string name;  // its name in the layer ("weight", "wq", ...)
  std::vector<int64_t> sizes;
  int64_t offset = 0, numel = 0;
};

struct FlatUnit {
  size_t layer_index = 0;  // position in the module's Sequential
  std::string name;        // e.g. "layer 2 (Linear 64->64)"
  int64_t in_features = 0, out_features = 0;  // Linear units
  // Non-null: the unit is this layer's (several parameters, run by ShardedModel through it);
  // null: a Linear (weight, bias).
  const FunctionalLayer* layer = nullptr;
  std::vector<ParamSlot> slots;  // the layer's parameters in named_parameters order
  // What the full parameter is gathered in (Undefined: the shard's dtype).
  c10::ScalarType compute_dtype = c10::ScalarType::Undefined;
  int64_t numel = 0;        // the parameters' elements
  int64_t shard_numel = 0;  // ceil(numel / world_size)
  at::Tensor shard;         // leaf, requires grad: this rank's elements (padding included)
  at::Tensor full;          // world_size * shard_numel elements while INFLIGHT or AVAILABLE
  UnitStatus status = UnitStatus::NotAvailable;
  std::string inflight_by;  // the engine that issued the gather in flight
  // The unit's whole gradient (padded), summed over backwards that did not reduce it (gradient
  // sync off: FSDP2's set_requires_gradient_sync(False)); reduced with the next one that does.
  at::Tensor unreduced_grad;

  int64_t padded_numel(int world_size) const { return shard_numel * world_size; }
  // Rank `rank`'s shard_numel elements of `flat` (the unit's numel elements, unpadded), zeros
  // where they fall into the padding: a new tensor on flat's device.
  at::Tensor shard_of(const at::Tensor& flat, int rank) const;
  // Views of `full` as the layer's weight and bias.
  at::Tensor weight() const;
  at::Tensor bias() const;
  // The layer's parameters over `full`'s storage, as new leaves (each with its own version
  // counter, so that the gather refilling the storage does not invalidate a graph built on them).
  std::vector<at::Tensor> parameter_leaves() const;
  // Each slot of `flat` (the unit's elements, on any device) viewed with the parameter's sizes.
  std::vector<at::Tensor> unflatten(const at::Tensor& flat) const;
  c10::ScalarType gather_dtype() const;
};

// Gathers in flight, by unit.
using GatherRegistry = std::map<FlatUnit*, std::unique_ptr<PendingCollective>>;

class ShardedEngine;

enum class HookKind {
  EngineForwardPrologue,  // root only: DeepSpeedEngine's forward pre-hook (bookkeeping)
  EngineForwardEpilogue,  // root only: DeepSpeedEngine's forward hook (bookkeeping)
  StartOfForward,      // root only: resets the engine's step (forward pre-hook)
  FetchBeforeForward,  // forward pre-hook: the module's parameters gathered
  ReleaseAfterForward,  // forward hook: the module's parameters freed
  AttachPreBackward,   // forward hook: the pre-backward function on the outputs
  AttachPostBackward,  // forward pre-hook: the post-backward function on the inputs
};
const char* to_string(HookKind kind);

// One hook on the module: what it does, on which module (its name in the module's tree, "" for
// the root) and for which engine.
struct ModuleHook {
  uint64_t id = 0;
  HookKind kind = HookKind::FetchBeforeForward;
  std::string module;
  ShardedEngine* engine = nullptr;
};

class ShardedModel final : public LayerRunner {
 public:
  // `modules`: the names of the modules of the module's tree, root ("") first, in the order
  // named_modules() gives them.
  ShardedModel(Communicator& comm, std::vector<FlatUnit> units, std::vector<std::string> modules);

  at::Tensor forward(torch::nn::Sequential& layers, const at::Tensor& input) override;

  std::vector<FlatUnit>& units() { return units_; }
  std::vector<at::Tensor> shards();
  // The unit after `unit` in forward order; with `wrap`, the first after the last (an eval
  // forward is a whole step: the next one starts at the first unit). nullptr: none.
  FlatUnit* next_unit(const FlatUnit& unit, bool wrap);
  GatherRegistry& registry() { return registry_; }
  Communicator& comm() { return comm_; }
  // Whether a backward reduce-scatters the units' gradients onto their shards (on), or keeps
  // them whole on this rank, summed, until one that does (off): FSDP2's
  // set_requires_gradient_sync.
  void set_gradient_sync(bool enabled) { gradient_sync_ = enabled; }
  bool gradient_sync() const { return gradient_sync_; }

  // The hook registry: an engine registers its hooks on the module (see the top of this file)
  // and removes them by id; every hook on the module runs on every forward, whichever engine put
  // it there.
  uint64_t register_hook(HookKind kind, const std::string& module, ShardedEngine* engine);
  void remove_hook(uint64_t id);
  // Every hook on the module, whichever engine registered it, as Lightning's remove_module_hooks
  // clears the module's hook dictionaries (the engines' handles then remove nothing).
  void remove_all_hooks();
  const std::vector<ModuleHook>& hooks() const { return hooks_; }
  const std::vector<std::string>& module_names() const { return modules_; }
  int64_t hooks_registered() const { return hooks_registered_; }  // ever, by every engine
  int64_t hooks_removed() const { return hooks_removed_; }
  int64_t hook_calls() const { return hook_calls_; }  // hooks run so far
  // The engine of the newest hooks: it runs the units' backward.
  ShardedEngine* active_engine() const { return hooks_.empty() ? nullptr : hooks_.back().engine; }

 private:
  // Runs the hooks of `kind` on `module` (what each does: ShardedEngine::run_hook).
  void run_hooks(HookKind kind, const std::string& module, FlatUnit* unit, bool wrap);

  Communicator& comm_;
  std::vector<FlatUnit> units_;
  std::vector<std::string> modules_;
  std::string layers_name_;                  // the layers' Sequential ("" when it is the root)
  std::vector<std::string> outer_modules_;   // the root down to that Sequential
  GatherRegistry registry_;
  bool gradient_sync_ = true;
  std::vector<ModuleHook> hooks_;  // in registration order (the order they run in)
  uint64_t next_hook_id_ = 1;
  int64_t hooks_registered_ = 0, hooks_removed_ = 0, hook_calls_ = 0;
};

struct EngineOptions {
  std::string name;               // e.g. "validate#1", named in errors
  bool private_registry = false;  // gathers in flight kept by the engine, not the module
  bool prefetch = true;           // issue the next unit's gather when fetching one
  // DeepSpeed's ZeRO-3 optimizer set-up: a barrier, every unit gathered once, then the shards
  // defragmented into one flat device buffer (false: the optimizer just takes the shards, as with
  // FSDP).
  bool defragment = false;
};

// An engine over a ShardedModel (DeepSpeed's engine, reduced to what ZeRO-3 does to parameters):
// registers its hooks on the model when built, fetches and releases units, and builds the
// optimizer over the shards.
class ShardedEngine {
 public:
  // Registers the engine's hooks on the model.
  ShardedEngine(ShardedModel& model, EngineOptions options);
  // Its hooks go with it (the model must outlive it).
  ~ShardedEngine() { remove_hooks(); }
  ShardedEngine(const ShardedEngine&) = delete;
  ShardedEngine& operator=(const ShardedEngine&) = delete;

  // Makes `unit` AVAILABLE as DeepSpeed does: waits for its gather in flight in this engine's
  // registry, then gathers it if it is NOT_AVAILABLE. A unit still INFLIGHT after that (another
  // registry's gather, which DeepSpeed's all_gather skips) fails DeepSpeed's AVAILABLE assertion:
  // the #17523 failure, thrown naming the unit and both engines. With `prefetch_next` (and the
  // engine's prefetch on) issues the next unit's gather.
  void fetch(FlatUnit& unit, bool prefetch_next, bool wrap);
  // Frees an AVAILABLE unit's full parameter (NOT_AVAILABLE after).
  void release(FlatUnit& unit);
  // The optimizer over the shards. With `defragment`, as DeepSpeed's ZeRO-3 optimizer set-up
  // does it: a barrier, every trainable unit gathered once, then the shards defragmented into one flat
  // device buffer (one D2H per shard, one H2D of the buffer) that the shards become views of.
  std::unique_ptr<Optimizer> setup_optimizer(const AdamOptions& adam);
  // Waits for this engine's gathers in flight, releases every unit and removes its hooks.
  void teardown();

  const std::string& name() const { return options_.name; }
  // What one of its hooks does when it runs: FetchBeforeForward fetches `unit` (with the next
  // unit's prefetch), ReleaseAfterForward releases it; the others have nothing to do for a module
  // whose backward is one autograd function (ShardedLinearFn fetches and releases itself).
  void run_hook(HookKind kind, FlatUnit* unit, bool wrap);

 private:
  GatherRegistry& registry();
  void remove_hooks();
  // Where a gather of `unit` lands (its full parameter, in its gather dtype) and what it gathers
  // (the shard, cast to that dtype).
  at::Tensor& gather_buffer(FlatUnit& unit);
  static at::Tensor gather_input(const FlatUnit& unit);

  ShardedModel& model_;
  EngineOptions options_;
  GatherRegistry own_registry_;
  std::vector<uint64_t> hook_ids_;
  bool torn_down_ = false;
};

}  // namespace harness::runtime

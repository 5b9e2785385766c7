#pragma once
// ZeRO-3 / FSDP-style parameter sharding, one flat parameter per unit.
//
// A unit is one Linear layer of a module's Sequential: its weight and bias flattened into one
// flat parameter, padded to a multiple of the world size (as FSDP pads) and split evenly over the
// ranks. Each rank keeps only its shard (`FlatUnit::shard`, the optimizer's parameter). Before a
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
// ShardedModel is what stays on the module (as its LayerRunner): the units, the module's
// registry and the hooks every engine registered on it.
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "harness/runtime/adam.h"
#include "harness/runtime/dist/communicator.h"
#include "harness/runtime/module.h"

namespace harness::runtime {

enum class UnitStatus { NotAvailable, Inflight, Available };
const char* to_string(UnitStatus status);

struct FlatUnit {
  size_t layer_index = 0;  // position in the module's Sequential
  std::string name;        // e.g. "layer 2 (Linear 64->64)"
  int64_t in_features = 0, out_features = 0;
  int64_t numel = 0;        // weight and bias elements
  int64_t shard_numel = 0;  // ceil(numel / world_size)
  at::Tensor shard;         // leaf, requires grad: this rank's elements (padding included)
  at::Tensor full;          // world_size * shard_numel elements while INFLIGHT or AVAILABLE
  UnitStatus status = UnitStatus::NotAvailable;
  std::string inflight_by;  // the engine that issued the gather in flight

  int64_t padded_numel(int world_size) const { return shard_numel * world_size; }
  // Rank `rank`'s shard_numel elements of `flat` (the unit's numel elements, unpadded), zeros
  // where they fall into the padding: a new tensor on flat's device.
  at::Tensor shard_of(const at::Tensor& flat, int rank) const;
  // Views of `full` as the layer's weight and bias.
  at::Tensor weight() const;
  at::Tensor bias() const;
};

// Gathers in flight, by unit.
using GatherRegistry = std::map<FlatUnit*, std::unique_ptr<PendingCollective>>;

class ShardedEngine;

class ShardedModel final : public LayerRunner {
 public:
  ShardedModel(Communicator& comm, std::vector<FlatUnit> units);

  at::Tensor forward(torch::nn::Sequential& layers, const at::Tensor& input) override;

  std::vector<FlatUnit>& units() { return units_; }
  std::vector<at::Tensor> shards();
  // The unit after `unit` in forward order; with `wrap`, the first after the last (an eval
  // forward is a whole step: the next one starts at the first unit). nullptr: none.
  FlatUnit* next_unit(const FlatUnit& unit, bool wrap);
  GatherRegistry& registry() { return registry_; }
  Communicator& comm() { return comm_; }

  // Hooks: each engine registers hooks_per_engine() of them (pre-forward, post-forward and
  // pre-backward per unit); every registered engine's hooks run on every forward.
  void add_hooks(ShardedEngine* engine) { hooked_.push_back(engine); }
  void remove_hooks(const ShardedEngine* engine);
  int64_t hooks_per_engine() const { return 3 * static_cast<int64_t>(units_.size()); }
  int64_t hooks_installed() const {
    return hooks_per_engine() * static_cast<int64_t>(hooked_.size());
  }
  // The engine of the newest hooks: it runs the units' backward.
  ShardedEngine* active_engine() const { return hooked_.empty() ? nullptr : hooked_.back(); }

 private:
  Communicator& comm_;
  std::vector<FlatUnit> units_;
  GatherRegistry registry_;
  std::vector<ShardedEngine*> hooked_;
};

struct EngineOptions {
  std::string name;               // e.g. "validate#1", named in errors
  bool private_registry = false;  // gathers in flight kept by the engine, not the module
  bool prefetch = true;           // issue the next unit's gather when fetching one
  // DeepSpeed's ZeRO-3 optimizer set-up: every unit gathered once, then the shards defragmented
  // into one flat device buffer (false: the optimizer just takes the shards, as with FSDP).
  bool defragment = false;
};

// An engine over a ShardedModel (DeepSpeed's engine, reduced to what ZeRO-3 does to parameters):
// registers its hooks on the model when built, fetches and releases units, and builds the
// optimizer over the shards.
class ShardedEngine {
 public:
  ShardedEngine(ShardedModel& model, EngineOptions options);
  // Its hooks go with it (the model must outlive it).
  ~ShardedEngine() { model_.remove_hooks(this); }
  ShardedEngine(const ShardedEngine&) = delete;
  ShardedEngine& operator=(const ShardedEngine&) = delete;

  // Makes `unit` AVAILABLE: waits for its gather in flight, or gathers it. A unit INFLIGHT with
  // no gather in this engine's registry is the #17523 failure: throws naming the unit and both
  // engines. With `prefetch_next` (and the engine's prefetch on) issues the next unit's gather.
  void fetch(FlatUnit& unit, bool prefetch_next, bool wrap);
  // Frees an AVAILABLE unit's full parameter (NOT_AVAILABLE after).
  void release(FlatUnit& unit);
  // The optimizer over the shards. With `defragment`, as DeepSpeed's ZeRO-3 optimizer set-up
  // does it: every trainable unit gathered once, then the shards defragmented into one flat
  // device buffer (one D2H per shard, one H2D of the buffer) that the shards become views of.
  std::unique_ptr<Optimizer> setup_optimizer(const AdamOptions& adam);
  // Waits for this engine's gathers in flight, releases every unit and removes its hooks.
  void teardown();

  const std::string& name() const { return options_.name; }

 private:
  GatherRegistry& registry();

  ShardedModel& model_;
  EngineOptions options_;
  GatherRegistry own_registry_;
  bool torn_down_ = false;
};

}  // namespace harness::runtime

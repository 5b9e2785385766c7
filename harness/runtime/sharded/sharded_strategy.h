#pragma once
// ShardedStrategy: ZeRO-3 / FSDP-style training (see sharded_model.h) in the manner of
// Lightning's FSDP and DeepSpeed strategies: how the sharded model is set up (the #8722 axis) and
// which engine each trainer stage runs under (the #17523 axis).
//
// Set-up paths:
//   FullThenShard  every rank builds the whole module on the host, moves it to its device whole
//                  (module.to(device), as a model built outside configure_model is), then shards
//                  it: host and device both hold P bytes before the shards exist.
//   MetaInit       the module is built on the meta device (shapes only); each unit is
//                  materialised on the device whole (to_empty), initialised there by the layer's
//                  own init from a seed every rank shares, sharded and freed: no host copy of P.
//   Rank0Broadcast rank 0 builds the module on the host; the others build it on meta. Unit by
//                  unit, rank 0 moves it to its device and broadcasts it (FSDP's
//                  sync_module_states: _broadcast_coalesced in buckets of 250 MiB, one broadcast
//                  per bucket of each unit), every rank keeps its shard and frees the rest.
//
// Engines per stage (validate, fit, test on one trainer):
//   NewPerStage           every stage builds a new engine on the same module (Lightning today);
//                         an evaluation stage first clears every hook on the module (Lightning's
//                         remove_module_hooks), a fit stage does not, so the validate engine's
//                         hooks stay on the module through fit; the fit engine's optimizer set-up
//                         gathers every unit and defragments the shards. The in-flight registry
//                         is the module's.
//   NewPerStagePrivate    the same with each engine's own registry: the fit engine meets the unit
//                         the validate engine's prefetch left INFLIGHT and fails (#17523).
//   Reuse                 one engine, built (with its optimizer) at the first stage, reused.
//   DestroyBetween        the previous engine is torn down (gathers waited for, units released,
//                         hooks removed) before the next is built.
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "harness/runtime/optim/adam.h"
#include "harness/runtime/dist/communicator.h"
#include "harness/runtime/sharded/sharded_model.h"
#include "harness/runtime/strategy.h"

namespace harness::runtime {

enum class ShardedSetup { FullThenShard, MetaInit, Rank0Broadcast };
const char* to_string(ShardedSetup setup);
// Whether this rank builds its module with materialised (host) parameters for `setup`.
bool builds_on_host(ShardedSetup setup, int rank);

// How a sharded strategy checkpoints: one consolidated file (every unit gathered to rank 0, in the
// single-device layout, so a single-device run can load it too) or a directory with one file of
// shards per rank (rank<r>.ckpt; only the same world size can load it).
enum class ShardedCheckpoint { Consolidated, PerRank };
const char* to_string(ShardedCheckpoint format);

enum class EnginePolicy { NewPerStage, NewPerStagePrivate, Reuse, DestroyBetween };
const char* to_string(EnginePolicy policy);

struct ShardedOptions {
  ShardedSetup setup = ShardedSetup::FullThenShard;
  EnginePolicy engines = EnginePolicy::Reuse;
  // The Adam the engines build over the shards (the module's configure_optimizers builds one
  // over its own parameters, which sharding has emptied).
  AdamOptions adam;
  uint64_t init_seed = 0;  // MetaInit: the seed every rank initialises its units from
  int64_t broadcast_bucket_bytes = 250LL * 1024 * 1024;  // Rank0Broadcast
  bool prefetch = true;
  ShardedCheckpoint checkpoint = ShardedCheckpoint::Consolidated;
  // Engines set their optimizer up as DeepSpeed's ZeRO-3 does (see EngineOptions::defragment).
  bool deepspeed_optimizer_setup = false;
  // What FunctionalLayer units are gathered in for compute (FSDP2's MixedPrecisionPolicy
  // param_dtype; their gradients are reduced in the shards' dtype); unset: the shards' dtype.
  std::optional<c10::ScalarType> compute_dtype;
};

class ShardedStrategy final : public Strategy {
 public:
  ShardedStrategy(Communicator& comm, c10::Device device, ShardedOptions options);

  c10::Device root_device() const override { return device_; }
  Communicator* communicator() override { return &comm_; }
  // Shards the module's Linear layers and FunctionalLayers, one unit each (once: a module
  // already sharded is left as it is).
  void setup_module(TrainModule& module) override;
  std::unique_ptr<Optimizer> setup_optimizer(TrainModule& module) override;
  void begin_stage(TrainModule& module, Stage stage,
                   std::unique_ptr<Optimizer>& optimizer) override;
  Batch batch_to_device(const Batch& batch) override;
  // The gradients reduce-scatter inside backward: on, or kept whole until a backward with it on.
  void set_gradient_sync(bool enabled) override { model().set_gradient_sync(enabled); }
  // Consolidated: collective; the full state on every rank (rank 0 writes it, no rank waits for
  // the file). PerRank: this rank's shards, optimizer state and metric states.
  Checkpoint make_checkpoint(TrainModule& module, Optimizer& optimizer, int64_t step) override;
  void save_checkpoint_to(const std::string& path, TrainModule& module, Optimizer& optimizer,
                          int64_t step) override;
  Checkpoint load_checkpoint_from(const std::string& path) override;
  // Takes either format (told apart by its entries); InputError when it does not fit the model.
  void restore_checkpoint(const Checkpoint& checkpoint, TrainModule& module,
                          Optimizer& optimizer) override;

  ShardedModel& model();
  int64_t engines_built() const { return engines_built_; }
  // The module's full parameters gathered to the host, in the module's parameter order:
  // collective.
  std::vector<at::Tensor> gather_full_parameters();

 private:
  std::vector<FlatUnit> shard_full_then(TrainModule& module);
  std::vector<FlatUnit> shard_meta_init(TrainModule& module);
  std::vector<FlatUnit> shard_rank0_broadcast(TrainModule& module);
  std::unique_ptr<ShardedEngine> new_engine(Stage stage);
  // Every rank's `shard` (shard_numel elements of `unit`) gathered, without the padding.
  at::Tensor gather_unpadded(const FlatUnit& unit, const at::Tensor& shard);
  Checkpoint consolidated_checkpoint(Optimizer& optimizer, int64_t step);
  void restore_consolidated(const Checkpoint& checkpoint, Optimizer& optimizer);
  void restore_per_rank(const Checkpoint& checkpoint, Optimizer& optimizer);

  Communicator& comm_;
  c10::Device device_;
  ShardedOptions options_;
  std::shared_ptr<ShardedModel> model_;
  std::vector<std::unique_ptr<ShardedEngine>> engines_;  // NewPerStage keeps every one alive
  int64_t engines_built_ = 0;
};

}  // namespace harness::runtime

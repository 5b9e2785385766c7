#pragma once
// DataParallelStrategy: DDP in the manner of torch.nn.parallel.DistributedDataParallel. Each rank
// holds the whole model on its own device, trains on its slice of the global batch, and after
// backward the gradients are averaged over ranks with one all_reduce per bucket (buckets of about
// `bucket_cap_bytes`, filled in reverse parameter order as DDP does). At set-up the parameters
// and buffers are broadcast from rank 0, so every rank starts from the same model.
//
// With ZeRO-1 (`zero_stage1`), the optimizer is a ZeroRedundancyOptimizer over the module's
// parameters: each rank steps only its shard (see zero.h).
#include <cstdint>
#include <optional>

#include "harness/runtime/optim/adam.h"
#include "harness/runtime/dist/communicator.h"
#include "harness/runtime/strategy.h"
#include "harness/runtime/parallel/zero.h"

namespace harness::runtime {

// This rank's rows of the global batch on `device` (the batch size must divide by the world
// size): what every data parallel strategy trains a rank on.
Batch rank_rows_on_device(const Batch& batch, const Communicator& comm, c10::Device device);

struct DataParallelOptions {
  int64_t bucket_cap_bytes = 25 * 1024 * 1024;  // DDP's default bucket_cap_mb=25
  // Set: ZeRO-1, the optimizer state sharded over ranks, stepping this Adam on each shard.
  std::optional<AdamOptions> zero_adam;
  ParamBroadcast zero_param_broadcast = ParamBroadcast::PerParameter;
};

class DataParallelStrategy final : public Strategy {
 public:
  DataParallelStrategy(Communicator& comm, c10::Device device, DataParallelOptions options = {});

  c10::Device root_device() const override { return device_; }
  void setup_module(TrainModule& module) override;
  std::unique_ptr<Optimizer> setup_optimizer(TrainModule& module) override;
  // This rank's rows of the global batch (the batch size must divide by the world size).
  Batch batch_to_device(const Batch& batch) override;
  void reduce_gradients(TrainModule& module) override;
  Communicator* communicator() override { return &comm_; }
  Checkpoint make_checkpoint(TrainModule& module, Optimizer& optimizer, int64_t step) override;
  // Rank 0 writes the checkpoint (every replica holds the same parameters); the others write
  // nothing and do not wait for it.
  void save_checkpoint_to(const std::string& path, TrainModule& module, Optimizer& optimizer,
                          int64_t step) override;
  void restore_checkpoint(const Checkpoint& checkpoint, TrainModule& module,
                          Optimizer& optimizer) override;

 private:
  Communicator& comm_;
  c10::Device device_;
  DataParallelOptions options_;
  SingleDeviceStrategy local_;  // how one replica is saved and restored
};

}  // namespace harness::runtime

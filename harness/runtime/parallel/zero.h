#pragma once
// ZeroRedundancyOptimizer: ZeRO stage 1 in the manner of torch.distributed.optim's. The
// parameters are partitioned over ranks by size (largest first, each to the rank with the fewest
// elements so far); each rank keeps Adam state for its own shard only and steps it; then every
// parameter is broadcast from its owner, one broadcast per parameter or one per rank's flat bucket
// (the parameters are then views into that bucket, as with parameters_as_bucket_view=True).
//
// consolidate_state_dict gathers every shard's state onto one rank before a checkpoint, in one of
// three ways (the subject of the `zero_broadcast` scenario):
//   ObjectList: torch.distributed.broadcast_object_list -- pickled, sizes read with .item(),
//               tensors unpickled onto the sender's device;
//   Object:     ZeRO's own _broadcast_object -- pickled, torch.load(map_location=this rank's
//               device);
//   Tensor:     no pickling: each state tensor broadcast straight into a buffer on the receiver's
//               device (the receiver knows every shape from the partition).
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "harness/runtime/optim/adam.h"
#include "harness/runtime/dist/communicator.h"

namespace harness::runtime {

enum class ParamBroadcast { PerParameter, Bucketed };
const char* to_string(ParamBroadcast mode);

enum class Consolidation { ObjectList, Object, Tensor };
const char* to_string(Consolidation how);

// The owner rank of each parameter: largest first, each to the least-loaded rank (ties: lowest).
std::vector<int> partition_parameters(const std::vector<at::Tensor>& params, int world_size);

class ZeroRedundancyOptimizer final : public Optimizer {
 public:
  ZeroRedundancyOptimizer(std::vector<at::Tensor> params, Communicator& comm, AdamOptions adam,
                          ParamBroadcast broadcast);

  void step() override;
  void zero_grad(bool set_to_none = true) override;
  // The consolidated state (global parameter indices): only on the rank it was consolidated to,
  // after consolidate_state_dict; throws otherwise (as PyTorch's does).
  OptimizerStateDict state_dict() const override;
  // Takes a full state_dict and keeps this rank's shard.
  void load_state_dict(const OptimizerStateDict& state) override;
  void for_each_state_tensor(
      const std::function<void(const std::string&, at::Tensor&)>& fn) override;
  const std::vector<at::Tensor>& params() const override { return params_; }

  // This rank's shard of the state, with global parameter indices.
  OptimizerStateDict local_state_dict() const;
  // Collective: every rank must call it. Afterwards rank `to` holds the whole state on the host.
  void consolidate_state_dict(Consolidation how, int to = 0);
  const std::vector<int>& owners() const { return owners_; }

 private:
  void broadcast_parameters();
  void send_object(const OptimizerStateDict& state, Consolidation how);
  OptimizerStateDict receive_object(int src, Consolidation how);
  OptimizerStateDict broadcast_state_tensors(int src);

  std::vector<at::Tensor> params_;
  Communicator& comm_;
  AdamOptions adam_;
  ParamBroadcast broadcast_;
  std::vector<int> owners_;                 // rank owning params_[i]
  std::vector<int64_t> local_to_global_;    // index in the local optimizer -> index in params_
  std::vector<at::Tensor> buckets_;         // per rank, when bucketed
  std::unique_ptr<Adam> local_;
  int64_t steps_ = 0;
  std::optional<OptimizerStateDict> consolidated_;
};

}  // namespace harness::runtime

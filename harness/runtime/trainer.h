#pragma once
// Trainer: runs fit / validate / test of a TrainModule under a Strategy (in the manner of
// Lightning's Trainer): max steps, callbacks at step boundaries, a checkpoint callback, and resume
// from a checkpoint path. Every part of a step runs inside its phase (train.data, train.forward,
// train.backward, optimizer.step, ...), so the instrument attributes what it costs.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "harness/runtime/data.h"
#include "harness/runtime/strategy.h"

namespace harness::runtime {

class Trainer;

class TrainerCallback {
 public:
  virtual ~TrainerCallback() = default;
  // `step` is the global step about to run / just completed (1-based once it has run).
  virtual void on_train_step_start(Trainer&, int64_t /*step*/) {}
  virtual void on_train_step_end(Trainer&, int64_t /*step*/) {}
};

// Saves a checkpoint every `every_n_steps` steps to `<directory>/step=<step>.ckpt`
// (Lightning's ModelCheckpoint(every_n_train_steps=n)).
class CheckpointCallback final : public TrainerCallback {
 public:
  CheckpointCallback(std::string directory, int64_t every_n_steps)
      : directory_(std::move(directory)), every_n_steps_(every_n_steps) {}
  void on_train_step_end(Trainer& trainer, int64_t step) override;
  std::string path_for(int64_t step) const;

 private:
  std::string directory_;
  int64_t every_n_steps_;
};

// Who decides what a checkpoint holds of the module's metrics (Lightning #12193).
enum class MetricCheckpointing {
  StrategyOwned,  // Lightning >= 2.0: each rank's states, where the strategy puts them
  // Before, in both of the trainer's modes, ranks other than 0 reset their metrics after a load.
  TrainerDefault,        // by default the trainer did not sync on save: rank 0's file holds rank
                         // 0's local states, so the other ranks' states are lost on resume
  TrainerFaultTolerant,  // with fault-tolerant training on, it synced every metric (persistent)
                         // around each save: rank 0's file holds the synced states
};
const char* to_string(MetricCheckpointing policy);

// When the gradients of the micro-batches a step accumulates are reduced across ranks.
enum class GradientSync {
  LastMicroBatch,   // after the last one only: DDP's no_sync() and FSDP2's
                    // set_requires_gradient_sync(False) on the others (what Lightning does)
  EveryMicroBatch,  // after each one's backward (a loop that never turns the sync off)
};
const char* to_string(GradientSync sync);

struct TrainerConfig {
  int64_t max_steps = 10;
  int64_t eval_batches = 2;  // batches per validate() / test()
  MetricCheckpointing metric_checkpointing = MetricCheckpointing::StrategyOwned;
  // Micro-batches whose gradients a step accumulates before the optimizer steps (Lightning's
  // accumulate_grad_batches): consecutive batches of the data, each loss divided by their number.
  int64_t accumulate_grad_batches = 1;
  GradientSync gradient_sync = GradientSync::LastMicroBatch;
};

class Trainer {
 public:
  Trainer(Strategy& strategy, const DataSource& data, TrainerConfig config);

  void add_callback(TrainerCallback* callback) { callbacks_.push_back(callback); }

  // Trains until max_steps; resumes from `ckpt_path` when given.
  void fit(TrainModule& module, const std::optional<std::string>& ckpt_path = std::nullopt);
  // Mean loss over eval_batches batches (no gradients); one host read of the result.
  double validate(TrainModule& module);
  double test(TrainModule& module);

  // Sets the module up for a stage (phase "setup"): the strategy's set-up the first time, then
  // its begin_stage. fit / validate / test do it themselves; calling it first (to measure the
  // set-up apart) makes the next call of that stage skip it.
  void setup(TrainModule& module, Stage stage);

  void save_checkpoint(const std::string& path);
  int64_t global_step() const { return global_step_; }
  Optimizer* optimizer() { return optimizer_.get(); }

 private:
  void setup_unless_prepared(TrainModule& module, Stage stage);
  void train_step(TrainModule& module);
  // Batch `index` of the data on the strategy's device (phase "train.data").
  Batch load_batch(int64_t index);
  // One micro-batch's forward and backward, its gradients reduced across ranks if `sync`.
  void micro_step(TrainModule& module, const Batch& batch, bool sync);
  double evaluate(TrainModule& module, Stage stage, int64_t first_batch);

  Strategy& strategy_;
  const DataSource& data_;
  TrainerConfig config_;
  std::vector<TrainerCallback*> callbacks_;
  TrainModule* module_ = nullptr;  // set up on this trainer's strategy
  std::unique_ptr<Optimizer> optimizer_;
  int64_t global_step_ = 0;
  std::optional<Stage> prepared_;  // set up by an explicit setup() call, not yet started
};

}  // namespace harness::runtime

#pragma once
// Strategy: where the model runs and how its training state is saved and restored (in the manner
// of Lightning's Strategy). SingleDeviceStrategy is one device; its RestorePolicy says what it
// does with the optimizer state after Optimizer::load_state_dict on resume.
#include <c10/core/Device.h>

#include <memory>
#include <string>

#include "harness/runtime/checkpoint/checkpoint.h"
#include "harness/runtime/module.h"

namespace harness::runtime {

class Communicator;

enum class RestorePolicy {
  MoveAll,   // every optimizer state tensor moved to the device, `step` included (Lightning < 2.4)
  KeepStep,  // every optimizer state tensor but `step` moved to the device (Lightning >= 2.4)
  Rebuild,   // nothing moved: load_state_dict places state itself (PyTorch's own way)
};
const char* to_string(RestorePolicy policy);

// The trainer's entry points: each starts a stage (Lightning's TrainerFn).
enum class Stage { Fit, Validate, Test };
const char* to_string(Stage stage);

class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual c10::Device root_device() const = 0;
  // The process group of a strategy with ranks (nullptr: one process).
  virtual Communicator* communicator() { return nullptr; }
  // Puts the model on the device (phase "setup").
  virtual void setup_module(TrainModule& module) = 0;
  // The optimizer the trainer steps (default: the module's own; ZeRO wraps it).
  virtual std::unique_ptr<Optimizer> setup_optimizer(TrainModule& module) {
    return module.configure_optimizers();
  }
  // At the start of every stage, after the set-up above (phase "setup"): a strategy that runs
  // the module under an engine builds or reuses it here, and may replace the optimizer.
  virtual void begin_stage(TrainModule& /*module*/, Stage /*stage*/,
                           std::unique_ptr<Optimizer>& /*optimizer*/) {}
  virtual Batch batch_to_device(const Batch& batch) = 0;
  // After backward, before the optimizer step (phase "train.grad_sync"): data parallel
  // strategies average the gradients over ranks here.
  virtual void reduce_gradients(TrainModule& /*module*/) {}
  // Whether the next backward reduces its gradients across ranks, for a strategy that reduces
  // them inside backward (sharded: FSDP2's set_requires_gradient_sync). Off, they accumulate
  // unreduced on the rank until a backward with it on.
  virtual void set_gradient_sync(bool /*enabled*/) {}
  virtual Checkpoint make_checkpoint(TrainModule& module, Optimizer& optimizer, int64_t step) = 0;
  // Writes the training state to `path` (phase "checkpoint.save"): by default the checkpoint
  // make_checkpoint gives, as one file. A sharded strategy may write one file per rank instead.
  virtual void save_checkpoint_to(const std::string& path, TrainModule& module,
                                  Optimizer& optimizer, int64_t step) {
    save_checkpoint(make_checkpoint(module, optimizer, step), path);
  }
  // Reads what save_checkpoint_to wrote (for restore_checkpoint).
  virtual Checkpoint load_checkpoint_from(const std::string& path) { return load_checkpoint(path); }
  virtual void restore_checkpoint(const Checkpoint& checkpoint, TrainModule& module,
                                  Optimizer& optimizer) = 0;
};

class SingleDeviceStrategy final : public Strategy {
 public:
  SingleDeviceStrategy(c10::Device device, RestorePolicy policy)
      : device_(device), policy_(policy) {}

  c10::Device root_device() const override { return device_; }
  void setup_module(TrainModule& module) override;
  Batch batch_to_device(const Batch& batch) override;
  Checkpoint make_checkpoint(TrainModule& module, Optimizer& optimizer, int64_t step) override;
  void restore_checkpoint(const Checkpoint& checkpoint, TrainModule& module,
                          Optimizer& optimizer) override;

 private:
  c10::Device device_;
  RestorePolicy policy_;
};

}  // namespace harness::runtime

#pragma once
// Metric: a small, real counterpart of torchmetrics' Metric. A metric registers states with a
// reduction (sum, mean, max, or cat for list states), accumulates them in update() on the device,
// and computes its value from them. sync() gathers every state from every rank the way
// torchmetrics does (gather_all_tensors in torchmetrics/utilities/distributed.py), so that what it
// costs counts as it does there:
//   - every state's gather begins with a barrier;
//   - a 0-dim state: one all_gather (into world_size zeros_like buffers);
//   - a state with dims: its shape as a device tensor (one blocking H2D), one all_gather of the
//     shapes, the shapes compared on the host (a blocking read per element, as Python's all()
//     over a tensor does), then one all_gather of the data if every shape matches; otherwise the
//     state is padded to the largest shape (after a blocking D2H of the differences), gathered,
//     and each rank's part sliced out (one blocking read per dim and rank);
//   - a list state is concatenated first (one launch); an empty one is gathered as a 0-length
//     tensor, so that every rank takes part in every collective;
//   - then the gathered values are reduced (stack and sum / mean / max, or cat).
// Without a process group (or with one rank) sync() does nothing and costs nothing. unsync()
// restores the local states sync() replaced.
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "harness/runtime/dist/communicator.h"

namespace harness::runtime {

enum class Reduction { Sum, Mean, Max, Cat };
const char* to_string(Reduction reduction);

// torchmetrics' gather_all_tensors: every rank's `tensor`, in rank order.
std::vector<at::Tensor> gather_all_tensors(const at::Tensor& tensor, Communicator& comm);

class Metric {
 public:
  explicit Metric(std::string name) : name_(std::move(name)) {}
  virtual ~Metric() = default;
  Metric(const Metric&) = delete;
  Metric& operator=(const Metric&) = delete;

  // What one training step adds (on the device, no gradients).
  virtual void update(const at::Tensor& loss, const at::Tensor& output,
                      const at::Tensor& target) = 0;
  // The metric's value from its states (0-dim, on the device).
  virtual at::Tensor compute() const = 0;

  const std::string& name() const { return name_; }
  void reset();
  void sync(Communicator* comm);
  void unsync();
  bool synced() const { return cache_.has_value(); }
  // torchmetrics' Metric.persistent(mode): whether the states are in the module's state dict.
  void set_persistent(bool persistent);
  void to(c10::Device device);

  // Persistent states as "<metric>.<state>" (a list state as its concatenation).
  std::vector<std::pair<std::string, at::Tensor>> state_dict() const;
  // Loads this metric's entries of `entries`; throws InputError on a missing or misshapen one.
  void load_state_dict(const std::vector<std::pair<std::string, at::Tensor>>& entries);

 protected:
  // A tensor state starting from `initial` (its shape and dtype) with `reduction`.
  void add_state(const std::string& name, at::Tensor initial, Reduction reduction, bool persistent);
  // A list state (reduction Cat): tensors appended by update(), concatenated on dim 0.
  void add_list_state(const std::string& name, bool persistent);
  at::Tensor& state(const std::string& name);
  const at::Tensor& state(const std::string& name) const;
  std::vector<at::Tensor>& list_state(const std::string& name);
  const std::vector<at::Tensor>& list_state(const std::string& name) const;

 private:
  struct State {
    std::string name;
    Reduction reduction = Reduction::Sum;
    bool is_list = false;
    bool persistent = false;
    at::Tensor initial;             // tensor states: what reset() restores
    at::Tensor value;               // tensor states
    std::vector<at::Tensor> items;  // list states
  };
  State& find(const std::string& name);
  const State& find(const std::string& name) const;

  std::string name_;
  std::vector<State> states_;
  std::optional<std::vector<State>> cache_;  // the local states while synced
};

// The metrics of the MLP module (MlpConfig::metrics).
// Mean of the training loss over the rows seen: two scalar sum states.
class MeanLoss final : public Metric {
 public:
  explicit MeanLoss(bool persistent);
  void update(const at::Tensor& loss, const at::Tensor& output, const at::Tensor& target) override;
  at::Tensor compute() const override;
};

// Mean absolute error of each batch, kept as a list state (cat); computes their mean.
class BatchMeanAbsoluteError final : public Metric {
 public:
  explicit BatchMeanAbsoluteError(bool persistent);
  void update(const at::Tensor& loss, const at::Tensor& output, const at::Tensor& target) override;
  at::Tensor compute() const override;
};

}  // namespace harness::runtime

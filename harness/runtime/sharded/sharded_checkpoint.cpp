// ShardedStrategy's checkpoints: consolidated (every unit and its optimizer state gathered, in the
// single-device layout: "<layer>.weight" / "<layer>.bias" and per-parameter Adam state) or one file
// of shards per rank ("units.<i>.shard" and the shard optimizer's own state).
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <c10/core/GradMode.h>

#include <filesystem>
#include <map>

#include "harness/errors.h"
#include "harness/instrument/phase.h"
#include "harness/runtime/sharded/sharded_strategy.h"
#include "harness/instrument/site.h"

namespace harness::runtime {
namespace {

namespace fs = std::filesystem;

std::string weight_name(const FlatUnit& unit) {
  return std::to_string(unit.layer_index) + ".weight";
}
std::string bias_name(const FlatUnit& unit) { return std::to_string(unit.layer_index) + ".bias"; }
std::string shard_name(size_t index) { return "units." + std::to_string(index) + ".shard"; }

std::string rank_file(const std::string& directory, int rank) {
  return (fs::path(directory) / ("rank" + std::to_string(rank) + ".ckpt")).string();
}

const at::Tensor& entry(const std::map<std::string, at::Tensor>& model, const std::string& name,
                        c10::IntArrayRef shape) {
  auto it = model.find(name);
  if (it == model.end()) throw InputError("checkpoint lacks the model entry '" + name + "'");
  if (it->second.sizes() != shape) {
    throw InputError("checkpoint entry '" + name + "' has shape " + c10::str(it->second.sizes()) +
                     ", the model has " + c10::str(shape));
  }
  return it->second;
}

}  // namespace

Checkpoint ShardedStrategy::make_checkpoint(TrainModule& module, Optimizer& optimizer,
                                            int64_t step) {
  if (options_.checkpoint == ShardedCheckpoint::Consolidated) {
    Checkpoint ckpt = consolidated_checkpoint(optimizer, step);
    ckpt.metrics = metric_states(module);  // rank 0's, as with DDP
    return ckpt;
  }
  Checkpoint ckpt;
  ckpt.metrics = metric_states(module);  // this rank's
  ckpt.global_step = step;
  for (size_t i = 0; i < model().units().size(); ++i) {
    ckpt.model.emplace_back(shard_name(i), model().units()[i].shard.detach());
  }
  ckpt.optimizer = optimizer.state_dict();
  return ckpt;
}

Checkpoint ShardedStrategy::consolidated_checkpoint(Optimizer& optimizer, int64_t step) {
  Phase phase("checkpoint.consolidate");
  c10::AutoGradMode no_grad(false);
  Checkpoint ckpt;
  ckpt.global_step = step;
  const OptimizerStateDict local = optimizer.state_dict();
  OptimizerStateDict& full = ckpt.optimizer;
  for (const OptimizerStateDict::Group& g : local.param_groups) {
    OptimizerStateDict::Group group{g.options, {}};
    for (int64_t i : g.params) group.params.insert(group.params.end(), {2 * i, 2 * i + 1});
    full.param_groups.push_back(std::move(group));
  }
  const int64_t units = static_cast<int64_t>(model().units().size());
  for (int64_t i = 0; i < units; ++i) {
    const FlatUnit& unit = model().units()[static_cast<size_t>(i)];
    TORCH_CHECK(unit.layer == nullptr, "the sharded strategy's checkpoints hold Linear units only (",
                unit.name, " is not one)");
    const int64_t weight_numel = unit.out_features * unit.in_features;
    HARNESS_SITE();
    auto split = [&](const at::Tensor& flat) {
      return std::make_pair(
          flat.narrow(0, 0, weight_numel).view({unit.out_features, unit.in_features}).to(at::kCPU),
          flat.narrow(0, weight_numel, unit.out_features).to(at::kCPU));
    };
    auto [weight, bias] = split(gather_unpadded(unit, unit.shard));
    ckpt.model.emplace_back(weight_name(unit), weight);
    ckpt.model.emplace_back(bias_name(unit), bias);
    auto it = local.state.find(i);
    if (it == local.state.end()) continue;  // before the first step: no state yet
    for (const auto& [key, value] : it->second) {
      if (value.dim() == 0) {  // `step`: the same for the unit's weight and bias
        full.state[2 * i][key] = value.clone();
        full.state[2 * i + 1][key] = value.clone();
        continue;
      }
      auto [w, b] = split(gather_unpadded(unit, value));
      full.state[2 * i][key] = w;
      full.state[2 * i + 1][key] = b;
    }
  }
  return ckpt;
}

void ShardedStrategy::save_checkpoint_to(const std::string& path, TrainModule& module,
                                         Optimizer& optimizer, int64_t step) {
  const Checkpoint ckpt = make_checkpoint(module, optimizer, step);  // collective if consolidated
  if (options_.checkpoint == ShardedCheckpoint::Consolidated) {
    if (comm_.rank() == 0) save_checkpoint(ckpt, path);
    return;
  }
  create_checkpoint_directory(path);
  save_checkpoint(ckpt, rank_file(path, comm_.rank()));
}

Checkpoint ShardedStrategy::load_checkpoint_from(const std::string& path) {
  if (!fs::is_directory(path)) return load_checkpoint(path);
  const std::string file = rank_file(path, comm_.rank());
  if (!fs::exists(file)) {
    throw InputError("sharded checkpoint " + path + " has no file for rank " +
                     std::to_string(comm_.rank()) + " (saved by fewer ranks?)");
  }
  return load_checkpoint(file);
}

void ShardedStrategy::restore_checkpoint(const Checkpoint& ckpt, TrainModule& module,
                                         Optimizer& optimizer) {
  const bool per_rank = !ckpt.model.empty() && ckpt.model.front().first == shard_name(0);
  per_rank ? restore_per_rank(ckpt, optimizer) : restore_consolidated(ckpt, optimizer);
  load_metric_states(module, ckpt.metrics);
}

void ShardedStrategy::restore_per_rank(const Checkpoint& ckpt, Optimizer& optimizer) {
  const std::map<std::string, at::Tensor> saved(ckpt.model.begin(), ckpt.model.end());
  if (saved.size() != model().units().size()) {
    throw InputError("sharded checkpoint holds " + std::to_string(saved.size()) +
                     " shards, the model has " + std::to_string(model().units().size()) + " units");
  }
  c10::AutoGradMode no_grad(false);
  for (size_t i = 0; i < model().units().size(); ++i) {
    FlatUnit& unit = model().units()[i];
    unit.shard.copy_(entry(saved, shard_name(i), {unit.shard_numel}));
  }
  optimizer.load_state_dict(ckpt.optimizer);
}

void ShardedStrategy::restore_consolidated(const Checkpoint& ckpt, Optimizer& optimizer) {
  const std::map<std::string, at::Tensor> saved(ckpt.model.begin(), ckpt.model.end());
  if (saved.size() != 2 * model().units().size()) {
    throw InputError("checkpoint holds " + std::to_string(saved.size()) +
                     " model entries, the "
                     "model has " +
                     std::to_string(2 * model().units().size()));
  }
  c10::AutoGradMode no_grad(false);
  OptimizerStateDict mine;
  for (const OptimizerStateDict::Group& g : ckpt.optimizer.param_groups) {
    OptimizerStateDict::Group group{g.options, {}};
    for (int64_t p : g.params) {
      if (p % 2 == 0) group.params.push_back(p / 2);  // a unit is its weight's and bias' place
    }
    mine.param_groups.push_back(std::move(group));
  }
  const int rank = comm_.rank();
  for (size_t i = 0; i < model().units().size(); ++i) {
    FlatUnit& unit = model().units()[i];
    TORCH_CHECK(unit.layer == nullptr, "the sharded strategy's checkpoints hold Linear units only (",
                unit.name, " is not one)");
    const at::Tensor& w = entry(saved, weight_name(unit), {unit.out_features, unit.in_features});
    const at::Tensor& b = entry(saved, bias_name(unit), {unit.out_features});
    unit.shard.copy_(unit.shard_of(at::cat({w.reshape(-1), b}), rank));
    const auto ws = ckpt.optimizer.state.find(static_cast<int64_t>(2 * i));
    const auto bs = ckpt.optimizer.state.find(static_cast<int64_t>(2 * i + 1));
    if (ws == ckpt.optimizer.state.end() || bs == ckpt.optimizer.state.end()) continue;
    for (const auto& [key, value] : ws->second) {
      auto other = bs->second.find(key);
      if (other == bs->second.end() ||
          (value.dim() > 0 && value.numel() + other->second.numel() != unit.numel)) {
        throw InputError("checkpoint optimizer state '" + key + "' of parameters " +
                         std::to_string(2 * i) + " and " + std::to_string(2 * i + 1) +
                         " does not fit " + unit.name);
      }
      mine.state[static_cast<int64_t>(i)][key] =
          value.dim() == 0
              ? value
              : unit.shard_of(at::cat({value.reshape(-1), other->second.reshape(-1)}), rank);
    }
  }
  optimizer.load_state_dict(mine);
}

}  // namespace harness::runtime

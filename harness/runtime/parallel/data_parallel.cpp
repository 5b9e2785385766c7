#include "harness/runtime/parallel/data_parallel.h"

#include <ATen/ops/cat.h>
#include <c10/core/GradMode.h>

#include "harness/errors.h"

namespace harness::runtime {

DataParallelStrategy::DataParallelStrategy(Communicator& comm, c10::Device device,
                                           DataParallelOptions options)
    : comm_(comm),
      device_(device),
      options_(std::move(options)),
      local_(device, RestorePolicy::Rebuild) {
  TORCH_CHECK(options_.bucket_cap_bytes > 0, "bucket_cap_bytes must be positive");
}

void DataParallelStrategy::setup_module(TrainModule& module) {
  local_.setup_module(module);
  // DDP's _sync_module_states: every rank starts from rank 0's parameters and buffers.
  c10::AutoGradMode no_grad(false);
  std::vector<at::Tensor> state;
  for (const at::Tensor& p : module.module().parameters()) state.push_back(p.detach());
  for (const at::Tensor& b : module.module().buffers()) state.push_back(b.detach());
  for (at::Tensor& t : state) comm_.broadcast(t, 0);
}

std::unique_ptr<Optimizer> DataParallelStrategy::setup_optimizer(TrainModule& module) {
  if (!options_.zero_adam) return module.configure_optimizers();
  return std::make_unique<ZeroRedundancyOptimizer>(module.parameters(), comm_, *options_.zero_adam,
                                                   options_.zero_param_broadcast);
}

Batch rank_rows_on_device(const Batch& batch, const Communicator& comm, c10::Device device) {
  const int64_t rows = batch.input.size(0);
  const int64_t world = comm.world_size();
  if (rows % world != 0) {
    throw InputError("the global batch of " + std::to_string(rows) +
                     " rows does not divide over " + std::to_string(world) + " ranks");
  }
  const int64_t per_rank = rows / world;
  const int64_t first = per_rank * comm.rank();
  return SingleDeviceStrategy(device, RestorePolicy::Rebuild)
      .batch_to_device({batch.input.narrow(0, first, per_rank),
                        batch.target.narrow(0, first, per_rank)});
}

Batch DataParallelStrategy::batch_to_device(const Batch& batch) {
  return rank_rows_on_device(batch, comm_, device_);
}

void DataParallelStrategy::reduce_gradients(TrainModule& module) {
  if (comm_.world_size() == 1) return;
  c10::AutoGradMode no_grad(false);
  std::vector<at::Tensor> params = module.parameters();
  // Buckets in reverse parameter order (the order backward produces gradients).
  std::vector<std::vector<at::Tensor>> buckets(1);
  int64_t filled = 0;
  for (auto it = params.rbegin(); it != params.rend(); ++it) {
    const at::Tensor& grad = it->grad();
    if (!grad.defined()) continue;
    const int64_t bytes = static_cast<int64_t>(grad.nbytes());
    if (filled > 0 && filled + bytes > options_.bucket_cap_bytes) {
      buckets.emplace_back();
      filled = 0;
    }
    buckets.back().push_back(grad);
    filled += bytes;
  }
  const double scale = 1.0 / static_cast<double>(comm_.world_size());
  for (const auto& grads : buckets) {
    if (grads.empty()) continue;
    std::vector<at::Tensor> flat_parts;
    for (const at::Tensor& g : grads) flat_parts.push_back(g.reshape({-1}));
    at::Tensor flat = at::cat(flat_parts);
    std::vector<at::Tensor> one{flat};
    comm_.all_reduce_sum(one);
    flat.mul_(scale);
    int64_t offset = 0;
    for (const at::Tensor& g : grads) {
      at::Tensor dst = g;
      dst.copy_(flat.narrow(0, offset, g.numel()).view(g.sizes()));
      offset += g.numel();
    }
  }
}

Checkpoint DataParallelStrategy::make_checkpoint(TrainModule& module, Optimizer& optimizer,
                                                 int64_t step) {
  return local_.make_checkpoint(module, optimizer, step);
}

void DataParallelStrategy::save_checkpoint_to(const std::string& path, TrainModule& module,
                                              Optimizer& optimizer, int64_t step) {
  Checkpoint ckpt = make_checkpoint(module, optimizer, step);
  if (comm_.rank() == 0) save_checkpoint(ckpt, path);
}

void DataParallelStrategy::restore_checkpoint(const Checkpoint& checkpoint, TrainModule& module,
                                              Optimizer& optimizer) {
  local_.restore_checkpoint(checkpoint, module, optimizer);
}

}  // namespace harness::runtime

#pragma once
// Checkpoint: what a trainer saves and restores -- the global step, the model's state_dict and the
// optimizer's state_dict -- and its file format: a pickled dict (torch's own serialisation) with
// Lightning's key names, written atomically. Reading validates the structure; a corrupt or
// incompatible file is an InputError naming the file and the problem.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "harness/runtime/optimizer.h"

namespace harness::runtime {

inline constexpr const char* kCheckpointFormat = "harness-checkpoint/1";

struct Checkpoint {
  int64_t global_step = 0;
  std::vector<std::pair<std::string, at::Tensor>> model;  // parameters and buffers by name
  OptimizerStateDict optimizer;
};

// Writes `checkpoint` to `path` (tensors are copied to the host first, as torch.save does).
void save_checkpoint(const Checkpoint& checkpoint, const std::string& path);
// Reads a checkpoint; every tensor is on the CPU (map_location="cpu").
Checkpoint load_checkpoint(const std::string& path);

}  // namespace harness::runtime

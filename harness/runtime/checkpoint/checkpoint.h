#pragma once
// Checkpoint: what a trainer saves and restores -- the global step, the model's state_dict and the
// optimizer's state_dict -- and its file format: a pickled dict (torch's own serialisation) with
// Lightning's key names, written atomically. Reading validates the structure; a corrupt or
// incompatible file is an InputError naming the file and the problem.
#include <ATen/core/Tensor.h>

#include <c10/core/Device.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "harness/runtime/optim/optimizer.h"

namespace harness::runtime {

inline constexpr const char* kCheckpointFormat = "harness-checkpoint/1";

struct Checkpoint {
  int64_t global_step = 0;
  std::vector<std::pair<std::string, at::Tensor>> model;  // parameters and buffers by name
  OptimizerStateDict optimizer;
  // Persistent metric states by "<metric>.<state>" (key "metrics"; absent in older files).
  std::vector<std::pair<std::string, at::Tensor>> metrics;
};

// Writes `checkpoint` to `path` (tensors are copied to the host first, as torch.save does).
void save_checkpoint(const Checkpoint& checkpoint, const std::string& path);
// Creates the directory checkpoints go to (and its parents), or throws std::runtime_error naming it
// and the reason (the scratch directory removed mid-run, a file in the way).
void create_checkpoint_directory(const std::string& path);
// Reads a checkpoint; every tensor is on the CPU (map_location="cpu").
Checkpoint load_checkpoint(const std::string& path);
// The same on a checkpoint's bytes; `source` names them in messages. Every failure -- bytes that
// are not a pickle, a pickle of something else, a tensor whose view does not fit its storage -- is
// an InputError naming the source and what is wrong.
Checkpoint checkpoint_from_bytes(const std::vector<char>& bytes, const std::string& source);

// An optimizer state_dict as bytes, the way torch.save writes one: each tensor is copied to the
// host (a blocking copy for a device tensor) and its device is recorded beside it.
std::vector<char> pickle_optimizer_state(const OptimizerStateDict& state);
// The reverse, the way torch.load reads it: each tensor is restored onto its recorded device, or
// onto `map_location` when given. Throws InputError when the bytes are not such a state_dict.
OptimizerStateDict unpickle_optimizer_state(const std::vector<char>& bytes,
                                            const std::optional<c10::Device>& map_location);

}  // namespace harness::runtime

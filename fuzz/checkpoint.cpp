// Checkpoint files: bytes to Checkpoint (LibTorch's unpickler, then our checks of structure, types
// and every tensor's view); an accepted checkpoint's tensors are read in full.
#include <ATen/ops/sum.h>

#include "fuzz/fuzz_target.h"
#include "harness/errors.h"
#include "harness/runtime/checkpoint/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace harness;
  runtime::Checkpoint ckpt;
  try {
    ckpt = runtime::checkpoint_from_bytes(std::vector<char>(data, data + size), "fuzz.ckpt");
  } catch (const InputError&) {
    return 0;
  }
  // Reading every element is what a resume does; ASan sees any read outside a storage.
  for (const auto& [name, t] : ckpt.model) (void)at::sum(t.to(at::kDouble));
  for (const auto& [index, entries] : ckpt.optimizer.state) {
    for (const auto& [key, t] : entries) (void)at::sum(t.to(at::kDouble));
  }
  for (const auto& [name, t] : ckpt.metrics) (void)at::sum(t.to(at::kDouble));
  return 0;
}

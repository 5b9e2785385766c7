#pragma once
// Which device a run uses: `--device auto|sim|cuda|cpu`, resolved once in bench.
#include <c10/core/Device.h>

#include <string>

#include "harness/device_kind.h"

namespace harness::runtime {

using harness::DeviceKind;
using harness::to_string;

struct DeviceSelection {
  DeviceKind kind;
  std::string description;  // e.g. "sim (simulated accelerator, host memory)"
  // The device of rank `rank` (sim:rank, cuda:rank, or cpu).
  c10::Device device(int rank = 0) const;
};

// Resolves a `--device` value; initialises the sim backend when it is chosen.
// Throws InputError for an unknown name or a device this build or machine cannot use.
DeviceSelection select_device(const std::string& requested);

// How many ranks on this host can each own a device of `--device requested`: the sim's 8, the
// GPUs CUDA sees; 0 (no limit) for cpu. Throws InputError as select_device does for a device
// that cannot be used. Checked by the launcher before it starts ranks.
int rank_device_count(const std::string& requested);

// Whether LibTorch's CUDA support is loaded (the build links it), GPU or not.
bool cuda_built();
// Whether this build can drive CUDA and a GPU is usable.
bool cuda_usable();
// The CUDA runtime LibTorch was built with ("13.0"); empty without CUDA.
std::string cuda_runtime_version();

}  // namespace harness::runtime

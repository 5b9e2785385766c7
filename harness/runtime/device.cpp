#include "harness/runtime/device.h"

#include <ATen/Context.h>
#include <ATen/detail/CUDAHooksInterface.h>

#include "harness/errors.h"
#include "harness/instrument/sim/sim_device.h"

namespace harness::runtime {

const char* to_string(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::Sim: return "sim";
    case DeviceKind::Cuda: return "cuda";
    case DeviceKind::Cpu: return "cpu";
  }
  return "?";
}

c10::Device DeviceSelection::device(int rank) const {
  switch (kind) {
    case DeviceKind::Sim: return sim::device(rank);
    case DeviceKind::Cuda: return {c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(rank)};
    case DeviceKind::Cpu: break;
  }
  return c10::Device(c10::DeviceType::CPU);
}

bool cuda_usable() { return at::hasCUDA() && at::detail::getCUDAHooks().deviceCount() > 0; }

DeviceSelection select_device(const std::string& requested) {
  if (requested == "auto") return select_device(cuda_usable() ? "cuda" : "sim");
  if (requested == "sim") {
    sim::initialize();
    return {DeviceKind::Sim, "simulated accelerator in host memory, " +
                                 std::to_string(sim::device_count()) + " devices"};
  }
  if (requested == "cpu") return {DeviceKind::Cpu, "host CPU"};
  if (requested == "cuda") {
    if (!at::hasCUDA()) {
      throw InputError(
          "--device cuda: this build has no CUDA support (configure with "
          "-DHARNESS_WITH_CUDA=ON against a LibTorch with CUDA), or no GPU is usable");
    }
    return {DeviceKind::Cuda, "cuda"};
  }
  throw InputError("unknown device '" + requested + "' (known: auto, sim, cuda, cpu)");
}

}  // namespace harness::runtime

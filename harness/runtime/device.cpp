#include "harness/runtime/device.h"

#include "harness/build_config.h"  // before the #if below

#include <ATen/Context.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/core/AutogradState.h>

#include <cstdio>

#if HARNESS_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#include "harness/errors.h"
#include "harness/instrument/sim/sim_device.h"

namespace harness::runtime {
namespace {

// "NVIDIA H100 80GB HBM3 (sm_90, 79.1 GiB), 1 of 1 visible": the GPU named in every report.
std::string describe_gpu(int count) {
#if HARNESS_HAVE_CUDA
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess) {
    char memory[32];
    std::snprintf(memory, sizeof memory, "%.1f GiB",
                  static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0));
    return std::string(prop.name) + " (sm_" + std::to_string(prop.major) +
           std::to_string(prop.minor) + ", " + memory + "), " + std::to_string(count) +
           " visible";
  }
#endif
  return "CUDA GPU, " + std::to_string(count) + " visible";
}

}  // namespace

c10::Device DeviceSelection::device(int rank) const {
  switch (kind) {
    case DeviceKind::Sim: return sim::device(rank);
    case DeviceKind::Cuda: return {c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(rank)};
    case DeviceKind::Cpu: break;
  }
  return c10::Device(c10::DeviceType::CPU);
}

bool cuda_built() { return at::CUDAHooksRegistry()->Has("CUDAHooks"); }

bool cuda_usable() { return at::hasCUDA() && at::detail::getCUDAHooks().deviceCount() > 0; }

std::string cuda_runtime_version() {
  if (!cuda_built()) return "";
  const long v = at::detail::getCUDAHooks().versionCUDART();  // e.g. 13000
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

DeviceSelection select_device(const std::string& requested) {
  if (requested == "auto") return select_device(cuda_usable() ? "cuda" : "sim");
  if (requested == "sim") {
    sim::initialize();
    // Backward on this thread, as autograd runs it for CPU tensors: sim's kernels run on the
    // host, so a device thread (CUDA's) would only hand each backward over and back, and run its
    // own OpenMP team beside this thread's on the same cores (issue 26). What is counted is the
    // same on either thread.
    c10::AutogradState::get_tls_state().set_multithreading_enabled(false);
    return {DeviceKind::Sim, "simulated accelerator in host memory, " +
                                 std::to_string(sim::device_count()) + " devices"};
  }
  if (requested == "cpu") return {DeviceKind::Cpu, "host CPU"};
  if (requested == "cuda") {
    if (!cuda_built()) {
      throw InputError(
          "--device cuda: this build has no CUDA support (configure with "
          "-DHARNESS_WITH_CUDA=ON against a LibTorch with CUDA)");
    }
    const int count = at::hasCUDA() ? at::detail::getCUDAHooks().deviceCount() : 0;
    if (count == 0) {
      throw InputError("--device cuda: no GPU is usable (CUDA sees no device; check nvidia-smi "
                       "and CUDA_VISIBLE_DEVICES)");
    }
    return {DeviceKind::Cuda, describe_gpu(count)};
  }
  throw InputError("unknown device '" + requested + "' (known: auto, sim, cuda, cpu)");
}

int rank_device_count(const std::string& requested) {
  if (requested == "auto") return rank_device_count(cuda_usable() ? "cuda" : "sim");
  if (requested == "sim") return sim::kDefaultDeviceCount;  // what select_device initialises
  if (requested == "cpu") return 0;
  select_device(requested);  // throws for a device that cannot be used, or an unknown name
  return at::detail::getCUDAHooks().deviceCount();
}

}  // namespace harness::runtime

#pragma once
// DeviceKind: which kind of device a run counts on. The bottom layer, beside errors.h: the
// instrument chooses by it, the runtime (harness/runtime/device.h) selects one.
namespace harness {

enum class DeviceKind { Sim, Cuda, Cpu };

constexpr const char* to_string(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::Sim: return "sim";
    case DeviceKind::Cuda: return "cuda";
    case DeviceKind::Cpu: return "cpu";
  }
  return "?";
}

}  // namespace harness

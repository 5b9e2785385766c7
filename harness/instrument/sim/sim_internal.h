#pragma once
// Shared between the sim backend's runtime (sim_runtime.cpp), kernels (sim_kernels.cpp) and
// storages (sim_storage.cpp).
#include <c10/core/Allocator.h>
#include <c10/core/DispatchKey.h>
#include <c10/core/DispatchKeySet.h>
#include <c10/core/Storage.h>
#include <c10/core/StorageImpl.h>
#include <c10/core/TensorImpl.h>
#include <c10/macros/Macros.h>

#include <atomic>
#include <vector>

#include "harness/instrument/sim/sim_device.h"  // kSyncDebugOff

namespace at {
class Tensor;
}
namespace c10 {
class OperatorHandle;
struct IValue;
}  // namespace c10
namespace torch {
class Library;
}

namespace harness::sim {

inline constexpr c10::DispatchKeySet kSimKeys{c10::DispatchKey::PrivateUse1};
inline constexpr c10::DispatchKeySet kCudaKeys{c10::DispatchKey::CUDA};
inline constexpr c10::DispatchKeySet kCpuKeys{c10::DispatchKey::CPU};
inline constexpr c10::DispatchKeySet kMetaKeys{c10::DispatchKey::Meta};

// The backend keys of a tensor on a device type sim serves (PrivateUse1, or CUDA: serve_cuda()).
inline c10::DispatchKeySet keys_of(c10::DeviceType type) {
  return type == c10::DeviceType::CUDA ? kCudaKeys : kSimKeys;
}

// The allocator of sim's memory, its DataPtrs naming `type` (PrivateUse1 or CUDA).
c10::Allocator* device_allocator(c10::DeviceType type = c10::DeviceType::PrivateUse1);
// Sim's page-locked host memory (Tensor::pin_memory()).
c10::Allocator* pinned_allocator();
// This thread's current sim device (what the device guard sets).
c10::DeviceIndex current_device() noexcept;
// Keeps `library` (and the registrations made with it) for the rest of the process, reachable
// from a static, so that LeakSanitizer does not count it; returns it.
torch::Library* keep(torch::Library* library);

// Registers the sim kernels and the boxed fallback with the dispatcher at `backend`, PrivateUse1
// (called by initialize()) or CUDA (by serve_cuda(): over libtorch_cuda's kernels).
void register_kernels(c10::DispatchKey backend);
// Registers mixed precision for sim as CUDA has it (sim_autocast.cpp; called by initialize()).
void register_autocast();

// A TensorImpl over `storage` (its whole extent) with the view geometry of `like`.
at::Tensor make_tensor_on(c10::Storage storage, c10::DispatchKeySet keys, const at::Tensor& like);
// A CPU storage over the same bytes as `storage` (which it keeps alive). Resizable with the CPU
// allocator, so a CPU kernel may grow an out= argument; the sim tensor then adopts the new bytes.
c10::Storage cpu_view_of_storage(const c10::Storage& storage);
// A sim DataPtr over the bytes of CPU storage `storage` (which it keeps alive): device memory of
// `device` (sim:i, or cuda:i under serve_cuda()) from now on, counted once.
c10::DataPtr adopt_bytes(const c10::Storage& storage, c10::Device device);
// The reverse of cpu_view_of_storage: a sim storage over bytes a CPU kernel allocated.
c10::Storage sim_view_of_storage(const c10::Storage& storage, c10::Device device);
// Turns `output`, a fresh CPU tensor a sim op's CPU kernel returned, into a sim tensor of
// `device` in place, without a new TensorImpl or storage: only when nothing else holds it or
// its storage and the counting CPU allocator made its bytes (they move to the device's account).
// Returns false, changing nothing, otherwise.
bool adopt_in_place(const at::Tensor& output, c10::Device device);
// A CPU tensor a CPU kernel or a host computation returned, as a tensor of sim device `device`
// (in place where adopt_in_place can, else a sim view of its bytes; undefined or non-CPU stays).
at::Tensor to_device(const at::Tensor& host_result, c10::Device device);
// A CPU tensor over the same memory as sim tensor `sim_tensor` (same geometry).
at::Tensor cpu_alias(const at::Tensor& sim_tensor);
// Whether two tensors have the same sizes and strides: an inline loop over the few dims (on every
// op, for every sim argument; a memcmp call costs more than the dims it compares).
C10_ALWAYS_INLINE bool same_geometry(const c10::TensorImpl& a, const c10::TensorImpl& b) {
  const c10::IntArrayRef a_sizes = a.sizes(), b_sizes = b.sizes();
  if (a_sizes.size() != b_sizes.size()) return false;
  const c10::IntArrayRef a_strides = a.strides(), b_strides = b.strides();
  for (size_t i = 0; i < a_sizes.size(); ++i) {
    if (a_sizes[i] != b_sizes[i] || a_strides[i] != b_strides[i]) return false;
  }
  return true;
}

// The CPU alias the boxed fallback hands a CPU kernel for `sim_tensor`: cpu_alias's, but kept in
// this thread's cache for the next op on the same tensor (a parameter, an optimizer state, an
// activation read twice), and over bytes it does not own (the op's arguments keep them alive).
// A kernel that replaces the alias's storage (grows an out= argument): forget_cpu_alias after.
// `inference`: whether InferenceMode is on (c10::InferenceMode::is_enabled(), read once per op).
at::Tensor cached_cpu_alias(const at::Tensor& sim_tensor, bool inference);
void forget_cpu_alias(const at::Tensor& sim_tensor);
// After a CPU kernel ran on `alias` (sim_tensor's CPU alias, or its meta alias under kShapes) and
// may have written it: the sim tensor takes over a storage the kernel grew or replaced, and the
// geometry it set (an out= argument resized, a resize_).
void adopt_kernel_changes(const at::Tensor& sim_tensor, const at::Tensor& alias);
// The boxed fallback every sim op without a kernel of its own runs (sim_kernels.cpp): the op's
// CPU kernel on aliases of its sim arguments, one launch, the host waits its rule makes.
void run_boxed_fallback(const c10::OperatorHandle& op, std::vector<c10::IValue>* stack);
// Registers sim's unboxed kernels for the hottest ops at `backend` (sim_unboxed.cpp): each one
// launch as the fallback counts it, without boxing its arguments. `over_fallback`: the backend's
// kernels for them are take_over()'s fallback (CUDA under libtorch_cuda), to be replaced.
void register_unboxed_kernels(torch::Library& impls, c10::DispatchKey backend, bool over_fallback);
// What sim's kernels compute on in place of a sim tensor (sim_device.h, Compute): its CPU alias,
// or under Compute::kShapes a meta tensor of its geometry (no bytes; nothing the op computes).
at::Tensor compute_alias(const at::Tensor& sim_tensor);
// The dispatch keys of the kernels that compute sim's ops: CPU's, or Meta's under kShapes.
c10::DispatchKeySet compute_keys() noexcept;

// Compute::kShapes: what the elements of a sim tensor read as on the host (`.item()`, bool()): 0,
// or what set_placeholder() gave its memory -- 1 (true) for the result of `all`, so that a check
// such as `if not valid.all(): raise` passes as it does on valid data. 0 for any other tensor.
double placeholder_of(const at::Tensor& t);
void set_placeholder(const at::Tensor& t, double value);

// Compute::kShapes, for an op the dispatcher has no meta function for (shape_functions.cpp): runs
// sim's own shape function on the meta arguments on the stack, leaving the op's results; false,
// changing nothing, where sim has none.
bool run_shape_function(const c10::OperatorHandle& op, std::vector<c10::IValue>* stack);

// Called where an op is about to make the host wait (sync_debug_mode(), sim_device.h): warns,
// or throws CUDA's error, as the mode says. Inline: one load when the mode is off (every .item()).
extern std::atomic<int> g_sync_debug_mode;
void report_sync_in_debug_mode(int mode);
inline void check_sync_debug_mode() {
  const int mode = g_sync_debug_mode.load(std::memory_order_relaxed);
  if (C10_UNLIKELY(mode != kSyncDebugOff)) report_sync_in_debug_mode(mode);
}

}  // namespace harness::sim

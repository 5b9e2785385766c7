#pragma once
// The simulated accelerator `sim`: a PrivateUse1 backend whose memory is host RAM.
//
// It follows CUDA's rules for what crosses the host-device boundary, so that counts of copies,
// synchronizations and launches taken on a CPU-only machine mean what they would on a GPU:
//   - every ATen op executed on sim tensors is one launch (views, metadata, allocation are not);
//     it runs the CPU kernel on aliases of the sim memory (no staging copies, nothing counted);
//   - `_copy_from` between CPU and sim is an H2D or D2H copy, and a sync when blocking;
//     sim:i -> sim:j is a D2D copy; a same-device copy that needs a kernel is a launch;
//   - `.item()` (`_local_scalar_dense`) is one D2H copy (into pinned memory) and one sync; a
//     non-blocking D2H into pageable memory is a sync too;
//   - an op whose CUDA kernel reads device data back to the host (nonzero and all built on it,
//     unique, repeat_interleave without output_size, bincount, ...) counts those reads and syncs
//     (sync_rules.h); an op returning a number or flag is not a sync by itself (is_set_to);
//   - explicit device / stream / event synchronizes are syncs;
//   - mixing sim tensors of two devices, or a sim tensor with a CPU tensor that is not a 0-dim
//     scalar, is an error, as on CUDA.
// See DESIGN.md, "The counting contract", and docs/how-it-works.md.
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>
#include <c10/util/ArrayRef.h>

#include <string>
#include <vector>

#include "harness/instrument/memory_ledger.h"

namespace at {
class Tensor;
}
namespace c10 {
struct StorageImpl;
}

namespace harness::sim {

inline constexpr const char* kBackendName = "sim";
inline constexpr int kDefaultDeviceCount = 8;

// Registers the backend (name, allocator, device guard, hooks, kernels). Idempotent and
// thread-safe; call it before the first sim tensor is made. Never runs during static
// initialisation. `device_count` and `name_backend` apply to the first call only.
// `name_backend` false leaves PrivateUse1 unnamed: for a process where sim serves CUDA alone
// (serve_cuda()), since a named PrivateUse1 is torch's accelerator (at::getAccelerator()), and
// autograd then finds no stream for a CUDA tensor's backward (pytorch/pytorch#161129).
void initialize(int device_count = kDefaultDeviceCount, bool name_backend = true);
bool is_initialized() noexcept;

// Makes sim serve the CUDA device type as well (`python -m harness_sim run --as-cuda`): CUDA
// tensors are sim's (its allocator, device guard and kernels at the CUDA dispatch key, over
// libtorch_cuda's own), so that a program and its libraries see `cuda` everywhere while every op
// is counted as on sim. Torch's CUDA-side code (AutogradCUDA, AutocastCUDA, composite branches on
// is_cuda()) stays torch's. Idempotent; after initialize(). For a process with no GPU: a real
// CUDA tensor cannot coexist with it.
void serve_cuda();
bool serves_cuda() noexcept;
// The ops with a kernel at the CUDA dispatch key ("ns::name.overload"), and, under serve_cuda(),
// the CUDA kernels of `ops` (those a library loaded since registered: a custom op library's, such
// as torchvision's nms) taken over as libtorch_cuda's were: each runs sim's fallback (its CPU
// kernel on the host, one launch) or is refused by name. Returns how many it took over.
std::vector<std::string> cuda_kernel_ops();
int take_over_cuda_kernels(const std::vector<std::string>& ops);

int device_count() noexcept;

// What sim's kernels compute (`bench --compute`, `python -m harness_sim run --compute`).
//   kValues (the default): each op runs its CPU kernel on the host; tensors hold their values.
//   kShapes: each op runs its meta function only (torch's Meta kernels and decompositions).
//     Tensors have sizes, dtypes, strides and device memory (charged to the device's account as
//     in kValues) but no bytes: their addresses are reserved, never backed, so a model that does
//     not fit in host memory is counted at its full size. Launches, copies with their bytes,
//     syncs, collectives with the bytes they would move and sites are counted as in kValues;
//     copies and collectives move nothing. A value the host reads (`.item()`, a D2H copy) is a
//     placeholder: zeros (false, 0, 0.0), but true for the result of `all` (the data taken to be
//     valid: a check `if not x.all(): raise` passes), and each such read is recorded as an event
//     "value_not_computed" at its site. An op whose output size depends on values (nonzero,
//     masked_select, unique, ...) fails, naming the op.
// Chosen before the first sim tensor is made: set_compute() refuses a change after that.
enum class Compute { kValues, kShapes };
void set_compute(Compute compute);
Compute compute() noexcept;
inline bool computes_shapes_only() noexcept { return compute() == Compute::kShapes; }
// A CPU tensor of `sizes` and `dtype` without bytes behind it: its host memory is counted (the
// ledger's host account) while it lives, its addresses reserved and never backed, as kShapes
// gives device memory. For what a model built whole on the host would cost under kShapes,
// where the host could not hold it: nothing may read or write its elements (a read faults).
// A copy from the device into one moves nothing (and writes no placeholder).
at::Tensor host_tensor_without_bytes(c10::IntArrayRef sizes, c10::ScalarType dtype);
// Whether `t` has no bytes behind it: a device tensor under kShapes, or host_tensor_without_bytes.
bool has_no_bytes(const at::Tensor& t);
// "values" or "shapes"; and the reverse (nullopt for any other word).
const char* compute_name(Compute compute) noexcept;

c10::Device device(int index = 0);
// Whether sim serves this device type (PrivateUse1; CUDA after serve_cuda()) / this tensor's.
bool is_sim_type(c10::DeviceType type) noexcept;
bool is_sim(const at::Tensor& tensor);
// Grows or shrinks a storage of sim's device in place: new device memory, its contents kept up
// to the new size (what `UntypedStorage.resize_` does, and FSDP2's parameters are made of).
void resize_storage_bytes(c10::StorageImpl* storage, size_t nbytes);

// The device this process (rank) owns, as `torch.cuda.set_device(local_rank)` names it: a copy
// to or from any other sim device is counted as cross-device. -1 (the default): none, and only
// sim:i -> sim:j copies with i != j are cross-device.
void set_home_device(int index) noexcept;
int home_device() noexcept;
// The device the instrument measures memory on: home_device() when set, else this thread's
// current sim device.
int own_device() noexcept;

// Device memory of sim:index, in bytes: what its tensors hold now (bytes they adopted from CPU
// kernels included; see sim_kernels.cpp) and the peak since the last reset_peak(index), as the
// program sees them (torch.cuda.max_memory_allocated / reset_peak_memory_stats). The instrument
// reads its per-phase peaks from the memory ledger's own peak, which these leave alone.
// Its reserved bytes are what CUDA's caching allocator would hold for the same requests
// (memory_ledger.h; torch.cuda.memory_reserved); empty_cache releases the modelled segments with
// nothing allocated (torch.cuda.empty_cache).
memory::Stats memory_stats(int index);
void reset_peak(int index);
void empty_cache(int index);

// Explicit synchronisation of a sim device: counted as a sync ("device synchronize").
void synchronize(int index = 0);

// CUDA's sync debug mode (`torch.cuda.set_sync_debug_mode`), kept by sim: kSyncDebugOff,
// kSyncDebugWarn (a warning at each host wait) or kSyncDebugError (the op fails before it runs).
// As CUDA's (c10/cuda/CUDAFunctions.h, warn_or_error_on_sync in memcpy_and_sync and
// stream_synchronize), it checks the waits an op makes of itself: an `.item()`, a blocking copy, a
// host read of device data. Explicit device, stream and event synchronizes are not checked. Host
// reads of device data (sync_rules.h) are known while the instrument collects.
inline constexpr int kSyncDebugOff = 0;
inline constexpr int kSyncDebugWarn = 1;
inline constexpr int kSyncDebugError = 2;
void set_sync_debug_mode(int mode);
int sync_debug_mode() noexcept;

// A CPU tensor over the same memory as sim tensor `t` (same sizes, strides and offset; nothing
// copied or counted): for libraries that read host memory, such as Gloo.
at::Tensor host_alias(const at::Tensor& t);

// Whether `data` is the base of a page-locked host allocation made through the sim backend's
// pinned-memory allocator (Tensor::pin_memory()).
bool is_pinned_host_pointer(const void* data) noexcept;

}  // namespace harness::sim

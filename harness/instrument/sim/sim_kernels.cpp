// The sim backend's kernels: allocation, views and metadata (never counted), copies and `.item()`
// (counted by the copy and sync rules), and one boxed fallback that runs every other op with its
// CPU kernel on zero-copy CPU aliases of the sim memory (one launch each) -- under
// Compute::kShapes with its meta function on meta aliases instead (sim_device.h) -- plus the host
// waits its CUDA kernel makes where it has a sync rule (sync_rules.h: nonzero, unique, ...).
//
// Device memory (the memory ledger's device accounts) comes into existence in three ways, each
// counted once:
//   1. the sim allocator (empty, empty_strided, resize_ and storage resizes): charged to the
//      device when allocated;
//   2. CPU allocations a sim op's CPU kernel makes (outputs, grown out= arguments, temporaries):
//      the fallback runs the kernel under memory::ChargeTo(device), so the counting CPU allocator
//      charges them to the device, never to the host;
//   3. a sim storage adopting such bytes (adopt_bytes, sim_storage.cpp) moves them to the device
//      if they were still the host's (allocated on another thread), or charges them itself if no
//      counted allocator made them. They are discharged when the last storage holding them dies.
// Zero-copy CPU aliases (cpu_view_of_storage) allocate nothing and are not counted.
#include <ATen/EmptyTensor.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <ATen/ops/_local_scalar_dense_native.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/copy.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/resize_native.h>
#include <ATen/ops/set.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/view_native.h>
#include <ATen/native/TensorAdvancedIndexingUtils.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/InferenceMode.h>
#include <c10/util/Exception.h>
#include <c10/util/SmallVector.h>
#include <torch/library.h>

#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "harness/instrument/collector.h"
#include "harness/instrument/memory_ledger.h"
#include "harness/instrument/sim/cuda_generator.h"
#include "harness/instrument/sim/sim_device.h"
#include "harness/instrument/sim/host_compute.h"
#include "harness/instrument/sim/sim_internal.h"
#include "harness/instrument/sim/sync_rules.h"

namespace harness::sim {
namespace {

// Swallows the dispatcher's one warning that kernels are overridden (serve_cuda() does so on
// purpose, over libtorch_cuda's).
class IgnoreWarnings final : public c10::WarningHandler {
 public:
  void process(const c10::Warning&) override {}
};
IgnoreWarnings g_ignore_warnings;

bool host_pinned(const at::Tensor& t) {
  return t.has_storage() && is_pinned_host_pointer(t.storage().data());
}

// ----- allocation, views, metadata: never counted ------------------------------------------

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> layout,
                               std::optional<c10::Device> device, std::optional<bool> pin_memory,
                               std::optional<c10::MemoryFormat> memory_format) {
  TORCH_CHECK(c10::layout_or_default(layout) == c10::Layout::Strided,
              "sim supports strided tensors only");
  TORCH_CHECK(!c10::pinned_memory_or_default(pin_memory), "pinned memory is host memory, not sim");
  const c10::Device target = c10::device_or_default(device);
  const c10::DeviceGuard guard(target);
  return at::detail::empty_generic(size, device_allocator(target.type()), keys_of(target.type()),
                                   c10::dtype_or_default(dtype), memory_format);
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride,
                         std::optional<c10::ScalarType> dtype, std::optional<c10::Layout> layout,
                         std::optional<c10::Device> device, std::optional<bool> pin_memory) {
  TORCH_CHECK(c10::layout_or_default(layout) == c10::Layout::Strided,
              "sim supports strided tensors only");
  TORCH_CHECK(!c10::pinned_memory_or_default(pin_memory), "pinned memory is host memory, not sim");
  const c10::Device target = c10::device_or_default(device);
  const c10::DeviceGuard guard(target);
  return at::detail::empty_strided_generic(size, stride, device_allocator(target.type()),
                                           keys_of(target.type()), c10::dtype_or_default(dtype));
}

at::Tensor as_strided(const at::Tensor& self, c10::SymIntArrayRef size,
                      c10::SymIntArrayRef stride, std::optional<c10::SymInt> offset) {
  std::optional<int64_t> off;
  if (offset) off = offset->expect_int();
  return at::native::as_strided_tensorimpl(self, C10_AS_INTARRAYREF_SLOW(size),
                                           C10_AS_INTARRAYREF_SLOW(stride), off);
}

at::Tensor view(const at::Tensor& self, c10::SymIntArrayRef size) {
  return at::native::view(self, C10_AS_INTARRAYREF_SLOW(size));
}

at::Tensor reshape_alias(const at::Tensor& self, c10::SymIntArrayRef size,
                         c10::SymIntArrayRef stride) {
  return at::native::_reshape_alias(self, C10_AS_INTARRAYREF_SLOW(size),
                                    C10_AS_INTARRAYREF_SLOW(stride));
}

const at::Tensor& resize(const at::Tensor& self, c10::SymIntArrayRef size,
                         std::optional<c10::MemoryFormat> memory_format) {
  const c10::DeviceGuard guard(self.device());  // new bytes belong to self's device
  return at::native::resize_(self, C10_AS_INTARRAYREF_SLOW(size), memory_format);
}

at::Tensor& set_source_tensor(at::Tensor& self, const at::Tensor& source) {
  return at::native::set_tensor_(self, source);
}

at::Tensor& set_source_storage(at::Tensor& self, c10::Storage source) {
  return at::native::set_(self, std::move(source));
}

at::Tensor& set_source_storage_offset(at::Tensor& self, c10::Storage source, c10::SymInt offset,
                                      c10::SymIntArrayRef size, c10::SymIntArrayRef stride) {
  return at::native::set_storage_cpu_(self, std::move(source), offset.expect_int(),
                                      C10_AS_INTARRAYREF_SLOW(size),
                                      C10_AS_INTARRAYREF_SLOW(stride));
}

// ----- copies and item(): the copy and sync rules -----------------------------------------

bool memcpy_eligible(const at::Tensor& dst, const at::Tensor& src) {
  return dst.dtype() == src.dtype() && dst.sizes() == src.sizes() && dst.is_contiguous() &&
         src.is_contiguous();
}

// Whether a copy is its bytes as they are (a batch's H2D copy, a D2H copy of a result): one
// dtype, one shape, both contiguous, no conjugate or negative bit to resolve, and the two byte
// ranges apart. Then it is a memcpy, as cudaMemcpyAsync does it -- not a CPU copy kernel on
// aliases. (A partial overlap is left to copy_, which refuses it.)
bool copies_bytes_as_they_are(const at::Tensor& dst, const at::Tensor& src) {
  if (!memcpy_eligible(dst, src) || dst.is_conj() || src.is_conj() || dst.is_neg() ||
      src.is_neg() || dst.numel() == 0) {
    return false;
  }
  const auto* d = static_cast<const char*>(dst.const_data_ptr());
  const auto* s = static_cast<const char*>(src.const_data_ptr());
  const auto bytes = static_cast<size_t>(dst.numel()) * dst.element_size();
  return d + bytes <= s || s + bytes <= d;
}

at::Tensor copy_from(const at::Tensor& src, const at::Tensor& dst, bool non_blocking) {
  // What copy_'s TensorIterator refuses on the CPU and on CUDA, before anything moves: torch
  // hands a PrivateUse1 copy to _copy_from before it builds one (Copy.cpp, copy_impl), and the
  // CPU aliases below would not show the overlap (each has a storage of its own).
  at::assert_no_internal_overlap(dst);
  at::assert_no_partial_overlap(dst, src);
  const bool src_sim = is_sim(src);
  const bool dst_sim = is_sim(dst);
  const int64_t bytes = dst.numel() * static_cast<int64_t>(dst.element_size());
  // A blocking copy's sync: the host waits for the copy itself (sim runs it right here). A
  // non-blocking copy into pageable host memory waits as well: cudaMemcpyAsync to pageable memory
  // returns only once the copy is done (CUDA's API synchronization behavior; cuda/Copy.cu
  // calls it without a sync of its own).
  const bool pageable_d2h = src_sim && !dst_sim && !host_pinned(dst);
  const bool syncs = src_sim != dst_sim && (!non_blocking || pageable_d2h);
  if (syncs) check_sync_debug_mode();
  const int64_t begin = events::begin_time();
  if (computes_shapes_only()) {
    // Nothing moves; what the host receives is the placeholder, zeros (sim_device.h, Compute).
    if (!dst_sim && !has_no_bytes(dst)) {
      dst.zero_();
      if (events::collecting()) events::record_event(kValueNotComputed, "copy D2H");
    }
  } else if (copies_bytes_as_they_are(dst, src)) {
    std::memcpy(dst.mutable_data_ptr(), src.const_data_ptr(), static_cast<size_t>(bytes));
  } else {
    at::Tensor cpu_dst = dst_sim ? cpu_alias(dst) : dst;
    const at::Tensor cpu_src = src_sim ? cpu_alias(src) : src;
    // A CPU-to-CPU copy: the backend's own work, not counted; what it may allocate is the
    // device's (as a CUDA copy's staging would be).
    const memory::ChargeTo charge_to(dst_sim ? dst.device().index() : src.device().index());
    cpu_dst.copy_(cpu_src);
  }
  const int64_t waited = syncs ? events::elapsed_since(begin) : kNotTimed;
  const int home = home_device();
  const auto foreign = [home](const at::Tensor& t) {
    return is_sim(t) && home >= 0 && t.device().index() != home;
  };
  const bool cross_device =
      (src_sim && dst_sim && src.device() != dst.device()) || foreign(src) || foreign(dst);
  if (src_sim && dst_sim) {
    if (src.device() != dst.device() || memcpy_eligible(dst, src)) {
      events::record_copy(CopyKind::DeviceToDevice, bytes, false, begin, cross_device);
    } else {
      events::record_launch("aten::copy_", begin);  // a strided or casting copy is a kernel
    }
  } else if (dst_sim) {
    if (syncs) {
      events::record_copy_and_sync(CopyKind::HostToDevice, bytes, host_pinned(src), begin,
                                   cross_device, "aten::copy_", "blocking copy H2D", waited,
                                   /*tensor_copy=*/true);
    } else {
      events::record_copy(CopyKind::HostToDevice, bytes, host_pinned(src), begin, cross_device,
                          /*tensor_copy=*/true);
    }
  } else if (syncs) {
    events::record_copy_and_sync(CopyKind::DeviceToHost, bytes, host_pinned(dst), begin,
                                 cross_device, "aten::copy_",
                                 non_blocking ? "non-blocking copy D2H into pageable memory"
                                              : "blocking copy D2H",
                                 waited, /*tensor_copy=*/true);
  } else {
    events::record_copy(CopyKind::DeviceToHost, bytes, host_pinned(dst), begin, cross_device,
                        /*tensor_copy=*/true);
  }
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& src, const at::Tensor& dst) {
  dst.resize_(src.sizes());
  return copy_from(src, dst, /*non_blocking=*/false);
}

// `copy_` of a CUDA tensor under serve_cuda(). Torch's composite copy_ re-dispatches to
// `_copy_from` only for devices it does not know (PrivateUse1); for CUDA it would run CUDA's copy
// kernel. This is its early returns (copy_impl in Copy.cpp: the same tensor, or a view of the same
// data as it is), then sim's copy.
at::Tensor& cuda_copy(at::Tensor& self, const at::Tensor& src, bool non_blocking) {
  if (self.is_same(src)) return self;
  const bool same_data = self.is_alias_of(src) && self.storage_offset() == src.storage_offset() &&
                         self.strides().equals(src.strides()) &&
                         self.sizes().equals(src.sizes()) &&
                         self.scalar_type() == src.scalar_type() &&
                         self.is_conj() == src.is_conj() && self.is_neg() == src.is_neg();
  if (same_data) return self;
  copy_from(src, self, non_blocking);
  return self;
}

// Pinned host memory for a CUDA tensor's copies under serve_cuda() (torch's `_pin_memory` asks
// the CUDA hooks for CUDA's pinned allocator, which needs a GPU): sim's pinned allocator, as
// Memory.cpp's _pin_memory does with the one it gets.
bool cuda_is_pinned(const at::Tensor& self, std::optional<c10::Device>) {
  return self.has_storage() && is_pinned_host_pointer(self.storage().data());
}

at::Tensor cuda_pin_memory(const at::Tensor& self, std::optional<c10::Device>) {
  const size_t nbytes = at::detail::computeStorageNbytes(self.sizes(), self.strides(),
                                                         self.dtype().itemsize());
  c10::Storage storage(c10::Storage::use_byte_size_t(), nbytes, pinned_allocator(),
                       /*resizable=*/false);
  at::Tensor pinned = at::empty({0}, self.options()).set_(storage, 0, self.sizes(), self.strides());
  pinned.copy_(self);
  return pinned;
}

// A stream's use of a tensor: sim has one in-order stream per device, nothing to record.
void cuda_record_stream(at::Tensor&, c10::Stream) {}

// An op of libtorch_cuda's that CPU PyTorch has no kernel for (no composite either), and sim none
// of its own.
void refuse_cuda_only_op(const c10::OperatorHandle& op, torch::jit::Stack*) {
  TORCH_CHECK(false, op.schema().name(), " has a CUDA kernel only, which sim cannot run (it has no "
              "CPU kernel to run on the host); run the program without it, or on a GPU");
}

// What `.item()` gives under Compute::kShapes: the placeholder of the tensor's memory (0, or 1
// for the result of `all`; sim_internal.h) in the tensor's type.
at::Scalar placeholder_scalar(const at::Tensor& self) {
  const double value = placeholder_of(self);
  const c10::ScalarType type = self.scalar_type();
  if (type == c10::ScalarType::Bool) return at::Scalar(value != 0.0);
  if (c10::isComplexType(type)) return at::Scalar(c10::complex<double>(value, 0));
  if (c10::isFloatingType(type)) return at::Scalar(value);
  return at::Scalar(static_cast<int64_t>(value));
}

// CUDA copies the value into a page-locked buffer (CUDAScalar.cu, _local_scalar_dense_cuda) and
// waits for it: for the work queued before it, then the copy. The sim runs every op as it is
// launched, so nothing is ever queued, and one element moves in a few nanoseconds: the wait is 0,
// not timed (two clock reads would cost ten times what they measured).
void count_scalar_read(const at::Tensor& self) {
  events::record_value_read(CopyKind::DeviceToHost, static_cast<int64_t>(self.element_size()),
                            /*host_pinned=*/true, "aten::_local_scalar_dense", "item",
                            /*wait_ns=*/0);
}

at::Scalar local_scalar_dense(const at::Tensor& self) {
  check_sync_debug_mode();
  // The CPU kernel reads the element in place (it needs host memory, not a CPU tensor); under
  // Compute::kShapes there is none: the placeholder (placeholder_scalar).
  if (computes_shapes_only()) {
    at::Scalar value = placeholder_scalar(self);
    if (events::collecting()) events::record_event(kValueNotComputed, "item");
    count_scalar_read(self);
    return value;
  }
  at::Scalar value = at::native::_local_scalar_dense_cpu(self);
  count_scalar_read(self);
  return value;
}

bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  // Module::to(device) swaps parameter data through set_data(); a sim tensor and a dense CPU
  // tensor are as interchangeable as a CUDA and a CPU tensor are.
  auto dense_sim_or_cpu = [](const at::Tensor& t) {
    return t.layout() == c10::Layout::Strided &&
           (t.device().is_cpu() || t.device().type() == c10::DeviceType::PrivateUse1);
  };
  return self.key_set() == from.key_set() || (dense_sim_or_cpu(self) && dense_sim_or_cpu(from));
}

// ----- every other op: one launch, CPU kernel on aliases ---------------------------------

// A sim tensor argument and its CPU alias, for write-back after the CPU kernel ran.
struct AliasedArg {
  at::Tensor sim;
  at::Tensor cpu;
  bool written;  // the schema lets the op write it (`Tensor(a!)`): only then can it change
};

// Whether the schema lets the op write `argument` (`Tensor(a!)`), or lets `result` share an
// argument's memory (`Tensor(a)`, a view; a result without an annotation is new memory).
bool is_written(const c10::Argument& argument) {
  return argument.alias_info() != nullptr && argument.alias_info()->isWrite();
}
bool may_alias_an_argument(const c10::Argument& result) { return result.alias_info() != nullptr; }

// Applies `f` to every tensor `v` holds (a tensor, a tensor list or an optional-tensor list),
// replacing it by the result. Returns whether `v` held tensors at all.
template <class F>
bool map_tensors(c10::IValue& v, F&& f) {
  if (v.isTensor()) {
    v = f(v.toTensor());
  } else if (v.isTensorList()) {
    c10::List<at::Tensor> in = v.toTensorList();
    if (in.use_count() == 2) {  // held by `v` and `in` only: changed in place, no new list
      for (size_t i = 0; i < in.size(); ++i) {
        const at::Tensor& t = in[i];  // the list's element itself, no copy (f keeps what it needs)
        in[i] = f(t);
      }
      return true;
    }
    c10::List<at::Tensor> out;
    out.reserve(in.size());
    for (const at::Tensor& t : in) out.push_back(f(t));
    v = std::move(out);
  } else if (v.isOptionalTensorList()) {
    const c10::List<std::optional<at::Tensor>> in = v.toOptionalTensorList();
    c10::List<std::optional<at::Tensor>> out;
    out.reserve(in.size());
    for (std::optional<at::Tensor> t : in) {
      out.push_back(t.has_value() ? std::optional<at::Tensor>(f(*t)) : std::nullopt);
    }
    v = std::move(out);
  } else {
    return false;
  }
  return true;
}

}  // namespace

void adopt_kernel_changes(const at::Tensor& sim_tensor, const at::Tensor& alias) {
  c10::TensorImpl* sim = sim_tensor.unsafeGetTensorImpl();
  const c10::TensorImpl* cpu = alias.unsafeGetTensorImpl();
  if (alias.is_meta()) {
    // Compute::kShapes: the meta kernel resized an out= argument's storage: the sim storage
    // grows as it would (new device memory, nothing to keep).
    if (cpu->storage().nbytes() > sim->storage().nbytes()) {
      resize_storage_bytes(sim->storage().unsafeGetStorageImpl(), cpu->storage().nbytes());
    }
  } else if (cpu->unsafe_storage().data() != sim->unsafe_storage().data()) {
    // The CPU kernel grew the storage of an out= argument: the sim storage (shared by all of
    // its views) takes over the new bytes.
    const c10::Storage& grown = cpu->storage();
    c10::StorageImpl* storage = sim->storage().unsafeGetStorageImpl();
    storage->set_data_ptr_noswap(adopt_bytes(grown, sim_tensor.device()));
    storage->set_nbytes(grown.nbytes());
    forget_cpu_alias(sim_tensor);  // its alias owns the new bytes now: not kept past the op
  }
  if (!same_geometry(*sim, *cpu) || sim->storage_offset() != cpu->storage_offset()) {
    sim->set_sizes_and_strides(cpu->sizes(), cpu->strides(), cpu->storage_offset());
  }
}

namespace {

class FallbackCall {
 public:
  // `allow_host_tensors`: CPU tensors with dims may be arguments (index tensors, which CUDA
  // copies to the device itself).
  FallbackCall(const c10::FunctionSchema& schema, bool allow_host_tensors)
      : schema_(schema),
        allow_host_tensors_(allow_host_tensors),
        inference_(c10::InferenceMode::is_enabled()) {}

  // Replaces sim tensors among the arguments on the stack by CPU aliases.
  void alias_arguments(torch::jit::Stack* stack) {
    const size_t n = schema_.arguments().size();
    size_t tensors = 0;  // one allocation for the aliases, however many (foreach: 4 lists)
    for (size_t i = 0; i < n; ++i) {
      const c10::IValue& v = (*stack)[stack->size() - n + i];
      tensors += v.isTensor() ? 1 : v.isTensorList() ? v.toTensorList().size() : 0;
    }
    aliased_.reserve(tensors);
    for (size_t i = 0; i < n; ++i) {
      c10::IValue& v = (*stack)[stack->size() - n + i];
      const bool written = is_written(schema_.arguments()[i]);
      if (!map_tensors(v, [this, written](const at::Tensor& t) { return alias(t, written); }) &&
          v.isDevice()) {
        note_device_argument(v.toDevice());
      }
    }
  }

  // After the CPU kernel: adopt storage growth and metadata changes of written arguments, and
  // turn the returned CPU tensors back into sim tensors. (A number or flag an op returns is not a
  // sync by itself: metadata such as is_set_to reads nothing from the device. The ops that read
  // device data back have a rule, sync_rules.h.)
  void restore_results(torch::jit::Stack* stack) {
    for (AliasedArg& a : aliased_) {
      if (a.written) adopt_kernel_changes(a.sim, a.cpu);
    }
    const size_t n = schema_.returns().size();
    for (size_t i = 0; i < n; ++i) {
      const bool may_alias = may_alias_an_argument(schema_.returns()[i]);
      map_tensors((*stack)[stack->size() - n + i],
                  [this, may_alias](const at::Tensor& t) { return to_sim(t, may_alias); });
    }
  }

  // The device of the op's sim tensor arguments, else of its `device` argument.
  std::optional<c10::Device> device() const { return device_ ? device_ : device_argument_; }
  // Whether a CPU tensor was among the arguments (a 0-dim one, or an index tensor): CUDA reads
  // its value when the kernel is launched, so a captured graph would replay the value it had
  // when it was captured. A number of the program's (`x.add(1)`: a wrapped number) is a
  // constant: not one.
  bool reads_host_tensor() const { return reads_host_tensor_; }

 private:
  // `written`: the op may write it (AliasedArg::written).
  at::Tensor alias(const at::Tensor& t, bool written) {
    if (!t.defined()) return t;
    if (!is_sim(t)) {
      reads_host_tensor_ = reads_host_tensor_ || (t.device().type() == c10::DeviceType::CPU &&
                                                   !t.unsafeGetTensorImpl()->is_wrapped_number());
      TORCH_CHECK(t.dim() == 0 || allow_host_tensors_ || t.device().type() != c10::DeviceType::CPU,
                  "Expected all tensors to be on the same device, but found at least two "
                  "devices, ", device_ ? device_->str() : std::string("sim"), " and cpu! (in ",
                  schema_.name(), ")");
      return t;
    }
    if (!device_) {
      device_ = t.device();
    } else {
      TORCH_CHECK(*device_ == t.device(), "Expected all tensors to be on the same device, but "
                  "found at least two devices, ", device_->str(), " and ", t.device().str(),
                  "! (in ", schema_.name(), ")");
    }
    aliased_.push_back(
        {t, computes_shapes_only() ? compute_alias(t) : cached_cpu_alias(t, inference_), written});
    return aliased_.back().cpu;
  }

  // A factory op's `device` (triu_indices(..., device="cuda")): where its results go when no
  // tensor argument says (they went to sim:0 under serve_cuda(), a PrivateUse1 tensor for a CUDA
  // call).
  void note_device_argument(c10::Device device) {
    if (device_argument_ || !is_sim_type(device.type())) return;
    device_argument_ = device.has_index() ? device : c10::Device(device.type(), current_device());
  }

  // `may_alias`: the schema lets the result be a view of an argument.
  at::Tensor to_sim(const at::Tensor& t, bool may_alias) {
    if (!t.defined() || !(t.device().is_cpu() || t.is_meta())) return t;
    for (const AliasedArg& a : aliased_) {
      if (t.unsafeGetTensorImpl() == a.cpu.unsafeGetTensorImpl()) return a.sim;  // self / out=
    }
    if (may_alias) {
      for (const AliasedArg& a : aliased_) {
        if (t.storage().is_alias_of(a.cpu.storage())) {  // a view of an argument
          return make_tensor_on(a.sim.storage(), keys_of(a.sim.device().type()), t);
        }
      }
    }
    return to_device(t, device().value_or(c10::Device(c10::DeviceType::PrivateUse1, 0)));
  }

  const c10::FunctionSchema& schema_;
  const bool allow_host_tensors_;
  const bool inference_;  // InferenceMode on: the aliases the CPU kernel gets are inference tensors
  c10::SmallVector<AliasedArg, 4> aliased_;
  std::optional<c10::Device> device_;
  std::optional<c10::Device> device_argument_;
  bool reads_host_tensor_ = false;
};

bool is_view_op(const c10::FunctionSchema& schema) {
  for (const auto& ret : schema.returns()) {
    if (ret.alias_info() && !ret.alias_info()->isWrite()) return true;
  }
  return false;
}

// Compute::kShapes: `op`'s meta function (its Meta kernel, or the composite that reaches
// Meta kernels) on the meta aliases of its arguments. An op without one is refused by name; most
// are ops whose output size depends on values, which no meta function can know.
void run_meta_function(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  try {
    op.redispatchBoxed(kMetaKeys, stack);
    return;
  } catch (const c10::NotImplementedError&) {
    // The dispatcher leaves the stack as it was when no kernel was found.
  }
  TORCH_CHECK_NOT_IMPLEMENTED(run_shape_function(op, stack), op.schema().operator_name(),
                              " cannot run with --compute shapes: it has no meta function (its "
                              "output size depends on the values, or torch has no shape rule for "
                              "it outside Python); run with --compute values, or without this op");
}

// Runs `op` with its CPU kernel on aliases of the sim memory: one launch (a view op none), and
// the host waits its CUDA kernel would make (`rule`, sync_rules.h; nullptr: none).
void run_on_cpu(const c10::OperatorHandle& op, torch::jit::Stack* stack, const SyncRuleEntry* rule) {
  const c10::FunctionSchema& schema = op.schema();
  // The op's start: for the host's waits its rule makes and for its slice on a trace (a clock
  // read per op otherwise saved).
  const int64_t begin = rule != nullptr || events::tracing() ? events::begin_time() : 0;
  std::vector<HostWait> waits;
  if (rule != nullptr && events::collecting()) {
    waits = rule->rule(schema, &(*stack)[stack->size() - schema.arguments().size()]);
    if (!waits.empty()) check_sync_debug_mode();
  }
  FallbackCall call(schema, rule != nullptr && rule->takes_host_index_tensors);
  call.alias_arguments(stack);
  std::optional<CudaRandomDraw> draw;  // a random op on a CUDA tensor: CUDA's generator
  if (call.device() && call.device()->is_cuda() && draws_random_numbers(op)) {
    draw.emplace(schema, stack, *call.device());
  }
  std::optional<c10::DeviceGuard> guard;  // only when the op's device is not the current one
  if (call.device() && call.device()->index() != current_device()) guard.emplace(*call.device());
  {
    // What the CPU kernel allocates is the device's memory (see the top of this file).
    const memory::ChargeTo charge_to(call.device() ? call.device()->index() : memory::kHost);
    if (computes_shapes_only()) {
      run_meta_function(op, stack);
    } else {
      op.redispatchBoxed(kCpuKeys, stack);
    }
  }
  call.restore_results(stack);
  if (computes_shapes_only() && schema.name() == "aten::all") {
    const c10::IValue& result = stack->back();
    if (result.isTensor()) set_placeholder(result.toTensor(), 1.0);  // data taken to be valid
  }
  // The first wait ends when the op's work is done (sim ran it just now): it is timed from the
  // op's start, as the host's wait for a value the op computes; the next ones wait for nothing
  // more (each timed from the one before).
  int64_t since = begin;
  for (const HostWait& w : waits) {
    const int64_t waited = events::elapsed_since(since);
    if (w.bytes > 0) events::record_copy(w.kind, w.bytes, w.pinned, since);
    events::record_sync(schema.name(), w.reason, waited);
    since = events::begin_time();
  }
  if (!is_view_op(schema)) events::record_launch(schema.name(), begin);
  if (call.reads_host_tensor() && events::collecting()) {
    events::record_event(kCaptureBlocker, "CPU tensor read by " + schema.name());
  }
}

void fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  run_on_cpu(op, stack, nullptr);
}

// The kernel of an op with a sync rule.
class SyncingOpKernel final : public c10::OperatorKernel {
 public:
  explicit SyncingOpKernel(const SyncRuleEntry* rule) : rule_(rule) {}
  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
    run_on_cpu(op, stack, rule_);
  }

 private:
  const SyncRuleEntry* rule_;
};

// `_index_put_impl_` of a CUDA tensor under serve_cuda(): torch's own branch first
// (TensorAdvancedIndexing.cpp): one device mask and a one-element host value -- what
// `x[mask] = 0.5` makes of the value for a CUDA tensor (python_variable_indexing.cpp) -- is
// `masked_fill_`, dispatched and counted as such, with no sync; otherwise the op with its sync
// rule, as on sim.
class CudaIndexPutKernel final : public c10::OperatorKernel {
 public:
  explicit CudaIndexPutKernel(const SyncRuleEntry* rule) : rule_(rule) {}
  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
    const size_t n = op.schema().arguments().size();
    c10::IValue* args = &(*stack)[stack->size() - n];  // self, indices, values, accumulate, unsafe
    const bool accumulate = args[3].toBool();
    if (!accumulate) {
      const at::Tensor self = args[0].toTensor();
      const auto [masked_fill, mask] = at::native::canDispatchToMaskedFill(
          self, args[1].toOptionalTensorList(), args[2].toTensor());
      if (masked_fill) {
        const c10::Scalar value = args[2].toTensor().item();  // a host tensor: no sync
        at::Tensor result = self;
        result.masked_fill_(mask, value);
        torch::jit::drop(*stack, n);
        torch::jit::push(*stack, std::move(result));
        return;
      }
    }
    run_on_cpu(op, stack, rule_);
  }

 private:
  const SyncRuleEntry* rule_;
};

}  // namespace

void run_boxed_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  fallback(op, stack);
}

torch::Library* keep(torch::Library* library) {
  static std::mutex mu;
  static auto* kept = new std::vector<std::unique_ptr<torch::Library>>();  // never destroyed
  const std::lock_guard<std::mutex> lock(mu);
  kept->emplace_back(library);
  return library;
}

// Under serve_cuda(): every op with a CUDA kernel -- libtorch_cuda's aten ops, and those of op
// libraries loaded later (torchvision's nms, a custom extension's) -- runs sim's fallback instead
// (one launch, its CPU kernel on host aliases), or is refused by name where CPU has no kernel; the
// kernels register_kernels() registers next replace aten's where sim has its own. (An op whose
// only kernel is composite has none at the CUDA key: it runs torch's composite, whose ops come
// back here.) The dispatcher warns once that kernels are overridden: that is the point here.
namespace {

int take_over(const std::vector<c10::OperatorName>& names) {
  int taken = 0;
  c10::Dispatcher& dispatcher = c10::Dispatcher::singleton();
  c10::WarningUtils::WarningHandlerGuard quiet(&g_ignore_warnings);
  std::map<std::string, torch::Library*> by_namespace;
  for (const c10::OperatorName& name : names) {
    const size_t colons = name.name.find("::");
    const auto op = dispatcher.findOp(name);
    if (colons == std::string::npos || !op) continue;
    const std::string ns = name.name.substr(0, colons);
    torch::Library*& impls = by_namespace[ns];
    if (impls == nullptr) {
      impls = keep(new torch::Library(torch::Library::IMPL, ns, c10::DispatchKey::CUDA,
                                      __FILE__, __LINE__));
    }
    std::string qualified = name.name.substr(colons + 2);
    if (!name.overload_name.empty()) qualified += "." + name.overload_name;
    impls->impl(qualified.c_str(),
                op->hasComputedKernelForDispatchKey(c10::DispatchKey::CPU)  // own or composite
                    ? torch::CppFunction::makeFromBoxedFunction<&fallback>()
                    : torch::CppFunction::makeFromBoxedFunction<&refuse_cuda_only_op>());
    ++taken;
  }
  return taken;
}

// libtorch_cuda's aten kernels. (Its other namespaces stay: c10d's CUDA kernels hand a
// collective to the process group's backend for the device, which is sim's.)
std::vector<c10::OperatorName> aten_cuda_kernel_ops() {
  std::vector<c10::OperatorName> names;
  for (const c10::OperatorName& name :
       c10::Dispatcher::singleton().getRegistrationsForDispatchKey(c10::DispatchKey::CUDA)) {
    if (name.name.rfind("aten::", 0) == 0) names.push_back(name);
  }
  return names;
}

std::string qualified_name(const c10::OperatorName& name) {
  return name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
}

}  // namespace

std::vector<std::string> cuda_kernel_ops() {
  std::vector<std::string> names;
  for (const c10::OperatorName& name :
       c10::Dispatcher::singleton().getRegistrationsForDispatchKey(c10::DispatchKey::CUDA)) {
    names.push_back(qualified_name(name));
  }
  return names;
}

int take_over_cuda_kernels(const std::vector<std::string>& ops) {
  TORCH_CHECK(serves_cuda(), "take_over_cuda_kernels() before serve_cuda()");
  std::vector<c10::OperatorName> names;
  for (const std::string& op : ops) {
    const size_t dot = op.find('.', op.find("::") == std::string::npos ? 0 : op.find("::"));
    names.push_back(dot == std::string::npos
                        ? c10::OperatorName(op, "")
                        : c10::OperatorName(op.substr(0, dot), op.substr(dot + 1)));
  }
  return take_over(names);
}

// The ops sim runs as one op of their own name, as CUDA does, where `backend` has no kernel of
// its own and would take a composite or a loop (below). For sim, and for CUDA when no
// libtorch_cuda kernels were there to take over (a CPU-only LibTorch, as the C++ build's).
void register_own_kernel_ops(torch::Library& impls, c10::DispatchKey backend) {
  // The hottest ops, unboxed: registered first, so that the loops below leave them.
  register_unboxed_kernels(impls, backend, /*over_fallback=*/false);
  c10::Dispatcher& dispatcher = c10::Dispatcher::singleton();
  // Ops with a CUDA kernel of their own and a composite kernel, which a backend without a kernel
  // takes before its fallback (native_layer_norm would run as batch norm, convolution_backward
  // as the overrideable hook's, mish_backward as its decomposition): sim runs each as one op of
  // its own name, as CUDA does (those above have kernels of their own already). The list is
  // generated from native_functions.yaml (cuda_kernel_ops.inc).
  static constexpr const char* kCudaKernelOps[] = {
#include "harness/instrument/sim/cuda_kernel_ops.inc"
  };
  for (const char* qualified : kCudaKernelOps) {
    const std::string name(qualified);
    const size_t dot = name.find('.');
    const auto op = dispatcher.findOp({"aten::" + name.substr(0, dot),
                                       dot == std::string::npos ? "" : name.substr(dot + 1)});
    if (!op || op->hasKernelForDispatchKey(backend)) continue;
    impls.impl(qualified, torch::CppFunction::makeFromBoxedFunction<&fallback>());
  }

  // Foreach ops have a CompositeExplicitAutograd "slow path" (a loop of per-tensor ops) that would
  // otherwise run for sim and count one launch per tensor; on CUDA each is one fused launch per
  // call, so sim routes them through the fallback as well: one launch per call.
  // Likewise, structured ops whose functional form reaches other backends through a
  // CompositeExplicitAutogradNonFunctional wrapper around their out= kernel run, as on CUDA, their
  // own functional kernel (the wrapper would hand the CPU kernel a wrongly shaped out= tensor).
  for (const c10::OperatorName& name : dispatcher.getAllOpNames()) {
    if (name.name.rfind("aten::", 0) != 0) continue;
    const bool foreach_op = name.name.rfind("aten::_foreach_", 0) == 0;
    if (!foreach_op && name.name.find("copy") != std::string::npos) continue;
    const auto op = dispatcher.findOp(name);
    if (!op || op->hasKernelForDispatchKey(backend)) continue;  // sim's own
    const bool structured_functional =
        !foreach_op && op->hasKernelForDispatchKey(c10::DispatchKey::CPU) &&
        op->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutogradNonFunctional);
    if (!foreach_op && !structured_functional) continue;
    std::string qualified = name.name.substr(6);
    if (!name.overload_name.empty()) qualified += "." + name.overload_name;
    impls.impl(qualified.c_str(), torch::CppFunction::makeFromBoxedFunction<&fallback>());
  }
}

void register_kernels(c10::DispatchKey backend) {
  const bool cuda = backend == c10::DispatchKey::CUDA;
  const int cuda_kernels_taken = cuda ? take_over(aten_cuda_kernel_ops()) : 0;
  c10::WarningUtils::WarningHandlerGuard quiet(cuda ? &g_ignore_warnings
                                                    : c10::WarningUtils::get_warning_handler());
  // torch::Library objects live for the rest of the process (the registrations with them).
  auto* impls = keep(new torch::Library(torch::Library::IMPL, "aten", backend, __FILE__, __LINE__));
  impls->impl("empty.memory_format", TORCH_FN(empty_memory_format));
  impls->impl("empty_strided", TORCH_FN(empty_strided));
  impls->impl("as_strided", TORCH_FN(as_strided));
  impls->impl("view", TORCH_FN(view));
  impls->impl("_reshape_alias", TORCH_FN(reshape_alias));
  impls->impl("resize_", TORCH_FN(resize));
  impls->impl("set_.source_Tensor", TORCH_FN(set_source_tensor));
  impls->impl("set_.source_Storage", TORCH_FN(set_source_storage));
  impls->impl("set_.source_Storage_storage_offset", TORCH_FN(set_source_storage_offset));
  impls->impl("_copy_from", TORCH_FN(copy_from));
  impls->impl("_copy_from_and_resize", TORCH_FN(copy_from_and_resize));
  impls->impl("_local_scalar_dense", TORCH_FN(local_scalar_dense));
  if (cuda) {
    impls->impl("copy_", TORCH_FN(cuda_copy));
    impls->impl("is_pinned", TORCH_FN(cuda_is_pinned));
    impls->impl("_pin_memory", TORCH_FN(cuda_pin_memory));
    impls->impl("record_stream", TORCH_FN(cuda_record_stream));
  } else {
    impls->impl("_has_compatible_shallow_copy_type", TORCH_FN(has_compatible_shallow_copy_type));
  }

  // Ops whose CUDA kernel makes the host wait (sync_rules.h): registered before the loop below,
  // which leaves ops with a sim kernel alone. A rule is for an op with a kernel per backend (sim
  // runs its CPU kernel); one that has become composite would count twice: fail loudly.
  c10::Dispatcher& dispatcher = c10::Dispatcher::singleton();
  for (const SyncRuleEntry& entry : sync_rules()) {
    for (const char* overload : entry.overloads) {
      const auto op = dispatcher.findOp({entry.op, overload});
      TORCH_INTERNAL_ASSERT(op && op->hasKernelForDispatchKey(c10::DispatchKey::CPU), entry.op,
                            ".", overload, " has no CPU kernel: its sync rule would not apply");
      std::string qualified = std::string(entry.op).substr(6);
      if (*overload != '\0') qualified += std::string(".") + overload;
      impls->impl(qualified.c_str(), torch::CppFunction::makeFromBoxedFunctor(
                                         std::make_unique<SyncingOpKernel>(&entry)));
    }
  }

  if (cuda) {  // over the sync rule's kernel just registered
    for (const SyncRuleEntry& entry : sync_rules()) {
      if (std::string_view(entry.op) != "aten::_index_put_impl_") continue;
      impls->impl("_index_put_impl_", torch::CppFunction::makeFromBoxedFunctor(
                                          std::make_unique<CudaIndexPutKernel>(&entry)));
    }
  }

  // CUDA's choice of op where composite code branches on the device (cuda_*.cpp).
  register_cuda_convolution(backend);
  register_cuda_normalization(backend);
  register_cuda_rnn(backend);
  register_cuda_attention(backend);
  register_cuda_out_dtype(backend);
  register_cuda_ctc_loss(backend);
  if (cuda) {
    // The ops below (CUDA kernels beside composites, foreach, structured) all have a CUDA kernel
    // of libtorch_cuda's, overridden by take_over() above; torch's own CUDA-side code
    // (Autograd and Autocast CUDA, the conjugate and negative bits) serves CUDA tensors. An op
    // with no kernel for CUDA at all (a CPU-only op) runs as it runs on sim. Without
    // libtorch_cuda, CUDA has none of those kernels: sim's own are registered as for sim.
    if (cuda_kernels_taken == 0) {
      register_own_kernel_ops(*impls, backend);
    } else {
      register_unboxed_kernels(*impls, backend, /*over_fallback=*/true);
    }
    auto* fallbacks =
        keep(new torch::Library(torch::Library::IMPL, "_", backend, __FILE__, __LINE__));
    fallbacks->fallback(torch::CppFunction::makeFromBoxedFunction<&fallback>());
    return;
  }

  register_own_kernel_ops(*impls, c10::DispatchKey::PrivateUse1);

  // A copy from or into a conjugate or negative view: the copy resolves the bits itself (the
  // CPU copy it runs on aliases that keep them), as CUDA's copy_ does. Without these, the
  // Conjugate key's fallback materialised the source with a clone, whose copy came back to
  // _copy_from with the bit still set: an endless recursion (fft.ifft's output, .cpu()).
  static auto* conjugate = new torch::Library(torch::Library::IMPL, "aten",
                                              c10::DispatchKey::Conjugate, __FILE__, __LINE__);
  static auto* negative = new torch::Library(torch::Library::IMPL, "aten",
                                             c10::DispatchKey::Negative, __FILE__, __LINE__);
  for (torch::Library* bits : {conjugate, negative}) {
    bits->impl("_copy_from", torch::CppFunction::makeFallthrough());
    bits->impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
  }

  static auto* autograd_impls = new torch::Library(
      torch::Library::IMPL, "aten", c10::DispatchKey::AutogradPrivateUse1, __FILE__, __LINE__);
  autograd_impls->impl("_has_compatible_shallow_copy_type",
                       TORCH_FN(has_compatible_shallow_copy_type));

  static auto* fallbacks = new torch::Library(torch::Library::IMPL, "_",
                                              c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
  fallbacks->fallback(torch::CppFunction::makeFromBoxedFunction<&fallback>());
}

at::Tensor host_alias(const at::Tensor& t) {
  TORCH_CHECK(is_sim(t), "host_alias takes a sim tensor, got one on ", t.device());
  return cpu_alias(t);
}

}  // namespace harness::sim

// Storages the sim device shares with the CPU: zero-copy CPU aliases of sim memory (what the CPU
// kernels run on), and sim storages over bytes a CPU kernel allocated -- with how the memory
// ledger counts each (see sim_kernels.cpp for every way device memory comes into existence).
#include <ATen/core/Tensor.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/DeviceGuard.h>

#include <cstdint>
#include <optional>

#include "harness/instrument/memory_ledger.h"
#include "harness/instrument/sim/sim_device.h"
#include "harness/instrument/sim/sim_internal.h"

namespace harness::sim {
namespace {

// A DataPtr's context that keeps a storage alive: the StorageImpl itself, holding one reference
// (no allocation of its own; a CPU alias is made for every sim argument of every op).
void* hold_storage(const c10::Storage& storage) {
  c10::StorageImpl* impl = storage.unsafeGetStorageImpl();
  c10::raw::intrusive_ptr::incref(impl);
  return impl;
}
void release_storage(void* ctx) {
  (void)c10::intrusive_ptr<c10::StorageImpl>::reclaim(static_cast<c10::StorageImpl*>(ctx));
}

// Bytes a sim storage adopted that no counted allocator made: charged to the device here.
struct AdoptedBytes {
  c10::Storage storage;
  int64_t nbytes;
  int device;
  void* model_block = nullptr;  // its block in the device's caching allocator model
};

void release_adopted(void* ctx) {
  auto* adopted = static_cast<AdoptedBytes*>(ctx);
  memory::discharge(adopted->device, adopted->nbytes, adopted->model_block);
  delete adopted;
}

}  // namespace

at::Tensor make_tensor_on(c10::Storage storage, c10::DispatchKeySet keys, const at::Tensor& like) {
  auto impl = c10::make_intrusive<c10::TensorImpl>(std::move(storage), keys, like.dtype());
  impl->set_sizes_and_strides(like.sizes(), like.strides(), like.storage_offset());
  // A conjugate or negative view stays one (an fft's output can be a conjugate view).
  if (like.is_conj()) impl->_set_conj(true);
  if (like.is_neg()) impl->_set_neg(true);
  return at::Tensor(std::move(impl));
}

namespace {
// A CPU storage of `storage`'s size over `bytes` (its bytes), resizable with the CPU allocator.
c10::Storage cpu_storage_over(const c10::Storage& storage, c10::DataPtr bytes) {
  return c10::Storage(c10::Storage::use_byte_size_t(), storage.nbytes(), std::move(bytes),
                      c10::GetCPUAllocator(), /*resizable=*/true);
}
}  // namespace

// Not counted: it allocates nothing (its DataPtr only keeps the sim storage alive).
c10::Storage cpu_view_of_storage(const c10::Storage& storage) {
  return cpu_storage_over(storage, {storage.mutable_data(), hold_storage(storage),
                                    &release_storage, c10::Device(c10::DeviceType::CPU)});
}

c10::DataPtr adopt_bytes(const c10::Storage& storage, c10::Device device) {
  const c10::DeviceIndex index = device.index();
  // Counted already: by the counting CPU allocator (moved to the device if still the host's), or
  // as sim memory (a CPU view of a sim storage).
  if (memory::charge_to_device(storage.data_ptr(), index) ||
      storage.data_ptr().get_deleter() == &release_storage) {
    return {storage.mutable_data(), hold_storage(storage), &release_storage, device};
  }
  const auto nbytes = static_cast<int64_t>(storage.nbytes());
  auto* adopted = new AdoptedBytes{storage, nbytes, index};
  adopted->model_block = memory::charge(index, nbytes);
  return {storage.mutable_data(), adopted, &release_adopted, device};
}

c10::Storage sim_view_of_storage(const c10::Storage& storage, c10::Device device) {
  return c10::Storage(c10::Storage::use_byte_size_t(), storage.nbytes(),
                      adopt_bytes(storage, device), device_allocator(device.type()),
                      /*resizable=*/true);
}

namespace {

// What TensorImpl keeps protected and sim reads or sets in any TensorImpl: its device, its
// dispatch keys, its sizes and strides as the one record they are kept in, and whether a subclass
// computes them instead (a pointer to each member, taken here in a subclass, reaches it in any
// TensorImpl).
struct TensorImplFields : c10::TensorImpl {
  static std::optional<c10::Device>& device_of(c10::TensorImpl& impl) {
    return impl.*(&TensorImplFields::device_opt_);
  }
  static c10::DispatchKeySet& keys_of(c10::TensorImpl& impl) {
    return impl.*(&TensorImplFields::key_set_);
  }
  static const c10::impl::SizesAndStrides& layout_of(const c10::TensorImpl& impl) {
    return impl.*(&TensorImplFields::sizes_and_strides_);
  }
  // Whether `impl`'s sizes and strides are its record's, as for every tensor sim makes.
  static bool has_default_layout(const c10::TensorImpl& impl) {
    return !(impl.*(&TensorImplFields::matches_policy))(SizesStridesPolicy::CustomStrides);
  }
};

// The keys _change_backend_component_keys gives a CPU tensor's for a device type -- a function of
// the two alone -- kept for the last pair this thread saw: an op's results have the same keys
// from op to op, so the change is computed once and then copied.
struct BackendKeysChange {
  c10::DispatchKeySet from;
  c10::DeviceType type = c10::DeviceType::CPU;
  c10::DispatchKeySet to;
};
thread_local BackendKeysChange t_last_keys_change;

// Makes `impl`'s keys its backend's on `device`, as _change_backend_component_keys does.
void change_backend_keys(c10::TensorImpl& impl, c10::Device device) {
  c10::DispatchKeySet& keys = TensorImplFields::keys_of(impl);
  BackendKeysChange& last = t_last_keys_change;
  if (keys == last.from && device.type() == last.type) {
    keys = last.to;
    return;
  }
  const c10::DispatchKeySet from = keys;
  impl._change_backend_component_keys(device);
  last = {from, device.type(), keys};
}

}  // namespace

bool adopt_in_place(const at::Tensor& output, c10::Device device) {
  const c10::DeviceIndex index = device.index();
  c10::TensorImpl* impl = output.unsafeGetTensorImpl();
  if (output.use_count() != 1 || output.weak_use_count() != 1 || !impl->has_storage() ||
      !impl->key_set().has(c10::DispatchKey::CPU) || !impl->allow_tensor_metadata_change()) {
    return false;  // held elsewhere, or not a plain dense CPU tensor
  }
  c10::StorageImpl* bytes = impl->unsafe_storage().unsafeGetStorageImpl();
  // Held by this tensor alone; its bytes from the counting CPU allocator, which moves their
  // charge to the device's account (counted once).
  if (impl->unsafe_storage().use_count() != 1 ||
      !memory::charge_to_device(bytes->data_ptr(), index)) {
    return false;
  }
  bytes->mutable_data_ptr().unsafe_set_device(device);
  bytes->set_allocator(device_allocator(device.type()));
  // The tensor's device is its storage's, as set_storage_keep_dtype would set it (the storage
  // stays the same object), and CPU and AutogradCPU become the sim's keys.
  TensorImplFields::device_of(*impl) = device;
  change_backend_keys(*impl, device);
  return true;
}

// A sim tensor of `device` with fresh device memory and the geometry of meta tensor `shape`
// (a meta kernel's result under Compute::kShapes).
at::Tensor fresh_like_meta(const at::Tensor& shape, c10::Device device) {
  const c10::DeviceGuard guard(device);
  c10::Allocator* allocator = device_allocator(device.type());
  const size_t nbytes = shape.storage().nbytes();
  c10::Storage storage(c10::Storage::use_byte_size_t(), nbytes, allocator->allocate(nbytes),
                       allocator, /*resizable=*/true);
  return make_tensor_on(std::move(storage), keys_of(device.type()), shape);
}

at::Tensor to_device(const at::Tensor& host_result, c10::Device device) {
  if (host_result.defined() && host_result.is_meta()) return fresh_like_meta(host_result, device);
  if (!host_result.defined() || !host_result.device().is_cpu()) return host_result;
  if (adopt_in_place(host_result, device)) return host_result;
  return make_tensor_on(sim_view_of_storage(host_result.storage(), device),
                        keys_of(device.type()), host_result);
}

namespace {

// A CPU alias's TensorImpl: a CPU tensor that takes a sim tensor's dtype and geometry as that
// tensor has them -- sizes, strides, offset, element count, and the contiguity flags TensorImpl
// computed for them -- without computing them again, as set_sizes_and_strides would (every op
// aliases its sim arguments, and a step's new tensors are aliased afresh).
class CpuAliasImpl final : public c10::TensorImpl {
 public:
  CpuAliasImpl(c10::Storage&& storage, const c10::TensorImpl& sim)
      : c10::TensorImpl(std::move(storage), kCpuKeys, sim.dtype()) {
    take_layout_of(sim);
  }

  // Becomes the alias of `sim` (its storage already over sim's bytes).
  void take_layout_of(const c10::TensorImpl& sim) {
    TORCH_INTERNAL_ASSERT_DEBUG_ONLY(!sim.has_symbolic_sizes_strides());
    data_type_ = sim.dtype();
    if (C10_LIKELY(TensorImplFields::has_default_layout(sim))) {
      // Up to five dimensions: one fixed-size copy.
      sizes_and_strides_ = TensorImplFields::layout_of(sim);
    } else {  // sizes or strides a subclass computes (a nested tensor's refuse: it has none)
      sizes_and_strides_.set_sizes(sim.sizes());
      sizes_and_strides_.set_strides(sim.strides());
    }
    numel_ = sim.numel();
    is_contiguous_ = sim.is_contiguous_default(at::MemoryFormat::Contiguous);
    is_channels_last_contiguous_ = sim.is_contiguous_default(at::MemoryFormat::ChannelsLast);
    is_channels_last_3d_contiguous_ = sim.is_contiguous_default(at::MemoryFormat::ChannelsLast3d);
    is_channels_last_ = sim.is_strides_like_default(at::MemoryFormat::ChannelsLast);
    is_channels_last_3d_ = sim.is_strides_like_default(at::MemoryFormat::ChannelsLast3d);
    is_non_overlapping_and_dense_ = sim.is_non_overlapping_and_dense_default();
    storage_offset_ = sim.storage_offset();
    // A conjugate or negative view stays one (an fft's output can be a conjugate view).
    if (C10_UNLIKELY(is_conj() != sim.is_conj())) _set_conj(sim.is_conj());
    if (C10_UNLIKELY(is_neg() != sim.is_neg())) _set_neg(sim.is_neg());
  }

  // Whether this alias has `sim`'s sizes and strides (read from the records, inline).
  bool has_layout_of(const c10::TensorImpl& sim) const {
    if (C10_UNLIKELY(!TensorImplFields::has_default_layout(sim))) return same_geometry(*this, sim);
    const c10::impl::SizesAndStrides& mine = sizes_and_strides_;
    const c10::impl::SizesAndStrides& theirs = TensorImplFields::layout_of(sim);
    const size_t dims = mine.size();
    if (dims != theirs.size()) return false;
    const int64_t* my_sizes = mine.sizes_data();
    const int64_t* my_strides = mine.strides_data();
    const int64_t* their_sizes = theirs.sizes_data();
    const int64_t* their_strides = theirs.strides_data();
    for (size_t i = 0; i < dims; ++i) {
      if (my_sizes[i] != their_sizes[i] || my_strides[i] != their_strides[i]) return false;
    }
    return true;
  }
};

at::Tensor make_cpu_alias(c10::Storage storage, const at::Tensor& sim_tensor) {
  return at::Tensor(
      c10::make_intrusive<CpuAliasImpl>(std::move(storage), *sim_tensor.unsafeGetTensorImpl()));
}

}  // namespace

at::Tensor cpu_alias(const at::Tensor& sim_tensor) {
  return make_cpu_alias(cpu_view_of_storage(sim_tensor.storage()), sim_tensor);
}

namespace {

// This thread's CPU aliases of the sim tensors its ops ran on, for the next op on the same tensor
// (cached_cpu_alias). Direct-mapped by the address of the sim tensor's TensorImpl. An entry holds
// no reference to the sim tensor or its memory: its alias's storage does not own the bytes (a
// dead tensor's memory is freed and discharged as without the cache), and a hit is one whose
// tensor, storage, bytes and geometry are those of the entry -- so a new tensor at a dead one's
// address, over the same bytes with the same geometry, gets an alias that is right for it too.
class AliasCache {
 public:
  static constexpr size_t kEntries = 1024;

  at::Tensor alias_of(const at::Tensor& sim_tensor, bool inference) {
    c10::TensorImpl* sim = sim_tensor.unsafeGetTensorImpl();
    Entry& entry = entries_[slot_of(sim)];
    if (entry.sim == sim && still_aliases(entry, *sim, inference)) return entry.cpu;
    const c10::Storage& storage = sim->storage();
    if (held_by_entry_alone(entry, inference)) {
      rebind(entry.cpu, sim_tensor);  // the slot's alias, no longer of use, for this tensor
    } else {
      c10::Storage view = cpu_storage_over(storage, unowned_cpu_bytes(storage));
      entry.cpu = make_cpu_alias(std::move(view), sim_tensor);
    }
    entry.sim = sim;
    entry.storage = storage.unsafeGetStorageImpl();
    return entry.cpu;
  }

  void forget(const at::Tensor& sim_tensor) {
    c10::TensorImpl* sim = sim_tensor.unsafeGetTensorImpl();
    Entry& entry = entries_[slot_of(sim)];
    if (entry.sim == sim) entry = {};
  }

 private:
  struct Entry {
    const c10::TensorImpl* sim = nullptr;         // compared, never dereferenced
    const c10::StorageImpl* storage = nullptr;    // the sim tensor's storage when aliased
    at::Tensor cpu;
  };

  static size_t slot_of(const c10::TensorImpl* sim) {
    return (reinterpret_cast<uintptr_t>(sim) >> 4) * 0x9E3779B97F4A7C15ull >> 54;  // 10 bits
  }

  // The bytes of a sim storage, as a CPU DataPtr that does not own them.
  static c10::DataPtr unowned_cpu_bytes(const c10::Storage& storage) {
    return c10::DataPtr(storage.mutable_data(), c10::Device(c10::DeviceType::CPU));
  }

  // Whether the slot's alias and its storage are held by the slot only: no op kept the alias, a
  // view of it or its storage, so it can be made the alias of another tensor.
  static bool held_by_entry_alone(const Entry& entry, bool inference) {
    if (!entry.cpu.defined()) return false;
    const c10::TensorImpl* cpu = entry.cpu.unsafeGetTensorImpl();
    return entry.cpu.use_count() == 1 && entry.cpu.weak_use_count() == 1 &&
           cpu->unsafe_storage().use_count() == 1 && cpu->allow_tensor_metadata_change() &&
           made_in_this_mode(entry.cpu, inference);
  }

  // Makes `cpu` (held by its slot alone) the alias of `sim_tensor`: its storage over the sim
  // storage's bytes, its dtype, geometry and conj/neg bits -- what cpu_alias() gives a new one,
  // without allocating a TensorImpl and a StorageImpl (most misses are a step's new tensors, at
  // the addresses of the last step's).
  static void rebind(at::Tensor& cpu, const at::Tensor& sim_tensor) {
    auto* impl = static_cast<CpuAliasImpl*>(cpu.unsafeGetTensorImpl());
    const c10::Storage& storage = sim_tensor.storage();
    c10::StorageImpl* view = impl->unsafe_storage().unsafeGetStorageImpl();
    view->set_data_ptr_noswap(unowned_cpu_bytes(storage));
    view->set_nbytes(storage.nbytes());
    impl->take_layout_of(*sim_tensor.unsafeGetTensorImpl());
  }

  // Read on every op for every sim argument: inline reads of the fields, no call (storage()
  // checks that access is allowed; a sim tensor's always is).
  static bool still_aliases(const Entry& entry, const c10::TensorImpl& sim, bool inference) {
    const c10::TensorImpl& cpu = *entry.cpu.unsafeGetTensorImpl();
    const c10::StorageImpl* storage = sim.unsafe_storage().unsafeGetStorageImpl();
    const c10::StorageImpl* view = cpu.unsafe_storage().unsafeGetStorageImpl();
    return entry.storage == storage && view->data_ptr().get() == storage->data_ptr().get() &&
           view->nbytes() == storage->nbytes() && cpu.dtype() == sim.dtype() &&
           cpu.storage_offset() == sim.storage_offset() &&
           static_cast<const CpuAliasImpl&>(cpu).has_layout_of(sim) &&
           cpu.is_conj() == sim.is_conj() && cpu.is_neg() == sim.is_neg() &&
           entry.cpu.use_count() == 1 &&  // no op holds it now (one may have kept it: a new one)
           made_in_this_mode(entry.cpu, inference);
  }

  // An alias made under InferenceMode is an inference tensor (no version counter), which an
  // in-place CPU kernel may not update outside it; one made outside is a normal tensor, which
  // InferenceMode would not have made. A kept alias serves the mode it was made in, as a new one
  // made now would. (`inference`: whether InferenceMode is on, read once per op.)
  static bool made_in_this_mode(const at::Tensor& cpu, bool inference) {
    return cpu.is_inference() == inference;
  }

  Entry entries_[kEntries];
};
static_assert(AliasCache::kEntries == 1024, "slot_of takes the hash's top 10 bits");

thread_local AliasCache t_aliases;

}  // namespace

at::Tensor cached_cpu_alias(const at::Tensor& sim_tensor, bool inference) {
  return t_aliases.alias_of(sim_tensor, inference);
}

void forget_cpu_alias(const at::Tensor& sim_tensor) { t_aliases.forget(sim_tensor); }

at::Tensor compute_alias(const at::Tensor& sim_tensor) {
  if (!computes_shapes_only()) return cpu_alias(sim_tensor);
  c10::Storage shape_only(c10::Storage::use_byte_size_t(), sim_tensor.storage().nbytes(),
                          c10::DataPtr(nullptr, c10::Device(c10::DeviceType::Meta)),
                          c10::GetAllocator(c10::DeviceType::Meta), /*resizable=*/true);
  return make_tensor_on(std::move(shape_only), kMetaKeys, sim_tensor);
}

c10::DispatchKeySet compute_keys() noexcept {
  return computes_shapes_only() ? kMetaKeys : kCpuKeys;
}

}  // namespace harness::sim

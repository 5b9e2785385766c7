// The sim backend's runtime pieces: device allocator, pinned host allocator, device guard and
// PrivateUse1 hooks; and initialize(), which registers them with c10 at run time.
#include <ATen/Context.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/alloc_cpu.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/core/Stream.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/util/strides.h>

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <unordered_set>

#include "harness/instrument/collector.h"
#include "harness/instrument/kept_device_bytes.h"
#include "harness/instrument/memory_ledger.h"
#include "harness/instrument/sim/cuda_generator.h"
#include "harness/instrument/sim/sim_device.h"
#include "harness/instrument/sim/sim_internal.h"

namespace harness::sim {
namespace {

int g_device_count = 0;
std::atomic<int> g_home_device{-1};
thread_local c10::DeviceIndex t_current_device = 0;

void check_index(c10::DeviceIndex index) {
  TORCH_CHECK(index >= 0 && index < g_device_count, "sim device index ", static_cast<int>(index),
              " out of range: this process has ", g_device_count, " sim devices (sim:0..sim:",
              g_device_count - 1, ")");
}

void free_device_memory(void* p) { memory::free_device_block(p); }

// ----- device memory under Compute::kShapes: addresses without bytes -------------------------
std::atomic<Compute> g_compute{Compute::kValues};
std::atomic<bool> g_made_device_memory{false};

// One reservation of address space, never backed by memory (PROT_NONE, MAP_NORESERVE: it costs
// no RAM and no commit charge): every block of every size gets distinct addresses in it, handed
// out in order, so that two live tensors never share an address (programs compare data_ptr()s)
// and a host access to one faults at once instead of reading something.
class AddressSpace {
 public:
  static AddressSpace& get() {
    static AddressSpace* space = new AddressSpace();  // never unmapped: blocks may outlive exit
    return *space;
  }
  void* take(size_t nbytes) {
    const uint64_t size = (static_cast<uint64_t>(nbytes) + kAlign - 1) / kAlign * kAlign;
    TORCH_CHECK(size <= bytes_, "sim (--compute shapes): one allocation of ", nbytes,
                " bytes is larger than the reserved address space (", bytes_, " bytes)");
    // A ring: after bytes_ of allocations the addresses start over (the blocks made first are
    // long freed by then in any training loop).
    uint64_t offset = next_.fetch_add(size, std::memory_order_relaxed) % bytes_;
    if (offset + size > bytes_) offset = 0;
    return static_cast<char*>(base_) + offset;
  }

 private:
  static constexpr uint64_t kAlign = 512;  // CUDA's caching allocator rounds to 512 bytes
  AddressSpace() {
    for (uint64_t bytes = uint64_t{1} << 45; bytes >= (uint64_t{1} << 32); bytes >>= 1) {
      void* p = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (p != MAP_FAILED) {
        base_ = p;
        bytes_ = bytes;
        return;
      }
    }
    TORCH_CHECK(false, "sim (--compute shapes): cannot reserve address space for device memory");
  }
  void* base_ = nullptr;
  uint64_t bytes_ = 0;
  std::atomic<uint64_t> next_{0};
};

// A block of device memory under kShapes: its account and size (the DataPtr's context), and
// the placeholder its elements read as on the host (sim_internal.h, placeholder_of).
struct ShapesBlock {
  int64_t nbytes;
  int device;
  double placeholder = 0.0;
  void* model_block = nullptr;  // its block in the device's caching allocator model
};

void free_shapes_block(void* ctx) {
  auto* block = static_cast<ShapesBlock*>(ctx);
  memory::discharge(block->device, block->nbytes, block->model_block);
  delete block;
}

// Device memory: plain host memory, tagged with the sim device it belongs to and counted in that
// device's account of the memory ledger (bytes held and peak; memory_stats()); a freed block's
// bytes are kept for the device's next request of the same size (kept_device_bytes.h).
// One allocator per device type sim serves (PrivateUse1; CUDA under serve_cuda()): the same
// memory, its DataPtr naming that type.
class SimDeviceAllocator final : public c10::Allocator {
 public:
  explicit SimDeviceAllocator(c10::DeviceType type) : type_(type) {}
  c10::DataPtr allocate(size_t nbytes) override {
    g_made_device_memory.store(true, std::memory_order_relaxed);
    const c10::Device device(type_, t_current_device);
    if (nbytes > 0 && computes_shapes_only()) {
      auto* block = new ShapesBlock{static_cast<int64_t>(nbytes), t_current_device, 0.0};
      block->model_block = memory::charge(block->device, block->nbytes);
      return {AddressSpace::get().take(nbytes), block, &free_shapes_block, device};
    }
    void* p = nbytes ? memory::open_device_block(nbytes, t_current_device) : nullptr;
    return {p, p, &free_device_memory, device};
  }
  // Under kShapes a block's context is not its address: no raw allocations.
  c10::DeleterFnPtr raw_deleter() const override {
    return computes_shapes_only() ? nullptr : &free_device_memory;
  }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    if (!computes_shapes_only()) std::memcpy(dest, src, count);
  }

 private:
  const c10::DeviceType type_;
};

// Page-locked host memory, as CUDA's pinned allocator gives: host memory whose base pointers are
// remembered, so that copies from and to it can be told apart from pageable ones.
class PinnedRegistry {
 public:
  void add(void* p) { std::lock_guard<std::mutex> l(mu_); live_.insert(p); }
  void remove(void* p) { std::lock_guard<std::mutex> l(mu_); live_.erase(p); }
  bool contains(const void* p) {
    std::lock_guard<std::mutex> l(mu_);
    return live_.count(const_cast<void*>(p)) != 0;
  }
 private:
  std::mutex mu_;
  std::unordered_set<void*> live_;
};
PinnedRegistry& pinned_registry() {
  static auto* registry = new PinnedRegistry();  // leaked: outlives every tensor
  return *registry;
}

void free_pinned_memory(void* p) {
  pinned_registry().remove(p);
  c10::free_cpu(p);
}

class SimPinnedAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    void* p = nbytes ? c10::alloc_cpu(nbytes) : nullptr;
    if (p) pinned_registry().add(p);
    return {p, p, &free_pinned_memory, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_pinned_memory; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }
};

SimDeviceAllocator g_device_allocator(c10::DeviceType::PrivateUse1);
SimDeviceAllocator g_cuda_allocator(c10::DeviceType::CUDA);
SimPinnedAllocator g_pinned_allocator;

// One default stream per device; events are trivially complete (work runs eagerly on the host).
// One guard per device type sim serves; both set the same current device (t_current_device).
class SimGuardImpl final : public c10::impl::DeviceGuardImplInterface {
 public:
  explicit SimGuardImpl(c10::DeviceType type) : type_(type) {}
  c10::DeviceType type() const override { return type_; }
  c10::Device exchangeDevice(c10::Device d) const override {
    check_index(d.index());
    auto old = t_current_device;
    t_current_device = d.index();
    return {type(), old};
  }
  c10::Device getDevice() const override { return {type(), t_current_device}; }
  void setDevice(c10::Device d) const override {
    check_index(d.index());
    t_current_device = d.index();
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override { t_current_device = d.index(); }
  c10::Stream getStream(c10::Device d) const override { return c10::Stream(c10::Stream::DEFAULT, d); }
  c10::Stream getDefaultStream(c10::Device d) const override { return c10::Stream(c10::Stream::DEFAULT, d); }
  c10::Stream exchangeStream(c10::Stream s) const override { return s; }
  // One stream per device: a pool's stream (c10's Future runs its callbacks on one) or a new
  // stream is the default stream.
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool) const override {
    return c10::Stream(c10::Stream::DEFAULT, d);
  }
  c10::Stream getNewStream(c10::Device d, int) const override {
    return c10::Stream(c10::Stream::DEFAULT, d);
  }
  c10::DeviceIndex deviceCount() const noexcept override {
    return static_cast<c10::DeviceIndex>(g_device_count);
  }
  void record(void** event, const c10::Stream&, const c10::DeviceIndex,
              const c10::EventFlag) const override {
    if (*event == nullptr) *event = new char(0);
  }
  void block(void*, const c10::Stream&) const override {
    // Stream-wait-event is device-side: not a host sync, counted apart (DESIGN.md).
    events::record_stream_wait();
  }
  bool queryEvent(void*) const override { return true; }
  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override {
    delete static_cast<char*>(event);
  }
  bool queryStream(const c10::Stream&) const override { return true; }
  // Sim ops finish before they return, so an explicit synchronize has nothing queued to wait
  // for: its wait is the host time spent in the call, measured as any other sync's.
  void synchronizeStream(const c10::Stream&) const override {
    record_synchronize("stream.synchronize", "stream synchronize", events::begin_time());
  }
  void synchronizeEvent(void*) const override {
    record_synchronize("event.synchronize", "event synchronize", events::begin_time());
  }
  void synchronizeDevice(const c10::DeviceIndex) const override {
    record_synchronize("device.synchronize", "device synchronize", events::begin_time());
  }

 private:
  static void record_synchronize(const char* op, const char* reason, int64_t begin) {
    events::record_sync(op, reason, events::elapsed_since(begin));
  }

  const c10::DeviceType type_;
};

// What both of sim's hooks answer of its devices, pinned memory and generator (CUDA's hooks
// hand out CUDA's kind of generator instead): the PrivateUse1 hooks and, under serve_cuda(), CUDA's. No data members (SimCudaHooks lives in the storage of
// the wheel's CUDA hooks).
template <class Interface>
struct SimDeviceHooks : public Interface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return true; }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex) const override {
    return at::detail::getDefaultCPUGenerator();
  }
  at::Generator getNewGenerator(c10::DeviceIndex) const override {
    return at::detail::createCPUGenerator();
  }
  bool isPinnedPtr(const void* data) const override { return is_pinned_host_pointer(data); }
  at::Allocator* getPinnedMemoryAllocator() const override { return &g_pinned_allocator; }
  c10::DeviceIndex deviceCount() const override {
    return static_cast<c10::DeviceIndex>(g_device_count);
  }
  void setCurrentDevice(c10::DeviceIndex d) const override {
    check_index(d);
    t_current_device = d;
  }
  c10::DeviceIndex getCurrentDevice() const override { return t_current_device; }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex d) const override {
    check_index(d);
    const c10::DeviceIndex old = t_current_device;
    t_current_device = d;
    return old;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex d) const override {
    return exchangeDevice(d);
  }
};

struct SimHooks final : public SimDeviceHooks<at::PrivateUse1HooksInterface> {
  at::Device getDeviceFromPtr(void*) const override {
    return {c10::DeviceType::PrivateUse1, t_current_device};
  }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    resize_storage_bytes(storage.unsafeGetStorageImpl(), newsize);
  }
};

// What the CUDA hooks of the wheel say of its build (cuDNN's version and the like): kept from them
// when sim's take their place, so that torch's checks of the build read the same.
struct CudaBuildFacts {
  long cudnn_version = 0;
  long cudnn_runtime_version = 0;
  long cudart_version = 0;
  double batchnorm_min_epsilon = 1e-5;
  bool has_cudnn = false;
};
CudaBuildFacts g_cuda_build;

// at::detail::getCUDAHooks() under serve_cuda(): one H100 per sim device, as sim has them. The
// ATen and autograd code that asks the CUDA hooks (autograd's streams, lazy initialisation, pinned
// memory, the default generator, cuDNN's availability for convolutions and RNNs) reads sim's
// state; nothing asks the CUDA runtime. No data members: it takes the wheel's hooks' place in
// their own storage (serve_cuda()).
struct SimCudaHooks final : public SimDeviceHooks<at::CUDAHooksInterface> {
  void init() const override {}
  bool hasPrimaryContext(c10::DeviceIndex index) const override {
    return index >= 0 && index < g_device_count;
  }
  c10::Device getDeviceFromPtr(void*) const override {
    return {c10::DeviceType::CUDA, t_current_device};
  }
  bool hasCUDA() const override { return true; }
  bool hasCUDART() const override { return true; }
  bool hasCuDNN() const override { return g_cuda_build.has_cudnn; }
  bool hasCuSOLVER() const override { return true; }
  bool hasCuBLASLt() const override { return true; }
  c10::DeviceIndex current_device() const override { return t_current_device; }
  at::Allocator* getCUDADeviceAllocator() const override;
  bool compiledWithCuDNN() const override { return g_cuda_build.has_cudnn; }
  bool supportsDilatedConvolutionWithCuDNN() const override { return true; }
  bool supportsDepthwiseConvolutionWithCuDNN() const override { return true; }  // sm 9.0
  bool supportsBFloat16ConvolutionWithCuDNNv8() const override { return true; }
  bool supportsBFloat16RNNWithCuDNN() const override { return true; }
  long versionCuDNN() const override { return g_cuda_build.cudnn_version; }
  long versionRuntimeCuDNN() const override { return g_cuda_build.cudnn_runtime_version; }
  long versionCUDART() const override { return g_cuda_build.cudart_version; }
  // torch.__config__.show()'s CUDA lines, as CUDAHooks::showConfig writes them (its sample inputs
  // ask it: linalg.ldl_factor's, in the OpInfo sweep on CUDA tensors), from the wheel's facts.
  std::string showConfig() const override {
    const auto version = [](long v) {
      std::string text = std::to_string(v / 1000) + "." + std::to_string(v / 10 % 100);
      if (v % 10 != 0) text += "." + std::to_string(v % 10);
      return text;
    };
    std::string out = "  - CUDA Runtime " + version(g_cuda_build.cudart_version) + "\n";
    if (g_cuda_build.has_cudnn) {
      const long v = g_cuda_build.cudnn_version;
      out += "  - CuDNN " + std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
             std::to_string(v % 100) + "\n";
    }
    return out + "  - (served by harness_sim's sim device: no CUDA runtime was asked)\n";
  }
  double batchnormMinEpsilonCuDNN() const override { return g_cuda_build.batchnorm_min_epsilon; }
  int getNumGPUs() const override { return g_device_count; }
  void deviceSynchronize(c10::DeviceIndex index) const override;
  // CUDA's kind of generator: a Philox seed and offset (cuda_generator.h).
  const at::Generator& getDefaultGenerator(c10::DeviceIndex index) const override {
    return default_cuda_generator(index);
  }
  at::Generator getNewGenerator(c10::DeviceIndex index) const override {
    return new_cuda_generator(index);
  }
};

std::once_flag g_init_once;
std::once_flag g_cuda_once;
std::atomic<bool> g_serves_cuda{false};

}  // namespace

namespace {
ShapesBlock* shapes_block_of(const at::Tensor& t) {
  if (!t.defined() || !t.has_storage()) return nullptr;
  const c10::DataPtr& ptr = t.storage().data_ptr();
  return ptr.get_deleter() == &free_shapes_block ? static_cast<ShapesBlock*>(ptr.get_context())
                                                 : nullptr;
}
}  // namespace

double placeholder_of(const at::Tensor& t) {
  const ShapesBlock* block = shapes_block_of(t);
  return block ? block->placeholder : 0.0;
}

void set_placeholder(const at::Tensor& t, double value) {
  if (ShapesBlock* block = shapes_block_of(t)) block->placeholder = value;
}

at::Tensor host_tensor_without_bytes(c10::IntArrayRef sizes, c10::ScalarType dtype) {
  const int64_t nbytes = c10::multiply_integers(sizes) * c10::elementSize(dtype);
  void* data = nbytes > 0 ? AddressSpace::get().take(static_cast<size_t>(nbytes)) : nullptr;
  auto* block = new ShapesBlock{nbytes, memory::kHost, 0.0};
  (void)memory::charge(memory::kHost, nbytes);  // the host has no allocator model
  c10::Storage storage(c10::Storage::use_byte_size_t(), static_cast<size_t>(nbytes),
                       c10::DataPtr(data, block, &free_shapes_block, c10::Device(c10::kCPU)),
                       /*allocator=*/nullptr, /*resizable=*/false);
  at::Tensor t = at::empty({0}, at::TensorOptions().dtype(dtype));
  t.set_(storage, 0, sizes, c10::contiguous_strides(sizes));
  return t;
}

bool has_no_bytes(const at::Tensor& t) { return shapes_block_of(t) != nullptr; }

c10::Allocator* device_allocator(c10::DeviceType type) {
  return type == c10::DeviceType::CUDA ? &g_cuda_allocator : &g_device_allocator;
}
c10::Allocator* pinned_allocator() { return &g_pinned_allocator; }
c10::DeviceIndex current_device() noexcept { return t_current_device; }

void resize_storage_bytes(c10::StorageImpl* storage, size_t nbytes) {
  TORCH_CHECK(storage->resizable(), "sim: trying to resize a storage that is not resizable");
  const c10::DeviceGuard guard(storage->device());  // the new bytes belong to its device
  c10::DataPtr fresh = device_allocator(storage->device_type())->allocate(nbytes);
  const size_t keep = std::min(nbytes, storage->nbytes());
  if (keep && !computes_shapes_only()) std::memcpy(fresh.get(), storage->data(), keep);
  storage->set_data_ptr_noswap(std::move(fresh));
  storage->set_nbytes(nbytes);
}

void initialize(int device_count, bool name_backend) {
  std::call_once(g_init_once, [device_count, name_backend] {
    TORCH_CHECK(device_count > 0 && device_count <= 64, "sim device count must be 1..64, got ",
                device_count);
    g_device_count = device_count;
    memory::install_host_counting();  // before the workload's first CPU tensor
    if (name_backend) c10::register_privateuse1_backend(kBackendName);
    c10::SetAllocator(c10::DeviceType::PrivateUse1, &g_device_allocator);
    static c10::impl::DeviceGuardImplRegistrar guard_registrar(
        c10::DeviceType::PrivateUse1, new SimGuardImpl(c10::DeviceType::PrivateUse1));
    at::RegisterPrivateUse1HooksInterface(new SimHooks());
    register_kernels(c10::DispatchKey::PrivateUse1);
    register_autocast();
  });
}

at::Allocator* SimCudaHooks::getCUDADeviceAllocator() const { return &g_cuda_allocator; }
void SimCudaHooks::deviceSynchronize(c10::DeviceIndex index) const {
  SimGuardImpl(c10::DeviceType::CUDA).synchronizeDevice(index);
}

namespace {

// torch asks at::detail::getCUDAHooks() once (while `import torch` runs) and keeps the object in
// a static it does not export: sim's hooks take its place in that object's storage. Both are an
// interface's implementation without data members (a vtable pointer alone, as the wheel's
// at::cuda::detail::CUDAHooks is in torch 2.11 to 2.15), so the storage fits; what the wheel's
// hooks say of its build is read first. On a CPU-only torch the object is the interface's own
// stub, which fits the same way.
void take_over_cuda_hooks() {
  auto* hooks = const_cast<at::CUDAHooksInterface*>(&at::detail::getCUDAHooks());
  static_assert(sizeof(SimCudaHooks) == sizeof(at::CUDAHooksInterface),
                "sim's CUDA hooks must fit in the storage of torch's");
  g_cuda_build.has_cudnn = hooks->compiledWithCuDNN();
  if (g_cuda_build.has_cudnn) {
    g_cuda_build.cudnn_version = hooks->versionCuDNN();
    g_cuda_build.cudnn_runtime_version = g_cuda_build.cudnn_version;
    g_cuda_build.batchnorm_min_epsilon = hooks->batchnormMinEpsilonCuDNN();
  }
  if (hooks->hasCUDART()) g_cuda_build.cudart_version = hooks->versionCUDART();
  hooks->~CUDAHooksInterface();
  new (hooks) SimCudaHooks();
}

}  // namespace

void serve_cuda() {
  TORCH_CHECK(is_initialized(), "sim::serve_cuda() before sim::initialize()");
  std::call_once(g_cuda_once, [] {
    take_over_cuda_hooks();
    // c10's registry of device guards is an array of atomic pointers that a registrar overwrites:
    // CUDA's own guard (libc10_cuda, which would ask the CUDA runtime) is replaced by sim's.
    static c10::impl::DeviceGuardImplRegistrar guard_registrar(
        c10::DeviceType::CUDA, new SimGuardImpl(c10::DeviceType::CUDA));
    // At the highest priority: the caching allocator of libc10_cuda registers at the lowest.
    c10::SetAllocator(c10::DeviceType::CUDA, &g_cuda_allocator, /*priority=*/255);
    register_kernels(c10::DispatchKey::CUDA);
    g_serves_cuda.store(true);
  });
}

void set_compute(Compute compute) {
  if (compute == g_compute.load()) return;
  TORCH_CHECK(!g_made_device_memory.load(), "sim: the compute mode (", compute_name(compute),
              ") is chosen before the first sim tensor is made; this process has made them with ",
              compute_name(g_compute.load()));
  g_compute.store(compute);
}
Compute compute() noexcept { return g_compute.load(std::memory_order_relaxed); }
const char* compute_name(Compute compute) noexcept {
  return compute == Compute::kShapes ? "shapes" : "values";
}

bool serves_cuda() noexcept { return g_serves_cuda.load(std::memory_order_relaxed); }
bool is_initialized() noexcept { return g_device_count > 0; }
int device_count() noexcept { return g_device_count; }
void set_home_device(int index) noexcept { g_home_device.store(index); }
int home_device() noexcept { return g_home_device.load(); }
int own_device() noexcept {
  const int home = home_device();
  return home >= 0 ? home : t_current_device;
}

memory::Stats memory_stats(int index) {
  check_index(static_cast<c10::DeviceIndex>(index));
  return memory::program_stats(index);
}

void reset_peak(int index) {
  check_index(static_cast<c10::DeviceIndex>(index));
  memory::reset_program_peak(index);
}

void empty_cache(int index) {
  check_index(static_cast<c10::DeviceIndex>(index));
  memory::release_cached(index);
}

c10::Device device(int index) {
  TORCH_CHECK(is_initialized(), "sim backend used before harness::sim::initialize()");
  check_index(static_cast<c10::DeviceIndex>(index));
  return {c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(index)};
}

bool is_sim_type(c10::DeviceType type) noexcept {
  return type == c10::DeviceType::PrivateUse1 || (type == c10::DeviceType::CUDA && serves_cuda());
}

bool is_sim(const at::Tensor& t) { return t.defined() && is_sim_type(t.device().type()); }

void synchronize(int index) {
  check_index(static_cast<c10::DeviceIndex>(index));
  SimGuardImpl(c10::DeviceType::PrivateUse1)
      .synchronizeDevice(static_cast<c10::DeviceIndex>(index));
}

std::atomic<int> g_sync_debug_mode{kSyncDebugOff};

void set_sync_debug_mode(int mode) {
  TORCH_CHECK(mode >= kSyncDebugOff && mode <= kSyncDebugError,
              "invalid value of debug_mode, expected one of 0,1,2, got ", mode);
  g_sync_debug_mode.store(mode, std::memory_order_relaxed);
}

int sync_debug_mode() noexcept { return g_sync_debug_mode.load(std::memory_order_relaxed); }

void report_sync_in_debug_mode(int mode) {
  // CUDA's words (warn_or_error_on_sync), so that a program's handler of them works unchanged.
  TORCH_CHECK(mode != kSyncDebugError, "called a synchronizing CUDA operation");
  if (mode == kSyncDebugWarn) TORCH_WARN("called a synchronizing CUDA operation");
}

bool is_pinned_host_pointer(const void* data) noexcept {
  return data != nullptr && pinned_registry().contains(data);
}

}  // namespace harness::sim

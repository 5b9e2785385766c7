// CUDA's random number generators under serve_cuda(): each device's default generator and those
// `torch.Generator("cuda")` makes are of CUDA's kind -- a Philox seed and offset, CUDA's 16-byte
// state (CUDAGeneratorImpl::get_state / set_state) -- so that what reads or sets that state (the
// DTensor RNG tracker, torch.cuda.get_rng_state, checkpointing's fork_rng) finds what it would on
// CUDA. A random op on a CUDA tensor draws its numbers on the host: from a CPU generator seeded
// by the device generator's (seed, offset), which then advances by the Philox offset CUDA's
// distribution kernels claim for the op (DistributionTemplates.h, calc_execution_policy, on an
// H100). The numbers are not CUDA's (Philox on the host would be a kernel of its own); they are
// determined by the state as CUDA's are, and the host's own generator is left as it was.
#include "harness/instrument/sim/cuda_generator.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/EmptyTensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/GeneratorImpl.h>
#include <c10/core/TensorImpl.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <mutex>

#include "harness/instrument/sim/sim_device.h"
#include "harness/instrument/sim/sim_internal.h"

namespace harness::sim {
namespace {

constexpr uint64_t kDefaultSeed = 67280421310721ULL;  // c10::default_rng_seed_val, CUDA's too

class SimCudaGenerator final : public c10::GeneratorImpl {
 public:
  explicit SimCudaGenerator(c10::DeviceIndex index, uint64_t seed = kDefaultSeed)
      : c10::GeneratorImpl(c10::Device(c10::DeviceType::CUDA, index),
                           c10::DispatchKeySet(c10::DispatchKey::CUDA)),
        seed_(seed) {}

  static c10::DeviceType device_type() { return c10::DeviceType::CUDA; }

  void set_current_seed(uint64_t seed) override {
    seed_ = seed;
    offset_ = 0;  // as CUDA's: a new seed starts its Philox sequence anew
  }
  uint64_t current_seed() const override { return seed_; }
  uint64_t seed() override {
    const uint64_t random = c10::detail::getNonDeterministicRandom(true);
    set_current_seed(random);
    return random;
  }
  void set_offset(uint64_t offset) override {
    TORCH_CHECK(offset % 4 == 0, "offset must be a multiple of 4");  // CUDA's check
    offset_ = offset;
  }
  uint64_t get_offset() const override { return offset_; }

  // CUDA's layout: the seed (8 bytes), then the Philox offset (8 bytes), a uint8 CPU tensor.
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override {
    at::Tensor state = at::detail::empty_cpu({kStateBytes}, at::kByte, std::nullopt, std::nullopt,
                                             std::nullopt, std::nullopt);
    const auto offset = static_cast<int64_t>(offset_);
    std::memcpy(state.data_ptr<uint8_t>(), &seed_, sizeof(seed_));
    std::memcpy(state.data_ptr<uint8_t>() + sizeof(seed_), &offset, sizeof(offset));
    return state.getIntrusivePtr();
  }
  // As CUDA's: 16 bytes, or the seed alone (offset 0) as older states were.
  void set_state(const c10::TensorImpl& new_state) override {
    TORCH_CHECK(new_state.dtype() == caffe2::TypeMeta::Make<uint8_t>() &&
                    new_state.device().is_cpu(),
                "RNG state must be a torch.ByteTensor");
    const int64_t size = new_state.numel();
    TORCH_CHECK(size == kStateBytes || size == kStateBytes - 8, "RNG state is wrong size");
    const auto* bytes = static_cast<const uint8_t*>(new_state.data());
    uint64_t seed = 0;
    int64_t offset = 0;
    std::memcpy(&seed, bytes, sizeof(seed));
    if (size == kStateBytes) std::memcpy(&offset, bytes + sizeof(seed), sizeof(offset));
    seed_ = seed;
    set_offset(static_cast<uint64_t>(offset));
  }

  // The seed of the host generator an op with `numel` outputs draws from, and the offset
  // advanced as CUDA's kernel would (`wide`: a double's distribution unrolls by 2, others by 4).
  uint64_t draw(int64_t numel, bool wide) {
    const uint64_t host_seed = mix(seed_, offset_);
    offset_ += philox_increment(numel, wide ? 2 : 4);
    return host_seed;
  }

 private:
  static constexpr int64_t kStateBytes = 16;

  SimCudaGenerator* clone_impl() const override {
    auto* copy = new SimCudaGenerator(device().index(), seed_);
    copy->offset_ = offset_;
    return copy;
  }

  // calc_execution_policy's counter offset: 256 threads a block, at most 8 blocks on each of an
  // H100's 132 SMs (2048 threads each), 4 offsets per curand call.
  static uint64_t philox_increment(int64_t numel, uint64_t unroll) {
    if (numel <= 0) return 0;
    const auto n = static_cast<uint64_t>(numel);
    constexpr uint64_t kBlock = 256, kMaxGrid = 132 * (2048 / kBlock);
    const uint64_t grid = std::min(kMaxGrid, (n + kBlock - 1) / kBlock);
    return ((n - 1) / (kBlock * grid * unroll) + 1) * 4;
  }

  // splitmix64 of the pair: distinct (seed, offset) pairs give unrelated host seeds.
  static uint64_t mix(uint64_t seed, uint64_t offset) {
    uint64_t z = seed ^ (offset * 0x9E3779B97F4A7C15ULL + 0x632BE59BD9B4E019ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }

  uint64_t seed_;
  uint64_t offset_ = 0;
};

std::once_flag g_defaults_once;
std::deque<at::Generator>* g_defaults = nullptr;  // one per sim device, never destroyed

SimCudaGenerator* sim_cuda_generator(const at::Generator& g) {
  if (!g.defined() || !g.device().is_cuda()) return nullptr;
  return dynamic_cast<SimCudaGenerator*>(g.unsafeGetGeneratorImpl());
}

// The largest numel among the op's tensor arguments and results: what its kernel generates.
int64_t drawn_elements(const c10::FunctionSchema& schema, const c10::IValue* args) {
  int64_t numel = 0;
  for (size_t i = 0; i < schema.arguments().size(); ++i) {
    if (args[i].isTensor()) numel = std::max(numel, args[i].toTensor().numel());
  }
  return numel;
}

}  // namespace

const at::Generator& default_cuda_generator(c10::DeviceIndex index) {
  std::call_once(g_defaults_once, [] {
    g_defaults = new std::deque<at::Generator>();
    for (c10::DeviceIndex i = 0; i < device_count(); ++i) {
      g_defaults->push_back(at::make_generator<SimCudaGenerator>(i));
    }
  });
  const c10::DeviceIndex i = index < 0 ? current_device() : index;
  TORCH_CHECK(i >= 0 && i < static_cast<c10::DeviceIndex>(g_defaults->size()),
              "no CUDA device ", static_cast<int>(i), " (sim has ", g_defaults->size(), ")");
  return (*g_defaults)[i];
}

at::Generator new_cuda_generator(c10::DeviceIndex index) {
  return at::make_generator<SimCudaGenerator>(index < 0 ? current_device() : index);
}

CudaRandomDraw::CudaRandomDraw(const c10::FunctionSchema& schema, torch::jit::Stack* stack,
                               c10::Device device) {
  const size_t n = schema.arguments().size();
  c10::IValue* args = &(*stack)[stack->size() - n];
  int generator_arg = -1;
  for (size_t i = 0; i < n; ++i) {
    if (schema.arguments()[i].type()->kind() == c10::TypeKind::OptionalType &&
        schema.arguments()[i].type()->containedType(0)->kind() == c10::TypeKind::GeneratorType) {
      generator_arg = static_cast<int>(i);
    }
  }
  const bool named = generator_arg >= 0 && args[generator_arg].isGenerator();
  at::Generator device_generator =
      named ? args[generator_arg].toGenerator() : default_cuda_generator(device.index());
  SimCudaGenerator* philox = sim_cuda_generator(device_generator);
  TORCH_CHECK(philox != nullptr, schema.name(), ": expected a CUDA generator for a CUDA tensor, ",
              "got ", device_generator.device().str());
  bool wide = false;
  for (size_t i = 0; i < n; ++i) {
    if (args[i].isTensor()) wide = wide || args[i].toTensor().scalar_type() == at::kDouble;
  }
  uint64_t host_seed = 0;
  {
    const std::lock_guard<std::mutex> lock(device_generator.mutex());
    host_seed = philox->draw(drawn_elements(schema, args), wide);
  }
  at::Generator host = at::make_generator<at::CPUGeneratorImpl>(host_seed);
  if (generator_arg >= 0) {
    args[generator_arg] = c10::IValue(host);
  } else {
    // An op without a generator argument (native_dropout) draws from the host's default: seeded
    // for the call, and given its own state back after it.
    at::Generator cpu = at::detail::getDefaultCPUGenerator();
    const std::lock_guard<std::mutex> lock(cpu.mutex());
    saved_host_state_ = cpu.get_state();
    cpu.set_current_seed(host_seed);
  }
}

CudaRandomDraw::~CudaRandomDraw() {
  if (!saved_host_state_.defined()) return;
  at::Generator cpu = at::detail::getDefaultCPUGenerator();
  const std::lock_guard<std::mutex> lock(cpu.mutex());
  cpu.set_state(saved_host_state_);
}

bool draws_random_numbers(const c10::OperatorHandle& op) {
  return op.hasTag(at::Tag::nondeterministic_seeded);
}

}  // namespace harness::sim

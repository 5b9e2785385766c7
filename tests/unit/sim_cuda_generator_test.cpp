// CUDA's generators where sim serves CUDA (sim::serve_cuda(), cuda_generator.cpp): CUDA's state
// layout, the Philox offset a random op claims, numbers determined by the state, the host's
// generator left alone. (LibTorch here is CPU-only: its CUDA hooks are the interface's stub,
// which sim's replace as they replace the wheel's.)
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

#include "harness/instrument/sim/sim_device.h"

namespace harness {
namespace {

class SimCudaGenerator : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    sim::initialize();
    sim::serve_cuda();
  }
  static at::Generator device_generator() { return at::detail::getCUDAHooks().getDefaultGenerator(0); }
  static int64_t offset() {
    const at::Tensor state = device_generator().get_state();
    int64_t value = 0;
    std::memcpy(&value, state.data_ptr<uint8_t>() + 8, sizeof(value));
    return value;
  }
  const at::TensorOptions cuda = at::TensorOptions().device(c10::Device(c10::DeviceType::CUDA, 0));
};

TEST_F(SimCudaGenerator, StateIsCudasSeedAndOffset) {
  at::Generator g = device_generator();
  EXPECT_EQ(g.device(), c10::Device(c10::DeviceType::CUDA, 0));
  g.set_current_seed(42);
  const at::Tensor state = g.get_state();
  ASSERT_EQ(state.numel(), 16);
  EXPECT_EQ(state.scalar_type(), at::kByte);
  uint64_t seed = 0;
  std::memcpy(&seed, state.data_ptr<uint8_t>(), sizeof(seed));
  EXPECT_EQ(seed, 42u);
  EXPECT_EQ(offset(), 0);
  // set_state takes 16 bytes (seed, offset) or the seed alone; a size of neither is refused
  at::Tensor moved = state.clone();
  const int64_t eight = 8;
  std::memcpy(moved.data_ptr<uint8_t>() + 8, &eight, sizeof(eight));
  g.set_state(moved);
  EXPECT_EQ(offset(), 8);
  EXPECT_THROW(g.set_state(at::zeros({12}, at::kByte)), c10::Error);
}

TEST_F(SimCudaGenerator, ARandomOpClaimsCudasPhiloxOffsetAndIsDeterminedByTheState) {
  device_generator().set_current_seed(7);
  const at::Tensor host_before = at::detail::getDefaultCPUGenerator().get_state();
  const at::Tensor saved = device_generator().get_state();
  const at::Tensor a = at::randn({1000}, cuda);
  EXPECT_EQ(offset(), 4);  // 1000 floats: one curand4 call a thread
  at::empty({2'000'000}, cuda).uniform_();
  EXPECT_EQ(offset(), 12);  // 2M floats over at most 1056 blocks of 256 threads: two calls
  at::empty({1000}, cuda.dtype(at::kDouble)).normal_();
  EXPECT_EQ(offset(), 16);
  device_generator().set_state(saved);
  const at::Tensor b = at::randn({1000}, cuda);
  EXPECT_TRUE(at::equal(a.cpu(), b.cpu()));  // the same state: the same numbers
  const at::Tensor c = at::randn({1000}, cuda);
  EXPECT_FALSE(at::equal(b.cpu(), c.cpu()));  // the offset moved on: others
  EXPECT_TRUE(at::equal(host_before, at::detail::getDefaultCPUGenerator().get_state()));
}

TEST_F(SimCudaGenerator, AGeneratorArgumentMustBeCudasAndDrawsFromItsOwnState) {
  at::Generator mine = at::detail::getCUDAHooks().getNewGenerator(0);
  mine.set_current_seed(5);
  device_generator().set_current_seed(5);
  const at::Tensor from_mine = at::empty({16}, cuda).normal_(0, 1, mine);
  const at::Tensor from_default = at::empty({16}, cuda).normal_();
  EXPECT_TRUE(at::equal(from_mine.cpu(), from_default.cpu()));
  EXPECT_THROW(at::empty({16}, cuda).normal_(0, 1, at::detail::createCPUGenerator()), c10::Error);
}

}  // namespace
}  // namespace harness

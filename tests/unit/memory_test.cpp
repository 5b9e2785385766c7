// Device and host memory: the sim allocator's ledger, bytes adopted from CPU kernels, the counting
// CPU allocator.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "harness/instrument/memory_ledger.h"
#include "harness/instrument/sim/sim_device.h"

namespace harness {
namespace {

class Memory : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { sim::initialize(); }
  static int64_t device_level(int index = 0) { return sim::memory_stats(index).allocated_bytes; }
  static int64_t host_level() { return memory::stats(memory::kHost).allocated_bytes; }
  static int64_t host_peak() { return memory::stats(memory::kHost).peak_bytes; }
  at::Tensor sim_floats(int64_t n, int index = 0) {
    return at::empty({n}, at::TensorOptions().dtype(at::kFloat).device(sim::device(index)));
  }
};

TEST_F(Memory, HostCountingIsInstalledWithTheSimBackend) {
  EXPECT_TRUE(memory::host_counting_installed());
}

TEST_F(Memory, AnNByteSimTensorRaisesAllocatedBytesByNAndFreeingLowersThem) {
  const int64_t before = device_level();
  const int64_t other = device_level(1);
  {
    at::Tensor t = sim_floats(1000);
    EXPECT_EQ(device_level(), before + 4000);
    EXPECT_GE(sim::memory_stats(0).peak_bytes, before + 4000);
    EXPECT_EQ(device_level(1), other);  // each device has its own account
  }
  EXPECT_EQ(device_level(), before);
  sim::reset_peak(0);
  EXPECT_EQ(sim::memory_stats(0).peak_bytes, before);
}

TEST_F(Memory, OutputOfACpuKernelOnASimTensorIsDeviceMemoryNotHostMemory) {
  at::Tensor x = at::ones({256}).to(sim::device(0));  // 1 KiB
  const int64_t device = device_level();
  const int64_t host = host_level();
  memory::reset_peak(memory::kHost);
  {
    at::Tensor y = x * x;  // the fallback: a CPU kernel allocates the output
    EXPECT_EQ(y.device(), sim::device(0));
    EXPECT_EQ(device_level(), device + 1024);
    EXPECT_EQ(host_level(), host);
    EXPECT_EQ(host_peak(), host);  // not host memory even for a moment
  }
  EXPECT_EQ(device_level(), device);  // released when the adopted storage dies
}

TEST_F(Memory, OutArgumentGrownByTheKernelIsDeviceMemory) {
  at::Tensor a = at::ones({3, 2}).to(sim::device(0));
  at::Tensor out = sim_floats(0);
  const int64_t device = device_level();
  const int64_t host = host_level();
  memory::reset_peak(memory::kHost);
  at::add_out(out, a, a);
  EXPECT_EQ(device_level(), device + 24);
  EXPECT_EQ(host_peak(), host);
  out = at::Tensor();
  EXPECT_EQ(device_level(), device);
}

TEST_F(Memory, ResizeCountsOnTheTensorsOwnDevice) {
  at::Tensor t = sim_floats(0, 1);
  const int64_t zero = device_level(0);
  const int64_t one = device_level(1);
  t.resize_({100});  // the current device is sim:0
  EXPECT_EQ(device_level(1), one + 400);
  EXPECT_EQ(device_level(0), zero);
  EXPECT_EQ(t.storage().data_ptr().device(), sim::device(1));
}

TEST_F(Memory, HostTensorsAreHostMemoryAndAliasesAreNotCounted) {
  const int64_t host = host_level();
  at::Tensor s = at::ones({500}).to(sim::device(0));  // the CPU temporary is freed
  EXPECT_EQ(host_level(), host);
  const int64_t device = device_level();
  at::Tensor cpu = at::empty({1000});
  EXPECT_EQ(host_level(), host + 4000);
  at::Tensor back = s.cpu();  // D2H: a new CPU tensor
  EXPECT_EQ(host_level(), host + 6000);
  EXPECT_EQ(device_level(), device);
  at::Tensor alias = sim::host_alias(s);  // zero-copy: nothing new
  EXPECT_EQ(host_level(), host + 6000);
  EXPECT_EQ(device_level(), device);
}

TEST_F(Memory, ChargeToDeviceMovesAHostBlockOnce) {
  at::Tensor cpu = at::empty({64});
  const int64_t host = host_level();
  const int64_t device = device_level(3);
  ASSERT_TRUE(memory::charge_to_device(cpu.storage().data_ptr(), 3));
  ASSERT_TRUE(memory::charge_to_device(cpu.storage().data_ptr(), 3));  // already the device's
  EXPECT_EQ(host_level(), host - 256);
  EXPECT_EQ(device_level(3), device + 256);
  cpu = at::Tensor();
  EXPECT_EQ(device_level(3), device);
  EXPECT_EQ(host_level(), host - 256);
}

}  // namespace
}  // namespace harness

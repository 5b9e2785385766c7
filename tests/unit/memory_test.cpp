// Device and host memory: the sim allocator's ledger, bytes adopted from CPU kernels, the counting
// CPU allocator, and the peaks and levels a MemoryWatch files by phase.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <thread>
#include <utility>
#include <vector>

#include "harness/instrument/instrument.h"
#include "harness/instrument/kept_device_bytes.h"
#include "harness/instrument/memory_ledger.h"
#include "harness/instrument/phase.h"
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
  // Runs `f` in a measured window of a sim instrument and returns what it counted.
  template <class F>
  Counts measure(F&& f) {
    auto instrument = make_instrument(DeviceKind::Sim);
    {
      Counting counting(*instrument);
      f();
    }
    return instrument->take();
  }
};

TEST_F(Memory, HostCountingIsInstalledWithTheSimBackend) {
  EXPECT_TRUE(memory::host_counting_installed());
}

TEST_F(Memory, AnNByteSimTensorRaisesAllocatedBytesByNAndFreeingLowersThem) {
  const int64_t before = device_level();
  const int64_t other = device_level(1);
  {
    at::Tensor t = sim_floats(1024);
    EXPECT_EQ(device_level(), before + 4096);
    EXPECT_GE(sim::memory_stats(0).peak_bytes, before + 4096);
    EXPECT_EQ(device_level(1), other);  // each device has its own account
  }
  EXPECT_EQ(device_level(), before);
  sim::reset_peak(0);
  EXPECT_EQ(sim::memory_stats(0).peak_bytes, before);
}

// CUDA's caching allocator gives a request a block of its size rounded up to 512 bytes, and
// torch.cuda.memory_allocated() counts the block: so does a device account. The host's does not.
TEST_F(Memory, ADeviceAccountHoldsARequestRoundedUpTo512BytesAsCudasCachingAllocatorDoes) {
  const int64_t before = device_level();
  {
    at::Tensor one = sim_floats(1);  // 4 bytes
    EXPECT_EQ(device_level(), before + 512);
    at::Tensor just_over = sim_floats(129);  // 516 bytes
    EXPECT_EQ(device_level(), before + 512 + 1024);
    at::Tensor empty = sim_floats(0);  // no block at all
    EXPECT_EQ(device_level(), before + 512 + 1024);
    const int64_t host = host_level();
    at::Tensor cpu = at::empty({1});
    EXPECT_EQ(host_level(), host + 4);
  }
  EXPECT_EQ(device_level(), before);
  EXPECT_EQ(memory::held_bytes(0, 0), 0);
  EXPECT_EQ(memory::held_bytes(0, 512), 512);
  EXPECT_EQ(memory::held_bytes(0, 513), 1024);
  EXPECT_EQ(memory::held_bytes(memory::kHost, 513), 513);
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
  EXPECT_EQ(device_level(), device + 512);  // 24 bytes: one 512-byte block
  EXPECT_EQ(host_peak(), host);
  out = at::Tensor();
  EXPECT_EQ(device_level(), device);
}

TEST_F(Memory, ResizeCountsOnTheTensorsOwnDevice) {
  at::Tensor t = sim_floats(0, 1);
  const int64_t zero = device_level(0);
  const int64_t one = device_level(1);
  t.resize_({128});  // the current device is sim:0
  EXPECT_EQ(device_level(1), one + 512);
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
  EXPECT_EQ(device_level(3), device + 512);  // the device holds it as a 512-byte block
  cpu = at::Tensor();
  EXPECT_EQ(device_level(3), device);
  EXPECT_EQ(host_level(), host - 256);
}

// A device keeps the host bytes of a block it frees for its next request of the same size, as
// CUDA's caching allocator keeps the block itself; the device's count drops as before. Device 2
// is this group's alone.
class KeptDeviceBytes : public Memory {
 protected:
  void SetUp() override {
#if defined(__SANITIZE_ADDRESS__)
    GTEST_SKIP() << "under AddressSanitizer a freed device block's bytes go back";
#endif
    sim::empty_cache(kDevice);
  }
  void TearDown() override { sim::empty_cache(kDevice); }
  static int64_t kept_blocks() { return memory::kept_stats(kDevice).blocks; }
  static constexpr int kDevice = 2;
};

TEST_F(KeptDeviceBytes, AFreedBlocksBytesServeTheNextRequestOfTheSameSize) {
  const int64_t level = device_level(kDevice);
  const void* bytes = nullptr;
  {
    at::Tensor t = sim_floats(3000, kDevice);
    bytes = t.data_ptr();
  }
  EXPECT_EQ(kept_blocks(), 1);
  EXPECT_EQ(memory::kept_stats(kDevice).bytes, 12000 + memory::kBlockHeaderBytes);
  EXPECT_EQ(device_level(kDevice), level);  // freed, as far as the device's count goes
  at::Tensor other_size = sim_floats(3001, kDevice);
  EXPECT_NE(other_size.data_ptr(), bytes);
  at::Tensor same_size = sim_floats(3000, kDevice);
  EXPECT_EQ(same_size.data_ptr(), bytes);
  EXPECT_EQ(kept_blocks(), 0);
  EXPECT_EQ(device_level(kDevice), level + 12288 + 12288);
}

TEST_F(KeptDeviceBytes, ACpuKernelsOutputForTheDeviceTakesKeptBytesAndAHostTensorNever) {
  const c10::DeviceGuard guard(sim::device(kDevice));
  at::Tensor x = at::ones({777}).to(sim::device(kDevice));
  const void* bytes = nullptr;
  {
    at::Tensor y = x * x;  // the CPU kernel allocates the output, charged to the device
    bytes = y.data_ptr();
  }
  EXPECT_EQ(kept_blocks(), 1);
  at::Tensor z = x + x;
  EXPECT_EQ(z.data_ptr(), bytes);
  EXPECT_EQ(kept_blocks(), 0);
  { at::Tensor host = at::empty({777}); }
  EXPECT_EQ(kept_blocks(), 0);
  EXPECT_EQ(memory::kept_stats(memory::kHost).blocks, 0);
}

TEST_F(KeptDeviceBytes, ABlockFreedOnAnotherThreadIsKeptForItsDevice) {
  at::Tensor t = sim_floats(5000, kDevice);
  const void* bytes = t.data_ptr();
  std::thread([dropped = std::move(t)]() mutable { dropped = at::Tensor(); }).join();
  EXPECT_EQ(kept_blocks(), 1);
  EXPECT_EQ(sim_floats(5000, kDevice).data_ptr(), bytes);
}

TEST_F(KeptDeviceBytes, EmptyCacheGivesThemBackAndTheyAreBounded) {
  { at::Tensor t = sim_floats(100, kDevice); }
  ASSERT_EQ(kept_blocks(), 1);
  sim::empty_cache(kDevice);  // torch.cuda.empty_cache()
  EXPECT_EQ(kept_blocks(), 0);
  EXPECT_EQ(memory::kept_stats(kDevice).bytes, 0);

  // One block more than there is room for, of as many sizes, freed first to last: the first
  // (the oldest kept) is given back, the last is kept.
  std::vector<at::Tensor> many;
  std::vector<const void*> bytes;
  for (size_t i = 0; i <= memory::kKeptDeviceBlocks; ++i) {
    many.push_back(sim_floats(128 * static_cast<int64_t>(i + 1), kDevice));
    bytes.push_back(many.back().data_ptr());
  }
  many.clear();
  EXPECT_EQ(static_cast<size_t>(kept_blocks()), memory::kKeptDeviceBlocks);
  at::Tensor last = sim_floats(128 * static_cast<int64_t>(memory::kKeptDeviceBlocks + 1), kDevice);
  EXPECT_EQ(last.data_ptr(), bytes.back());
  EXPECT_EQ(static_cast<size_t>(kept_blocks()), memory::kKeptDeviceBlocks - 1);
  at::Tensor first = sim_floats(128, kDevice);  // its bytes went back: none kept of its size
  EXPECT_EQ(static_cast<size_t>(kept_blocks()), memory::kKeptDeviceBlocks - 1);

  // Bytes: a block that would not fit beside the kept ones gives back as many of them as it
  // needs; one larger than the bound itself is freed.
  sim::empty_cache(kDevice);
  const int64_t third = static_cast<int64_t>(memory::kKeptDeviceBytes / 3 / 4);  // floats
  { at::Tensor a = sim_floats(third, kDevice); }
  { at::Tensor b = sim_floats(third + 128, kDevice); }
  EXPECT_EQ(kept_blocks(), 2);
  { at::Tensor c = sim_floats(third + 256, kDevice); }
  { at::Tensor d = sim_floats(third + 384, kDevice); }  // a and b cannot stay beside c and d
  EXPECT_EQ(kept_blocks(), 2);
  EXPECT_LE(memory::kept_stats(kDevice).bytes, static_cast<int64_t>(memory::kKeptDeviceBytes));
  sim::empty_cache(kDevice);
  { at::Tensor big = sim_floats(static_cast<int64_t>(memory::kKeptDeviceBytes / 4), kDevice); }
  EXPECT_EQ(kept_blocks(), 0);  // over the byte bound with its header: freed
}

TEST_F(Memory, APhasePeakIsAboveItsEndLevelWhenItFreesATemporary) {
  at::Tensor keep;
  const int64_t level = device_level();
  const Counts c = measure([&] {
    Phase phase("work");
    keep = sim_floats(128);
    at::Tensor temporary = sim_floats(1024);
  });
  const MemoryTally& work = c.phases.at("work").memory.device;
  EXPECT_EQ(work.peak, level + 512 + 4096);
  EXPECT_EQ(work.allocated, level + 512);
  EXPECT_EQ(c.memory.device.peak, level + 4608);  // the window
  EXPECT_EQ(c.memory.device.allocated, level + 512);
  EXPECT_EQ(c.total().memory.device.peak, level + 4608);
  EXPECT_EQ(c.total().memory.device.allocated, level + 512);
}

// The trace has the memory timeline: at every phase boundary the level and the peak since the
// boundary before, as Chrome counters and as Kineto's "[memory]" events.
TEST_F(Memory, ATracedWindowHasTheLevelAndPeakAtEveryPhaseBoundary) {
  TraceRecorder trace;
  trace.set_device(0, "sim", "sim");
  auto instrument = make_instrument(DeviceKind::Sim);
  instrument->attach_trace(&trace);
  at::Tensor keep;
  const int64_t level = device_level();
  {
    Counting counting(*instrument);
    Phase phase("work");
    keep = sim_floats(128);
    at::Tensor temporary = sim_floats(1024);
  }
  (void)instrument->take();
  std::vector<std::pair<int64_t, int64_t>> device;  // (allocated, peak) of each record
  const nlohmann::json chrome = nlohmann::json::parse(trace.to_json());
  for (const auto& e : chrome.at("traceEvents")) {
    if (e.at("ph") != "C" || e.at("name") != "device memory") continue;
    device.emplace_back(e.at("args").at("allocated"), e.at("args").at("peak"));
  }
  // The window's start, the phase's start and its end, the window's end.
  const std::vector<std::pair<int64_t, int64_t>> expected = {
      {level, level}, {level, level}, {level + 512, level + 4608}, {level + 512, level + 512}};
  EXPECT_EQ(device, expected);
  std::vector<int64_t> bytes, totals;
  const nlohmann::json kineto = nlohmann::json::parse(trace.to_kineto_json());
  for (const auto& e : kineto.at("traceEvents")) {
    if (e.value("name", "") != "[memory]" || e.at("args").at("Device Type") != 1) continue;
    EXPECT_EQ(e.at("args").at("Device Id"), 0);
    bytes.push_back(e.at("args").at("Bytes"));
    totals.push_back(e.at("args").at("Total Allocated"));
  }
  EXPECT_EQ(totals, (std::vector<int64_t>{level, level, level + 512, level + 512}));
  EXPECT_EQ(bytes, (std::vector<int64_t>{level, 0, 512, 0}));
}

TEST_F(Memory, NestedPhasesPeakInsideTheirParentAndAQuietPhasePeaksAtTheLevel) {
  at::Tensor keep;
  const int64_t level = device_level();
  const Counts c = measure([&] {
    Phase outer("outer");
    keep = sim_floats(128);
    {
      Phase inner("inner");
      at::Tensor temporary = sim_floats(1024);
    }
    { Phase quiet("quiet"); }
    at::Tensor small = sim_floats(256);
  });
  const MemoryTally& outer = c.phases.at("outer").memory.device;
  const MemoryTally& inner = c.phases.at("inner").memory.device;
  const MemoryTally& quiet = c.phases.at("quiet").memory.device;
  EXPECT_EQ(inner.peak, level + 4608);
  EXPECT_EQ(inner.allocated, level + 512);
  EXPECT_EQ(outer.peak, level + 4608);  // the inner phase's peak is the outer's too
  EXPECT_EQ(outer.allocated, level + 512);
  EXPECT_EQ(quiet.peak, level + 512);  // what was allocated when it began
  EXPECT_EQ(quiet.allocated, level + 512);
}

TEST_F(Memory, APhaseKeepsItsLargestPeakAndItsLastEndLevel) {
  at::Tensor keep;
  const int64_t level = device_level();
  const Counts c = measure([&] {
    {
      Phase step("step");
      at::Tensor big = sim_floats(1024);
    }
    {
      Phase step("step");
      keep = sim_floats(16);
    }
  });
  EXPECT_EQ(c.phases.at("step").memory.device.peak, level + 4096);
  EXPECT_EQ(c.phases.at("step").memory.device.allocated, level + 512);
}

TEST_F(Memory, HostMemoryByPhase) {
  const int64_t device = device_level();
  const int64_t host = host_level();
  const Counts c = measure([&] {
    Phase phase("host work");
    at::Tensor cpu = at::empty({2000});
  });
  const MemoryCounts& m = c.phases.at("host work").memory;
  EXPECT_EQ(m.host.peak, host + 8000);
  EXPECT_EQ(m.host.allocated, host);
  EXPECT_EQ(m.device.peak, device);
}

TEST_F(Memory, NothingIsFiledOutsideAMeasuredWindow) {
  auto instrument = make_instrument(DeviceKind::Sim);
  { Phase phase("before"); }
  { Counting counting(*instrument); }
  { Phase phase("after"); }
  const Counts c = instrument->take();
  EXPECT_TRUE(c.phases.empty());
  EXPECT_TRUE(c.memory.device.peak.has_value());
}

TEST_F(Memory, CpuInstrumentMeasuresHostMemoryButNoDeviceMemory) {
  auto instrument = make_instrument(DeviceKind::Cpu);
  {
    Counting counting(*instrument);
    Phase phase("cpu work");
    at::Tensor cpu = at::empty({10});
  }
  const Counts c = instrument->take();
  const MemoryCounts& m = c.phases.at("cpu work").memory;
  EXPECT_FALSE(m.device.peak.has_value());
  EXPECT_FALSE(m.device.allocated.has_value());
  EXPECT_TRUE(m.host.peak.has_value());
  EXPECT_TRUE(m.host.allocated.has_value());
}

}  // namespace
}  // namespace harness

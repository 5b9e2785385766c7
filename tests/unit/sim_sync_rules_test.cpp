// The host syncs of CUDA ops, replayed by sim (sync_rules.h): one case per rule, as PyTorch
// 2.11's CUDA code makes them, and the neighbours that must not sync.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "harness/instrument/collector.h"
#include "harness/instrument/sim/sim_device.h"

namespace harness {
namespace {

// The inputs of a case, on sim:0, made before counting starts (fresh for each case).
struct Inputs {
  c10::Device dev = sim::device(0);
  at::Tensor values = at::tensor({0.f, 2.f, 0.f, 3.f, 1.f}).to(dev);
  at::Tensor mask = at::tensor({1, 0, 1, 0, 1}).to(at::kBool).to(dev);
  at::Tensor positions = at::tensor({0, 2}).to(dev);   // long indices
  at::Tensor counts = at::tensor({1, 3, 3}, at::kLong).to(dev);  // bincount input
  at::Tensor repeats = at::tensor({1, 2, 0}).to(dev);
  at::Tensor ones2 = at::ones({2}).to(dev);
  at::Tensor ones3 = at::ones({3}).to(dev);
  at::Tensor seven = at::scalar_tensor(7.f).to(dev);  // 0-dim, on the device
};

struct SyncCase {
  std::string name;
  std::function<void(Inputs&)> body;      // what runs, counted
  int64_t syncs;                          // what CUDA's code makes it wait
  std::string op;                         // the op the syncs are attributed to ("" for none)
  int64_t d2h_bytes = -1;                 // bytes read back, where the case pins them
};

std::ostream& operator<<(std::ostream& os, const SyncCase& c) { return os << c.name; }

class SimSyncRules : public ::testing::TestWithParam<SyncCase> {
 protected:
  static void SetUpTestSuite() { sim::initialize(); }
};

TEST_P(SimSyncRules, SyncsAsCudaDoes) {
  const SyncCase& c = GetParam();
  Inputs in;
  EventCollector collector;
  {
    ScopedCollection scope(collector);
    c.body(in);
  }
  const Counts counts = collector.snapshot();
  const PhaseCounts total = counts.total();
  EXPECT_EQ(total.syncs, c.syncs);
  for (const auto& [site, tally] : counts.sync_sites) {
    EXPECT_EQ(site.op, c.op) << site.reason;
  }
  if (c.d2h_bytes >= 0) EXPECT_EQ(total.d2h.bytes, c.d2h_bytes);
}

const SyncCase kSyncing[] = {
    {"nonzero", [](Inputs& in) { (void)in.values.nonzero(); }, 1, "aten::nonzero", 4},
    {"masked_select", [](Inputs& in) { (void)in.values.masked_select(in.mask); }, 1,
     "aten::masked_select", 4},
    {"boolean_index", [](Inputs& in) { (void)in.values.index({in.mask}); }, 1, "aten::index", 4},
    {"host_long_index",  // CUDA copies a host index tensor to the device, blocking
     [](Inputs& in) { (void)in.values.index({at::tensor({0, 2}, at::kLong)}); }, 1, "aten::index",
     0},
    {"where_cond", [](Inputs& in) { (void)at::where(in.mask); }, 1, "aten::nonzero", 4},
    {"argwhere", [](Inputs& in) { (void)at::argwhere(in.values); }, 1, "aten::nonzero", 4},
    {"index_put_mask_device_value", [](Inputs& in) { in.values.index_put_({in.mask}, in.ones3); },
     1, "aten::_index_put_impl_", 4},
    {"index_put_accumulate",
     [](Inputs& in) { in.values.index_put_({in.positions}, in.ones2, /*accumulate=*/true); }, 2,
     "aten::_index_put_impl_", 16},
    {"unique", [](Inputs& in) { (void)at::_unique2(in.values); }, 1, "aten::_unique2", 8},
    {"unique_bool", [](Inputs& in) { (void)at::_unique2(in.mask); }, 1, "aten::_unique2", 4},
    {"unique_consecutive", [](Inputs& in) { (void)at::unique_consecutive(in.values); }, 1,
     "aten::unique_consecutive", 8},
    {"unique_dim", [](Inputs& in) { (void)at::unique_dim(in.values.view({5, 1}), 0); }, 2,
     "aten::unique_dim", 8},
    {"repeat_interleave", [](Inputs& in) { (void)at::repeat_interleave(in.repeats); }, 2,
     "aten::repeat_interleave", 9},
    {"bincount", [](Inputs& in) { (void)at::bincount(in.counts); }, 2, "aten::bincount", 16},
    {"bincount_uint8", [](Inputs& in) { (void)at::bincount(in.mask.to(at::kByte)); }, 1,
     "aten::bincount", 1},
    {"histc_range_from_data", [](Inputs& in) { (void)at::histc(in.values, 4); }, 2, "aten::histc",
     8},
    {"multinomial_without_replacement",
     [](Inputs& in) { (void)at::multinomial(in.values, 2, /*replacement=*/false); }, 2,
     "aten::multinomial", 2},
    {"masked_fill_device_value", [](Inputs& in) { in.values.masked_fill_(in.mask, in.seven); }, 1,
     "aten::masked_fill_", 4},
    {"equal", [](Inputs& in) { (void)at::equal(in.values, in.values.clone()); }, 1, "aten::equal",
     1},
    // LibTorch 2.11: std checked on the host by normal_impl, then by normal_out_impl
    {"normal_tensor_std", [](Inputs& in) { (void)at::normal(in.values, in.values.abs()); }, 2,
     "aten::normal", 2},
    {"normal_tensor_std_out",
     [](Inputs& in) {
       at::Tensor out = at::empty_like(in.values);
       (void)at::normal_out(out, 0.0, in.values.abs());
     },
     1,
     "aten::normal", 1},
    {"item", [](Inputs& in) { (void)in.values.sum().item<float>(); }, 1,
     "aten::_local_scalar_dense", 4},
    {"non_blocking_d2h_into_pageable",
     [](Inputs& in) { at::empty({5}).copy_(in.values, /*non_blocking=*/true); }, 1, "aten::copy_",
     20},
};

const SyncCase kNotSyncing[] = {
    {"nonzero_static", [](Inputs& in) { (void)at::nonzero_static(in.values, 5); }, 0, ""},
    {"index_select", [](Inputs& in) { (void)in.values.index_select(0, in.positions); }, 0, ""},
    {"long_index", [](Inputs& in) { (void)in.values.index({in.positions}); }, 0, ""},
    {"index_put_mask_host_scalar",  // masked_fill_ (canDispatchToMaskedFill)
     [](Inputs& in) { in.values.index_put_({in.mask}, at::scalar_tensor(1.f)); }, 0, ""},
    {"repeat_interleave_with_output_size",
     [](Inputs& in) { (void)at::repeat_interleave(in.repeats, /*output_size=*/3); }, 0, ""},
    {"histc_explicit_range", [](Inputs& in) { (void)at::histc(in.values, 4, 0, 4); }, 0, ""},
    {"multinomial_with_replacement",
     [](Inputs& in) { (void)at::multinomial(in.values, 3, /*replacement=*/true); }, 0, ""},
    {"masked_fill_scalar", [](Inputs& in) { in.values.masked_fill_(in.mask, 7.f); }, 0, ""},
    {"normal_float_std", [](Inputs& in) { (void)at::normal(in.values, 1.0); }, 0, ""},
    {"equal_same_view", [](Inputs& in) { (void)at::equal(in.values, in.values); }, 0, ""},
    {"is_set_to", [](Inputs& in) { (void)in.values.is_set_to(in.values); }, 0, ""},
    {"elementwise", [](Inputs& in) { (void)in.values.mul(2).add_(1); }, 0, ""},
    {"views", [](Inputs& in) { (void)in.values.view({5, 1}).t().narrow(1, 0, 2); }, 0, ""},
    {"to_cpu_non_blocking",  // the output is pinned
     [](Inputs& in) { (void)in.values.to(at::kCPU, /*non_blocking=*/true); }, 0, ""},
    {"pinned_non_blocking_both_ways",
     [](Inputs& in) {
       at::Tensor pinned = at::ones({5}).pin_memory();
       (void)pinned.to(in.dev, /*non_blocking=*/true);
       pinned.copy_(in.values, /*non_blocking=*/true);
     },
     0, ""},
    {"pageable_non_blocking_h2d", [](Inputs& in) { (void)at::ones({5}).to(in.dev, true); }, 0,
     ""},
};

INSTANTIATE_TEST_SUITE_P(Syncing, SimSyncRules, ::testing::ValuesIn(kSyncing),
                         [](const auto& info) { return info.param.name; });
INSTANTIATE_TEST_SUITE_P(NotSyncing, SimSyncRules, ::testing::ValuesIn(kNotSyncing),
                         [](const auto& info) { return info.param.name; });

// What the reads are: .item() and nonzero's count go into pinned memory, as on CUDA; a
// non-blocking copy into pageable memory is a pageable D2H.
class SimSyncCopies : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { sim::initialize(); }
  static PhaseCounts count(const std::function<void()>& f) {
    EventCollector collector;
    {
      ScopedCollection scope(collector);
      f();
    }
    return collector.snapshot().total();
  }
};

TEST_F(SimSyncCopies, ItemAndNonzeroReadIntoPinnedMemory) {
  const at::Tensor x = Inputs().values;
  const PhaseCounts item = count([&] { (void)x.sum().item<float>(); });
  EXPECT_EQ(item.d2h.count, 1);
  EXPECT_EQ(item.d2h.pinned, 1);
  const PhaseCounts nonzero = count([&] { (void)x.nonzero(); });
  EXPECT_EQ(nonzero.d2h.count, 1);
  EXPECT_EQ(nonzero.d2h.pinned, 1);
  EXPECT_EQ(nonzero.launches, 1);
}

TEST_F(SimSyncCopies, NonBlockingCopyIntoPageableMemoryIsAPageableD2HAndASync) {
  const at::Tensor x = Inputs().values;
  at::Tensor host = at::empty({5});
  const PhaseCounts c = count([&] { host.copy_(x, /*non_blocking=*/true); });
  EXPECT_EQ(c.d2h.count, 1);
  EXPECT_EQ(c.d2h.pinned, 0);
  EXPECT_EQ(c.syncs, 1);
  EXPECT_TRUE(at::equal(host, x.cpu()));
}

}  // namespace
}  // namespace harness

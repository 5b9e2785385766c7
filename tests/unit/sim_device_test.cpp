// One small case per counting rule of the sim device (DESIGN.md, "The counting contract").
#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>
#include <torch/nn/modules/linear.h>

#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "harness/instrument/collector.h"
#include "harness/instrument/memory_ledger.h"
#include "harness/instrument/phase.h"
#include "harness/instrument/sim/sim_device.h"
#include "harness/instrument/site.h"
#include "harness/instrument/trace.h"
#include "harness/measure.h"

namespace harness {
namespace {

class SimDevice : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { sim::initialize(); }
  template <class F>
  PhaseCounts count(F&& f) {
    EventCollector collector;
    {
      ScopedCollection scope(collector);
      f();
    }
    last_ = collector.snapshot();
    return last_.total();
  }
  c10::Device dev0 = sim::device(0);
  c10::Device dev1 = sim::device(1);
  Counts last_;
};

// Two collectors counting at once (harness_sim.count() inside `run`): each gets every event
// while it is on, whatever order their scopes end in.
TEST_F(SimDevice, CollectorsCountingAtOnceEachGetEveryEvent) {
  at::Tensor t = at::full({}, 3.0).to(dev0);
  EventCollector outer, inner;
  {
    auto outer_scope = std::make_unique<ScopedCollection>(outer);
    (void)t.item<double>();                  // outer only
    auto inner_scope = std::make_unique<ScopedCollection>(inner);
    (void)t.item<double>();                  // both
    outer_scope.reset();                     // the outer ends first (not LIFO)
    (void)t.item<double>();                  // inner only
    auto again = std::make_unique<ScopedCollection>(outer);
    ScopedCollection twice(outer);           // already counting: adds nothing
    (void)t.item<double>();                  // both, once each
  }
  (void)t.item<double>();                    // neither
  EXPECT_EQ(outer.snapshot().total().syncs, 3);
  EXPECT_EQ(inner.snapshot().total().syncs, 3);
  EXPECT_EQ(outer.snapshot().total().d2h.count, 3);
  EXPECT_FALSE(events::collecting());
}

TEST_F(SimDevice, ItemIsOneD2HAndOneSync) {
  at::Tensor t = at::full({}, 3.0).to(dev0);
  const PhaseCounts c = count([&] { EXPECT_EQ(t.item<double>(), 3.0); });
  EXPECT_EQ(c.d2h.count, 1);
  EXPECT_EQ(c.d2h.bytes, 4);
  EXPECT_EQ(c.syncs, 1);
  EXPECT_EQ(c.launches, 0);
  ASSERT_EQ(last_.sync_sites.size(), 1u);
  EXPECT_EQ(last_.sync_sites.begin()->first.op, "aten::_local_scalar_dense");
}

TEST_F(SimDevice, BlockingCpuToSimIsOneH2DAndOneSync) {
  at::Tensor cpu = at::ones({4, 4});
  const PhaseCounts c = count([&] { (void)cpu.to(dev0); });
  EXPECT_EQ(c.h2d.count, 1);
  EXPECT_EQ(c.h2d.bytes, 64);
  EXPECT_EQ(c.h2d.pinned, 0);
  EXPECT_EQ(c.syncs, 1);
  EXPECT_EQ(c.launches, 0);
}

TEST_F(SimDevice, BlockingSimToCpuIsOneD2HAndOneSync) {
  at::Tensor s = at::ones({8}).to(dev0);
  const PhaseCounts c = count([&] { EXPECT_EQ(s.cpu().sum().item<float>(), 8.0f); });
  EXPECT_EQ(c.d2h.count, 1);
  EXPECT_EQ(c.d2h.bytes, 32);
  EXPECT_EQ(c.syncs, 1);
}

TEST_F(SimDevice, NonBlockingFromPinnedIsOneH2DAndNoSync) {
  at::Tensor pinned = at::ones({4, 4}).pin_memory();
  ASSERT_TRUE(pinned.is_pinned());
  const PhaseCounts c = count([&] { (void)pinned.to(dev0, /*non_blocking=*/true); });
  EXPECT_EQ(c.h2d.count, 1);
  EXPECT_EQ(c.h2d.pinned, 1);
  EXPECT_EQ(c.syncs, 0);
}

TEST_F(SimDevice, NonBlockingFromPageableIsNotASyncButNotPinned) {
  at::Tensor pageable = at::ones({4});
  const PhaseCounts c = count([&] { (void)pageable.to(dev0, /*non_blocking=*/true); });
  EXPECT_EQ(c.h2d.count, 1);
  EXPECT_EQ(c.h2d.pinned, 0);
  EXPECT_EQ(c.syncs, 0);
}

// What would stop a CUDA graph capture: a sync, a copy from pageable memory, a CPU tensor read
// by a device op; not a pinned non-blocking copy, nor a launch.
TEST_F(SimDevice, CaptureBlockersAreSyncsPageableCopiesAndCpuTensorsRead) {
  at::Tensor s = at::ones({4}).to(dev0);
  at::Tensor pinned = at::ones({4}).pin_memory();
  at::Tensor pageable = at::ones({4});
  at::Tensor scalar = at::full({}, 2.0);
  EXPECT_EQ(count([&] {
              s.add_(1);
              (void)pinned.to(dev0, /*non_blocking=*/true);
            }).capture_blockers,
            0);
  const PhaseCounts c = count([&] {
    (void)s.sum().item<float>();                     // a sync
    (void)pageable.to(dev0, /*non_blocking=*/true);  // staged through pageable memory
    (void)s.mul(scalar);                             // reads a CPU scalar at launch
  });
  EXPECT_EQ(c.capture_blockers, 3);
  const std::vector<EventSite> events = to_event_sites(last_);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, kCaptureBlocker);
  EXPECT_EQ(events[0].what, "CPU tensor read by aten::mul");
  EXPECT_EQ(events[0].count, 1);
}

TEST_F(SimDevice, EventsAreCountedByKindAtTheSiteGiven) {
  const PhaseCounts c = count([&] {
    events::record_event(kGraphBreak, "Tensor.item()", Site{"train.py:9 in step", "", ""});
    events::record_event(kGraphBreak, "Tensor.item()", Site{"train.py:9 in step", "", ""});
    events::record_event(kRecompile, "size of x changed", Site{"train.py:3 in step", "", ""});
    events::record_event("no such kind", "ignored");  // refused, and not counted
  });
  EXPECT_EQ(c.graph_breaks, 2);
  EXPECT_EQ(c.recompiles, 1);
  EXPECT_EQ(c.capture_blockers, 0);
  const std::vector<EventSite> events = to_event_sites(last_);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].kind + " " + events[0].frame + " " + std::to_string(events[0].count),
            "graph_break train.py:9 in step 2");
  EXPECT_EQ(events[1].kind + " " + events[1].what, "recompile size of x changed");
  EventCollector collector;
  EXPECT_THROW(collector.record_event("no such kind", "x"), std::invalid_argument);
}

TEST_F(SimDevice, CrossDeviceCopyIsOneD2D) {
  at::Tensor s = at::arange(6, at::kFloat).to(dev0);
  at::Tensor moved;
  const PhaseCounts c = count([&] { moved = s.to(dev1); });
  EXPECT_EQ(moved.device(), dev1);
  EXPECT_EQ(c.d2d.count, 1);
  EXPECT_EQ(c.d2d.bytes, 24);
  EXPECT_EQ(c.h2d.count + c.d2h.count + c.syncs + c.launches, 0);
  EXPECT_TRUE(at::equal(moved.cpu(), at::arange(6, at::kFloat)));
}

TEST_F(SimDevice, InPlaceAddIsOneLaunchAndNoCopies) {
  at::Tensor s = at::zeros({3}).to(dev0);
  const PhaseCounts c = count([&] { s.add_(2); });
  EXPECT_EQ(c.launches, 1);
  EXPECT_EQ(c.launches_by_op.at("aten::add_"), 1);
  EXPECT_EQ(c.h2d.count + c.d2h.count + c.d2d.count + c.syncs, 0);
  EXPECT_TRUE(at::equal(s.cpu(), at::full({3}, 2.0)));
}

TEST_F(SimDevice, ViewsAreNotLaunches) {
  at::Tensor s = at::ones({4, 6}).to(dev0);
  const PhaseCounts c = count([&] {
    (void)s.view({24});
    (void)s.t();
    (void)s.select(0, 1);
    (void)s.narrow(1, 2, 3);
    (void)s.unsqueeze(0).expand({2, 4, 6});
  });
  EXPECT_EQ(c.launches, 0);
  EXPECT_EQ(c.h2d.count + c.d2h.count + c.d2d.count + c.syncs, 0);
}

TEST_F(SimDevice, AllocationIsNotALaunch) {
  const PhaseCounts c = count([&] { (void)at::empty({16}, at::TensorOptions().device(dev0)); });
  EXPECT_EQ(c.launches, 0);
}

TEST_F(SimDevice, ForeachOpIsOneLaunchPerCall) {
  std::vector<at::Tensor> list;
  for (int i = 0; i < 5; ++i) list.push_back(at::ones({3}).to(dev0));
  const PhaseCounts c = count([&] { at::_foreach_add_(list, 1.0); });
  EXPECT_EQ(c.launches, 1);
  EXPECT_EQ(c.launches_by_op.at("aten::_foreach_add_"), 1);
  EXPECT_TRUE(at::equal(list[4].cpu(), at::full({3}, 2.0)));
}

// The hottest ops run unboxed (sim_unboxed.cpp): each call is still one launch of its own name,
// computes what the CPU computes, and its results are sim tensors of the device.
TEST_F(SimDevice, UnboxedOpsAreOneLaunchAndComputeAsTheCpu) {
  const std::vector<at::Tensor> host = {at::rand({4, 3}) + 0.5, at::rand({7}) + 0.5,
                                        at::rand({}) + 0.5};
  auto on = [](const std::vector<at::Tensor>& list, c10::Device device) {
    std::vector<at::Tensor> out;
    for (const at::Tensor& t : list) out.push_back(t.to(device));
    return out;
  };
  using List = std::vector<at::Tensor>;
  struct Case {
    const char* op;
    std::function<List(List&, List&)> run;  // (self, other) -> what to compare
  };
  const std::vector<Case> cases = {
      {"aten::_foreach_add_", [](List& a, List& b) { at::_foreach_add_(a, b, 0.5); return a; }},
      {"aten::_foreach_lerp_", [](List& a, List& b) { at::_foreach_lerp_(a, b, 0.1); return a; }},
      {"aten::_foreach_mul_",
       [](List& a, List&) { at::_foreach_mul_(a, std::vector<at::Scalar>{2, 3, 4}); return a; }},
      {"aten::_foreach_addcdiv_",
       [](List& a, List& b) { at::_foreach_addcdiv_(a, b, b, -0.25); return a; }},
      {"aten::_foreach_sqrt", [](List& a, List&) { return at::_foreach_sqrt(a); }},
      {"aten::_foreach_norm", [](List& a, List&) { return at::_foreach_norm(a, 2); }},
      {"aten::_foreach_zero_", [](List& a, List&) { at::_foreach_zero_(a); return a; }},
      {"aten::addmm", [](List& a, List& b) { return List{at::addmm(a[1][0], a[0], b[0].t())}; }},
      {"aten::mm", [](List& a, List& b) { return List{at::mm(a[0].t(), b[0])}; }},
      {"aten::add_", [](List& a, List& b) { return List{a[0].add_(b[0], 2)}; }},
      {"aten::mul", [](List& a, List& b) { return List{a[1] * b[1]}; }},
      // A number of the program's: a wrapped number, which the kernel gets as it is.
      {"aten::add_", [](List& a, List&) { return List{a[0].add_(1.5)}; }},
      {"aten::mul", [](List& a, List&) { return List{a[1] * 0.5}; }},
      {"aten::relu", [](List& a, List&) { return List{at::relu(a[0] - 0.75)}; }},
      {"aten::sum", [](List& a, List&) { return List{a[0].sum({1}, true)}; }},
      {"aten::mse_loss", [](List& a, List& b) { return List{at::mse_loss(a[1], b[1] * 0)}; }},
      {"aten::native_layer_norm", [](List& a, List&) { return List{at::layer_norm(a[0], {3})}; }},
      {"aten::fill_", [](List& a, List&) { return List{a[0].fill_(2.5)}; }},
      {"aten::zero_", [](List& a, List&) { return List{a[1].zero_()}; }},
      {"aten::_foreach_addcmul_",  // one list twice: one alias each
       [](List& a, List& b) { at::_foreach_addcmul_(a, b, b, 0.5); return a; }},
  };
  for (const Case& c : cases) {
    List cpu_self = on(host, at::kCPU), cpu_other = on(host, at::kCPU);
    List sim_self = on(host, dev0), sim_other = on(host, dev0);
    const List want = c.run(cpu_self, cpu_other);
    List got;
    const PhaseCounts counts = count([&] { got = c.run(sim_self, sim_other); });
    EXPECT_EQ(counts.launches_by_op.count(c.op), 1u) << c.op;
    EXPECT_EQ(counts.launches_by_op.at(c.op), 1) << c.op;
    ASSERT_EQ(got.size(), want.size()) << c.op;
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].device(), dev0) << c.op;
      // A new result is the CPU kernel's, made a sim tensor where it is: a sim tensor's keys.
      EXPECT_EQ(got[i].key_set(), sim_self[0].key_set()) << c.op << " tensor " << i;
      EXPECT_TRUE(at::allclose(got[i].cpu(), want[i])) << c.op << " tensor " << i;
    }
  }
  // A wrapped number promotes as on the CPU: an integer tensor times 0.5 is a float tensor.
  const at::Tensor ints = at::arange(5, at::kLong);
  const at::Tensor sim_half = ints.to(dev0) * 0.5;
  EXPECT_EQ(sim_half.scalar_type(), at::kFloat);
  EXPECT_TRUE(at::equal(sim_half.cpu(), ints * 0.5));
  // Layer norm's backward without an affine: autograd hands the absent weight over as an
  // undefined tensor in an optional, which the fast path takes as absent.
  const at::Tensor cpu_x = host[0].clone().requires_grad_();
  const at::Tensor sim_x = host[0].to(dev0).requires_grad_();
  at::layer_norm(cpu_x, {3}).pow(2).sum().backward();
  const at::Tensor sim_y = at::layer_norm(sim_x, {3}).pow(2).sum();
  const PhaseCounts backward = count([&] { sim_y.backward(); });
  EXPECT_EQ(backward.launches_by_op.at("aten::native_layer_norm_backward"), 1);
  EXPECT_TRUE(at::allclose(sim_x.grad().cpu(), cpu_x.grad(), 1e-5, 1e-6));
}

// What the unboxed fast path does not take goes to the boxed fallback, with its rules: a host
// scalar tensor is read (a capture blocker, as on CUDA), two devices are refused by name.
TEST_F(SimDevice, UnboxedOpsLeaveHostTensorsAndTwoDevicesToTheFallback) {
  std::vector<at::Tensor> list = {at::ones({3}).to(dev0), at::ones({2}).to(dev0)};
  const PhaseCounts scaled = count([&] { at::_foreach_mul_(list, at::full({}, 3.0)); });
  EXPECT_EQ(scaled.launches, 1);
  EXPECT_EQ(scaled.capture_blockers, 1);
  const std::vector<EventSite> events = to_event_sites(last_);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].what, "CPU tensor read by aten::_foreach_mul_");
  EXPECT_TRUE(at::equal(list[1].cpu(), at::full({2}, 3.0f)));

  // An in-place op gives back the caller's tensor, on either path.
  at::Tensor x = at::ones({3}).to(dev0);
  const at::Tensor y = at::ones({3}).to(dev0);
  EXPECT_EQ(&x.add_(y), &x);                     // unboxed
  EXPECT_EQ(&x.add_(at::full({}, 2.0)), &x);     // a host scalar: the fallback
  EXPECT_EQ(&x.mul_(x), &x);                     // one alias for both arguments
  EXPECT_TRUE(at::equal(x.cpu(), at::full({3}, 16.0f)));

  std::vector<at::Tensor> mixed = {at::ones({3}).to(dev0), at::ones({3}).to(dev1)};
  try {
    at::_foreach_add_(mixed, 1.0);
    ADD_FAILURE() << "tensors of two devices were taken";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("same device"), std::string::npos) << e.what();
  }
}

TEST_F(SimDevice, SameDeviceContiguousCopyIsD2DAndStridedCopyIsALaunch) {
  at::Tensor a = at::ones({4, 4}).to(dev0);
  const PhaseCounts contiguous = count([&] { (void)a.clone(); });
  EXPECT_EQ(contiguous.d2d.count, 1);
  EXPECT_EQ(contiguous.launches, 0);
  const PhaseCounts strided = count([&] { (void)a.t().contiguous(); });
  EXPECT_EQ(strided.d2d.count, 0);
  EXPECT_EQ(strided.launches, 1);
}

// A copy of a tensor's bytes as they are (one dtype and shape, both contiguous) is a memcpy, as
// cudaMemcpyAsync is; a conjugate view, a strided source or an overlap takes the CPU's copy, which
// resolves the view or refuses the overlap as it does on the CPU.
TEST_F(SimDevice, CopiesOfBytesAsTheyAreAndOtherwiseAsTheCpu) {
  const at::Tensor host = at::arange(12.0).reshape({3, 4});
  at::Tensor on_device;
  const PhaseCounts h2d = count([&] { on_device = host.to(dev0); });
  EXPECT_EQ(h2d.h2d.count, 1);
  EXPECT_EQ(h2d.h2d.bytes, 48);
  EXPECT_TRUE(at::equal(on_device.cpu(), host));
  EXPECT_TRUE(at::equal(host.t().to(dev0).cpu(), host.t()));  // strided: the CPU's copy
  EXPECT_TRUE(at::equal(on_device.t().contiguous().cpu(), host.t().contiguous()));

  const at::Tensor complex_host = at::randn({5}, at::kComplexFloat);
  const at::Tensor conjugate = complex_host.to(dev0).conj();
  EXPECT_TRUE(conjugate.is_conj());
  EXPECT_TRUE(at::equal(conjugate.cpu().resolve_conj(), complex_host.conj().resolve_conj()));

  at::Tensor cpu_line = at::arange(8.0);
  at::Tensor sim_line = cpu_line.to(dev0);
  auto overlapping_copy = [](at::Tensor& line) {
    try {
      line.narrow(0, 0, 6).copy_(line.narrow(0, 2, 6));
      return std::string();
    } catch (const c10::Error& e) {
      return std::string(e.what_without_backtrace());
    }
  };
  const std::string on_cpu = overlapping_copy(cpu_line);
  const std::string on_sim = overlapping_copy(sim_line);
  EXPECT_EQ(on_sim.empty(), on_cpu.empty()) << on_sim << " / " << on_cpu;
  EXPECT_TRUE(at::equal(sim_line.cpu(), cpu_line));
}

TEST_F(SimDevice, ExplicitSynchronizeIsASync) {
  const PhaseCounts c = count([&] { sim::synchronize(0); });
  EXPECT_EQ(c.syncs, 1);
}

// The time waited in a sync on sim: the host time inside `.item()` or a blocking copy (the read or
// the copy itself). Only relations are checked: > 0, and within the time around the call.
TEST_F(SimDevice, SyncWaitIsTheHostTimeInsideBlockingCopiesAndZeroForItem) {
  at::Tensor t = at::full({}, 3.0).to(dev0);
  at::Tensor big = at::ones({1 << 20});  // 4 MiB
  int64_t around = 0;
  const PhaseCounts c = count([&] {
    Phase phase("optimizer.step");
    const int64_t begin = trace_clock_ns();
    EXPECT_EQ(t.item<double>(), 3.0);
    (void)big.to(dev0);
    around = trace_clock_ns() - begin;
  });
  EXPECT_EQ(c.syncs, 2);
  EXPECT_EQ(c.timed_syncs, 2);
  EXPECT_GT(c.sync_wait_ns, 0);
  EXPECT_LE(c.sync_wait_ns, around);
  const SyncSiteTally& item =
      last_.sync_sites.at({"optimizer.step", "aten::_local_scalar_dense", "item"});
  const SyncSiteTally& copy =
      last_.sync_sites.at({"optimizer.step", "aten::copy_", "blocking copy H2D"});
  EXPECT_EQ(item.count, 1);
  // Timed, and 0: nothing is ever queued on sim, and one element is read in nanoseconds.
  EXPECT_EQ(item.timed, 1);
  EXPECT_EQ(item.wait_ns, 0);
  EXPECT_EQ(copy.timed, 1);
  EXPECT_GT(copy.wait_ns, 0);  // the 4 MiB copy itself
  EXPECT_EQ(item.wait_ns + copy.wait_ns, c.sync_wait_ns);

  // In the report: each site's wait, and sync.wait_time in every list; no GPU time on sim.
  const std::vector<SyncSite> sites = to_sync_sites(last_);
  ASSERT_EQ(sites.size(), 2u);
  for (const SyncSite& s : sites) {
    ASSERT_TRUE(s.wait_ns.has_value()) << s.reason;
    EXPECT_EQ(*s.wait_ns > 0, s.reason != "item") << s.reason;
  }
  VariantResult v;
  fill_counts(v, last_, 2, true, true);
  EXPECT_EQ(*find_metric(v, "total.sync.wait_time")->value, static_cast<double>(c.sync_wait_ns));
  EXPECT_EQ(*find_metric(v, "per_step.sync.wait_time")->value, c.sync_wait_ns / 2.0);
  EXPECT_EQ(*find_metric(v, "phase[optimizer.step].sync.wait_time")->value,
            static_cast<double>(c.sync_wait_ns));
  EXPECT_EQ(find_metric(v, "total.gpu_time")->value, std::nullopt);
  EXPECT_EQ(find_metric(v, "phase[optimizer.step].gpu_time")->value, std::nullopt);
  EXPECT_EQ(find_metric(v, "phase[optimizer.step].gpu_span")->value, std::nullopt);
}

TEST_F(SimDevice, NonBlockingCopiesWaitForNothingAndSynchronizeIsTimed) {
  at::Tensor pinned = at::ones({64}).pin_memory();
  const PhaseCounts copy = count([&] { (void)pinned.to(dev0, /*non_blocking=*/true); });
  EXPECT_EQ(copy.syncs, 0);
  EXPECT_EQ(copy.sync_wait_ns, 0);
  // Nothing is queued on sim, but the wait is measured (the host time in the call), never a
  // constant: three synchronizes take some nanoseconds.
  const PhaseCounts sync = count([&] {
    for (int i = 0; i < 3; ++i) sim::synchronize(0);
  });
  EXPECT_EQ(sync.syncs, 3);
  EXPECT_EQ(sync.timed_syncs, 3);
  EXPECT_GT(sync.sync_wait_ns, 0);
}

// A sync whose wait was not measured makes its site's and its window's wait unknown (null),
// never a sum that leaves it out.
TEST(SyncWait, AnUntimedSyncMakesTheWaitUnknown) {
  EventCollector collector;
  {
    ScopedCollection scope(collector);
    Phase phase("checkpoint.load");
    events::record_sync("aten::copy_", "blocking copy D2H", 500);
    events::record_sync("aten::copy_", "blocking copy D2H", 700);
    events::record_sync("device.synchronize", "device synchronize");  // not timed
  }
  EXPECT_EQ(collector.sync_wait().ns, 1200);
  EXPECT_FALSE(collector.sync_wait().complete);
  const Counts counts = collector.snapshot();
  const std::vector<SyncSite> sites = to_sync_sites(counts);
  ASSERT_EQ(sites.size(), 2u);
  EXPECT_EQ(sites[0].op, "aten::copy_");
  EXPECT_EQ(sites[0].count, 2);
  EXPECT_EQ(sites[0].wait_ns, 1200);
  EXPECT_EQ(sites[1].wait_ns, std::nullopt);
  VariantResult v;
  fill_counts(v, counts, 1, true, true);
  EXPECT_EQ(find_metric(v, "total.sync.wait_time")->value, std::nullopt);
  EXPECT_EQ(*find_metric(v, "total.sync.count")->value, 3);
  collector.clear();
  EXPECT_TRUE(collector.sync_wait().complete);
  EXPECT_EQ(collector.sync_wait().ns, 0);
}

// The collector finds a sync's site by the addresses of its names (no strings built on the hot
// path): a buffer reused for another reason, or the same op in another phase, is another site.
TEST(SyncSites, SitesFoundByAddressStillSplitByTextAndPhase) {
  EventCollector collector;
  char reason[32];
  {
    ScopedCollection scope(collector);
    Phase phase("forward");
    std::snprintf(reason, sizeof reason, "%s", "item");
    events::record_sync("aten::_local_scalar_dense", reason, 10);
    events::record_sync("aten::_local_scalar_dense", reason, 10);
    std::snprintf(reason, sizeof reason, "%s", "nonzero");  // same address, other text
    events::record_sync("aten::_local_scalar_dense", reason, 10);
    {
      Phase inner("backward");
      events::record_sync("aten::_local_scalar_dense", reason, 10);
    }
  }
  const Counts counts = collector.snapshot();
  ASSERT_EQ(counts.sync_sites.size(), 3u);
  EXPECT_EQ(counts.sync_sites.at({"forward", "aten::_local_scalar_dense", "item"}).count, 2);
  EXPECT_EQ(counts.sync_sites.at({"forward", "aten::_local_scalar_dense", "nonzero"}).count, 1);
  EXPECT_EQ(counts.sync_sites.at({"backward", "aten::_local_scalar_dense", "nonzero"}).count, 1);
  collector.clear();  // the address cache goes with the counts
  {
    ScopedCollection scope(collector);
    Phase phase("forward");
    events::record_sync("aten::_local_scalar_dense", reason, 10);
  }
  EXPECT_EQ(collector.snapshot().sync_sites.size(), 1u);
}

// The collector remembers the last phase (by its scope's serial) and the last sync site: a phase
// name's buffer reused for other text in a new scope, a reason's buffer rewritten in place and
// clear() each miss that memory.
TEST(SyncSites, TheLastPhaseAndSiteAreReusedOnlyForTheSameScopeAndText) {
  EventCollector collector;
  char phase_name[32];
  char reason[32];
  const auto item_read = [&] {
    events::record_copy_and_sync(CopyKind::DeviceToHost, 4, true, 0, false,
                                 "aten::_local_scalar_dense", reason, 0);
  };
  {
    ScopedCollection scope(collector);
    std::snprintf(phase_name, sizeof phase_name, "%s", "forward");
    std::snprintf(reason, sizeof reason, "%s", "item");
    {
      Phase phase(phase_name);
      item_read();
      item_read();
      std::snprintf(reason, sizeof reason, "%s", "mask");  // same address and length
      item_read();
    }
    std::snprintf(phase_name, sizeof phase_name, "%s", "backward");  // same address
    {
      Phase phase(phase_name);
      item_read();
      events::record_launch("aten::add_");
    }
  }
  Counts counts = collector.snapshot();
  EXPECT_EQ(counts.phases.at("forward").syncs, 3);
  EXPECT_EQ(counts.phases.at("forward").d2h.count, 3);
  EXPECT_EQ(counts.phases.at("backward").syncs, 1);
  EXPECT_EQ(counts.phases.at("backward").launches, 1);
  ASSERT_EQ(counts.sync_sites.size(), 3u);
  EXPECT_EQ(counts.sync_sites.at({"forward", "aten::_local_scalar_dense", "item"}).count, 2);
  EXPECT_EQ(counts.sync_sites.at({"forward", "aten::_local_scalar_dense", "mask"}).count, 1);
  EXPECT_EQ(counts.sync_sites.at({"backward", "aten::_local_scalar_dense", "mask"}).count, 1);

  collector.clear();  // the remembered phase and site went with the counts
  {
    ScopedCollection scope(collector);
    item_read();  // no phase open
    item_read();
  }
  counts = collector.snapshot();
  ASSERT_EQ(counts.phases.size(), 1u);
  EXPECT_EQ(counts.phases.at(kNoPhase).syncs, 2);
  EXPECT_EQ(counts.sync_sites.at({kNoPhase, "aten::_local_scalar_dense", "mask"}).count, 2);
}

// A value read named by literals (.item()'s) takes the repeated-sync path by the literals'
// addresses and lengths: a shorter name at the same address is another site; a read that has a
// code site, or comes after clear(), is counted by the general path; both paths' counts agree.
TEST(SyncSites, AValueReadIsFoundByItsLiteralsAddressAndLength) {
  static const char kOp[] = "aten::_local_scalar_dense";
  static const char kReason[] = "item_read";
  const std::string_view op(kOp), reason(kReason), shorter(kReason, 4);  // "item", same address
  EventCollector collector;
  {
    ScopedCollection scope(collector);
    Phase phase("forward");
    events::record_value_read(CopyKind::DeviceToHost, 4, true, op, reason, 0);
    events::record_value_read(CopyKind::DeviceToHost, 4, true, op, reason, 0);
    events::record_value_read(CopyKind::DeviceToHost, 8, true, op, shorter, 0);
    events::record_value_read(CopyKind::DeviceToHost, 4, true, op, reason, 0);
    // The same sync through record_copy_and_sync: one site with the value reads.
    events::record_copy_and_sync(CopyKind::DeviceToHost, 4, true, 0, false, op, reason, 0);
    {
      HARNESS_SITE();
      events::record_value_read(CopyKind::DeviceToHost, 4, true, op, reason, 0);
    }
  }
  Counts counts = collector.snapshot();
  const PhaseCounts& forward = counts.phases.at("forward");
  EXPECT_EQ(forward.syncs, 6);
  EXPECT_EQ(forward.capture_blockers, 6);
  EXPECT_EQ(forward.d2h.count, 6);
  EXPECT_EQ(forward.d2h.bytes, 28);
  EXPECT_EQ(forward.d2h.pinned, 6);
  ASSERT_EQ(counts.sync_sites.size(), 3u);
  EXPECT_EQ(counts.sync_sites.at({"forward", kOp, "item_read"}).count, 4);
  EXPECT_EQ(counts.sync_sites.at({"forward", kOp, "item"}).count, 1);
  int sited = 0;
  for (const auto& [key, tally] : counts.sync_sites) {
    if (key.frame.find("sim_device_test.cpp") != std::string::npos) sited += tally.count;
  }
  EXPECT_EQ(sited, 1);

  collector.clear();  // the remembered sync went with the counts
  {
    ScopedCollection scope(collector);
    events::record_value_read(CopyKind::DeviceToHost, 4, true, op, reason, 0);
    events::record_value_read(CopyKind::DeviceToHost, 4, true, op, reason, 0);
  }
  counts = collector.snapshot();
  EXPECT_EQ(counts.phases.at(kNoPhase).syncs, 2);
  EXPECT_EQ(counts.sync_sites.at({kNoPhase, kOp, "item_read"}).count, 2);
}

// The collector remembers the last launch's counter by its phase's counts and the op name's
// address: other text at the same address, another phase, or clear() each take the map.
TEST(LaunchCounts, TheLastLaunchIsReusedOnlyForTheSamePhaseAndText) {
  EventCollector collector;
  char name[32];
  {
    ScopedCollection scope(collector);
    Phase phase("forward");
    std::snprintf(name, sizeof name, "%s", "aten::add_");
    events::record_launch(name);
    events::record_launch(name);
    std::snprintf(name, sizeof name, "%s", "aten::mul_");  // same address and length
    events::record_launch(name);
    events::record_launch("aten::mm");
    events::record_launch(name);
    {
      Phase inner("backward");
      events::record_launch(name);
    }
    events::record_launch(name);
  }
  Counts counts = collector.snapshot();
  EXPECT_EQ(counts.phases.at("forward").launches, 6);
  EXPECT_EQ(counts.phases.at("forward").launches_by_op.at("aten::add_"), 2);
  EXPECT_EQ(counts.phases.at("forward").launches_by_op.at("aten::mul_"), 3);
  EXPECT_EQ(counts.phases.at("forward").launches_by_op.at("aten::mm"), 1);
  EXPECT_EQ(counts.phases.at("backward").launches_by_op.at("aten::mul_"), 1);
  collector.clear();
  {
    ScopedCollection scope(collector);
    Phase phase("forward");
    events::record_launch(name);
  }
  counts = collector.snapshot();
  EXPECT_EQ(counts.phases.at("forward").launches_by_op.at("aten::mul_"), 1);
  EXPECT_EQ(counts.phases.at("forward").launches, 1);
}

TEST_F(SimDevice, MixingDevicesFailsAsOnCuda) {
  at::Tensor s0 = at::ones({2}).to(dev0);
  at::Tensor s1 = at::ones({2}).to(dev1);
  EXPECT_THROW((void)(s0 + s1), c10::Error);
  EXPECT_THROW((void)(s0 + at::ones({2})), c10::Error);
  EXPECT_NO_THROW((void)(s0 + at::scalar_tensor(1.0)));  // a CPU scalar is fine, as on CUDA
}

TEST_F(SimDevice, EventsGoToTheInnermostPhase) {
  at::Tensor s = at::ones({2}).to(dev0);
  count([&] {
    Phase outer("outer");
    s.add_(1);
    {
      Phase inner("inner");
      (void)s.sum().item<float>();
    }
  });
  EXPECT_EQ(last_.phases.at("outer").launches, 1);
  EXPECT_EQ(last_.phases.at("inner").launches, 1);
  EXPECT_EQ(last_.phases.at("inner").syncs, 1);
  EXPECT_EQ(last_.phases.at("outer").syncs, 0);
}

TEST_F(SimDevice, NothingIsCountedWithoutACollector) {
  at::Tensor s = at::ones({2}).to(dev0);
  EXPECT_FALSE(events::collecting());
  s.add_(1);
  const PhaseCounts c = count([] {});
  EXPECT_EQ(c.launches, 0);
}

TEST_F(SimDevice, ModuleToDeviceAndTrainingStepRun) {
  torch::nn::Linear linear(4, 3);
  PhaseCounts c = count([&] { linear->to(dev0); });
  EXPECT_EQ(linear->weight.device(), dev0);
  EXPECT_EQ(c.h2d.count, 2);  // weight and bias
  at::Tensor x = at::randn({5, 4}).to(dev0);
  c = count([&] {
    at::Tensor loss = linear->forward(x).pow(2).mean();
    loss.backward();
  });
  ASSERT_TRUE(linear->weight.grad().defined());
  EXPECT_EQ(linear->weight.grad().device(), dev0);
  EXPECT_GT(c.launches, 0);
  EXPECT_EQ(c.h2d.count + c.d2h.count + c.syncs, 0);  // a training step stays on the device
}

TEST_F(SimDevice, OutArgumentGrownByTheKernelIsAdopted) {
  at::Tensor a = at::ones({3, 2}).to(dev0);
  at::Tensor out = at::empty({0}, at::TensorOptions().device(dev0));
  at::add_out(out, a, a);
  EXPECT_EQ(out.sizes(), a.sizes());
  EXPECT_EQ(out.device(), dev0);
  EXPECT_TRUE(at::equal(out.cpu(), at::full({3, 2}, 2.0)));
}

// Sites name lines (site.h): a HARNESS_SITE() scope names the syncs and copies made until its
// block ends, the innermost scope wins, and only tensor copies the host waited for or made from
// pageable memory have copy sites (not a pinned non-blocking one, not item()'s read).
TEST_F(SimDevice, SiteScopesNameTheLinesOfSyncsAndCopies) {
  const at::Tensor x = at::ones({4}).to(dev0);
  const at::Tensor pageable = at::ones({4});
  const at::Tensor pinned = at::ones({4}).pin_memory();
  const std::string file = "tests/unit/sim_device_test.cpp:";
  int outer_line = 0, inner_line = 0;
  count([&] {
    Phase phase("step");
    (void)x.sum().item<float>();  // no scope: no frame
    HARNESS_SITE();
    outer_line = __LINE__ - 1;
    (void)x.sum().item<float>();
    (void)pinned.to(dev0, /*non_blocking=*/true);
    {
      HARNESS_SITE();
      inner_line = __LINE__ - 1;
      (void)x.to(at::kCPU);                           // blocking D2H: a sync and a copy site
      (void)pageable.to(dev0, /*non_blocking=*/true);  // staged by CUDA: a pageable copy site
    }
    (void)x.sum().item<float>();
  });
  const std::string outer = file + std::to_string(outer_line) + " in operator()";
  const std::string inner = file + std::to_string(inner_line) + " in operator()";
  std::map<std::string, int64_t> syncs;
  for (const SyncSite& s : to_sync_sites(last_)) {
    EXPECT_EQ(s.library, "");
    syncs[s.reason + " at " + s.frame] += s.count;
  }
  EXPECT_EQ(syncs, (std::map<std::string, int64_t>{{"item at ", 1},
                                                   {"item at " + outer, 2},
                                                   {"blocking copy D2H at " + inner, 1}}));
  const std::vector<CopySite> copies = to_copy_sites(last_);
  ASSERT_EQ(copies.size(), 2u);
  EXPECT_EQ(copies[0].kind + " " + copies[0].how + " " + copies[0].frame, "D2H blocking " + inner);
  EXPECT_EQ(copies[1].kind + " " + copies[1].how + " " + copies[1].frame, "H2D pageable " + inner);
  EXPECT_EQ(copies[0].count, 1);
  EXPECT_EQ(copies[0].bytes, 16);
}

// The fallback keeps each sim tensor's CPU alias for the next op on it (sim_storage.cpp): an
// alias is reused only while it still is one -- the tensor's geometry, storage and bytes
// unchanged -- and keeps no device memory alive.
TEST_F(SimDevice, AKeptAliasFollowsItsTensor) {
  const at::Tensor host = at::arange(6, at::kFloat);
  at::Tensor x = host.to(dev0).view({2, 3});
  EXPECT_TRUE(at::equal((x + 0).cpu(), host.view({2, 3})));  // x's alias is kept now
  x.t_();                                                       // same storage, new strides
  EXPECT_TRUE(at::equal((x + 0).cpu(), host.view({2, 3}).t()));
  x.resize_({4});  // within its bytes: new sizes
  EXPECT_TRUE(at::equal((x + 0).cpu(), host.slice(0, 0, 4)));
  const at::Tensor other = at::full({4}, 7.0f).to(dev0);
  x.set_(other);  // another storage
  EXPECT_TRUE(at::equal((x + 0).cpu(), at::full({4}, 7.0f)));
  at::Tensor out = at::empty({0}, at::TensorOptions().device(dev0));
  (void)(out + 0);                               // out's alias kept, over no bytes
  at::add_out(out, other, other);                // the CPU kernel grows out: new bytes
  EXPECT_TRUE(at::equal((out + 0).cpu(), at::full({4}, 14.0f)));
  // A dead tensor's memory goes back to its device, alias kept or not.
  const int64_t before = memory::stats(0).allocated_bytes;
  {
    const at::Tensor big = at::ones({1 << 16}).to(dev0);
    (void)(big + 0);
    EXPECT_GE(memory::stats(0).allocated_bytes, before + (int64_t{4} << 16));
  }
  EXPECT_EQ(memory::stats(0).allocated_bytes, before);
}

// A step's new tensors come at the addresses of the last step's dead ones: the slot's alias, held
// by no one, is made the new tensor's (its bytes, dtype and geometry), never reused as it was.
// Fails if rebinding keeps the old bytes or the old dtype.
TEST_F(SimDevice, ADeadTensorsAliasIsRemadeForTheNextOne) {
  const std::vector<at::ScalarType> types = {at::kFloat, at::kDouble, at::kLong, at::kComplexFloat};
  for (int i = 0; i < 24; ++i) {
    const at::ScalarType type = types[i % types.size()];
    const int64_t n = 2 + i % 5;
    const at::Tensor host = (at::arange(n * 3, at::kDouble) + i).to(type).view({n, 3});
    at::Tensor x = host.to(dev0);  // often at the TensorImpl address of the last round's x
    if (i % 3 == 1) x = x.t();
    const at::Tensor want = i % 3 == 1 ? host.t() : host;
    EXPECT_TRUE(at::equal((x * 2).cpu(), want * 2)) << "round " << i << ", " << type;
    EXPECT_TRUE(at::equal((x + x).cpu(), want * 2)) << "round " << i << ", " << type;
  }
}

// An alias made under InferenceMode is an inference tensor: kept, it would be updated in place
// outside InferenceMode by a CPU kernel that dispatches per tensor (the foreach ops' loop over
// add_), which torch refuses. A kept alias serves the mode it was made in (Lightning's validation
// before fit did this to DeepSpeed's parameters).
TEST_F(SimDevice, AnAliasMadeInInferenceModeIsNotKeptForNormalMode) {
  std::vector<at::Tensor> list = {at::ones({4}).to(dev0), at::ones({3}).to(dev0)};
  {
    const c10::InferenceMode inference;
    at::_foreach_add_(list, 1.0);
  }
  at::_foreach_add_(list, 1.0);
  EXPECT_TRUE(at::equal(list[0].cpu(), at::full({4}, 3.0f)));
  {
    const c10::InferenceMode inference;
    at::_foreach_add_(list, 1.0);
  }
  EXPECT_TRUE(at::equal(list[1].cpu(), at::full({3}, 4.0f)));
}

// A resolver (harness_sim's: the Python frames) comes before the scopes; where it has nothing to
// say for the thread, the scopes name the site.
bool resolver_answers = true;
bool test_resolver(Site& out) {
  if (!resolver_answers) return false;
  out.frame = "train.py:42 in step";
  out.library = "torch/optim/adam.py:1 in adam";
  return true;
}

TEST_F(SimDevice, AResolverComesBeforeTheScopes) {
  const at::Tensor x = at::ones({4}).to(dev0);
  set_site_resolver(&test_resolver);
  int line = 0;
  count([&] {
    HARNESS_SITE();
    line = __LINE__ - 1;
    resolver_answers = true;
    (void)x.sum().item<float>();
    resolver_answers = false;
    (void)x.sum().item<float>();
  });
  set_site_resolver(nullptr);
  const std::vector<SyncSite> sites = to_sync_sites(last_);
  ASSERT_EQ(sites.size(), 2u);
  EXPECT_EQ(sites[0].frame, "tests/unit/sim_device_test.cpp:" + std::to_string(line) + " in operator()");
  EXPECT_EQ(sites[0].library, "");
  EXPECT_EQ(sites[1].frame, "train.py:42 in step");
  EXPECT_EQ(sites[1].library, "torch/optim/adam.py:1 in adam");
}

}  // namespace
}  // namespace harness

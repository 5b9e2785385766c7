// Data parallel training on real ranks: each test forks its ranks first thing (this binary runs
// no Torch work before forking), joins them through a FileStore, and compares what they trained
// with single-device training on the same global batch. Also the ZeRO partition and the counting
// rules of collectives (issue, wait, bytes) and of cross-device copies.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ATen/ops/ones.h>
#include <ATen/ops/zeros.h>
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/jit/serialization/pickle.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <set>
#include <thread>

#include "harness/instrument/collector.h"
#include "harness/instrument/sim/sim_device.h"
#include "harness/runtime/parallel/data_parallel.h"
#include "harness/runtime/dist/communicator.h"
#include "harness/runtime/dist/counting_backend.h"
#include "harness/runtime/mlp.h"
#include "harness/runtime/trainer.h"
#include "harness/runtime/parallel/zero.h"
#include "tests/unit/dist_support.h"

namespace harness::runtime {
namespace {

using namespace test;  // NOLINT: the shared rank helpers

void train_data_parallel(int rank, int world, const std::string& dir, DataParallelOptions options) {
  auto comm = join_sim(rank, world, dir + "/store");
  MlpRegression model(kModel, AdamOptions{});
  SyntheticRegressionData data({kGlobalBatch, 32, 4, 7, false});
  DataParallelStrategy strategy(*comm, sim::device(rank), std::move(options));
  Trainer trainer(strategy, data, {kSteps, 1});
  trainer.fit(model);
  save_tensors(model.parameters(), dir + "/rank" + std::to_string(rank) + ".pt");
}

void expect_matches_single_device(int world, const DataParallelOptions& options) {
  TempDir tmp;
  ASSERT_TRUE(run_in_processes(1, [&](int) { train_single_device(tmp.path + "/single.pt"); }));
  ASSERT_TRUE(run_in_processes(world, [&](int r) { train_data_parallel(r, world, tmp.path, options); }));
  const auto single = load_tensors(tmp.path + "/single.pt");
  const auto rank0 = load_tensors(tmp.path + "/rank0.pt");
  EXPECT_LT(max_abs_diff(rank0, single), kTolerance);
  for (int r = 1; r < world; ++r) {
    // Every replica holds bitwise the same parameters.
    EXPECT_EQ(max_abs_diff(load_tensors(tmp.path + "/rank" + std::to_string(r) + ".pt"), rank0), 0.0)
        << "rank " << r;
  }
}

TEST(DataParallel, DdpOnTwoRanksMatchesSingleDevice) {
  expect_matches_single_device(2, DataParallelOptions{});
}

TEST(DataParallel, DdpWithSmallBucketsOnFourRanksMatchesSingleDevice) {
  DataParallelOptions o;
  o.bucket_cap_bytes = 4096;  // several buckets
  expect_matches_single_device(4, o);
}

TEST(DataParallel, ZeroPerParameterMatchesSingleDevice) {
  DataParallelOptions o;
  o.zero_adam = AdamOptions{};
  expect_matches_single_device(2, o);
}

TEST(DataParallel, ZeroBucketedForLoopAdamMatchesSingleDevice) {
  DataParallelOptions o;
  o.zero_adam = AdamOptions{};
  o.zero_adam->impl = AdamImpl::ForLoop;
  o.zero_param_broadcast = ParamBroadcast::Bucketed;
  expect_matches_single_device(2, o);
}

TEST(ZeroPartition, LargestFirstToTheLeastLoadedRank) {
  std::vector<at::Tensor> params = {at::zeros({10}), at::zeros({40}), at::zeros({30}),
                                    at::zeros({20})};
  // 40 -> r0, 30 -> r1, 20 -> r1 (30 < 40), 10 -> r0 (40 < 50).
  EXPECT_EQ(partition_parameters(params, 2), (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(partition_parameters(params, 1), (std::vector<int>{0, 0, 0, 0}));
}

// Counting rules of collectives and cross-device copies, on one rank (a group of one).
TEST(CollectiveCounting, IssueWaitAndBytesAndCrossDeviceCopies) {
  TempDir tmp;
  ASSERT_TRUE(run_in_processes(1, [&](int) {
    sim::initialize();
    auto comm = connect({0, 1, 0}, {DeviceKind::Sim, "sim"},
                        {std::chrono::seconds(30), tmp.path + "/store"});
    EventCollector collector;
    {
      ScopedCollection on(collector);
      at::Tensor t = at::ones({8}, at::TensorOptions().device(sim::device(0)));
      comm->broadcast(t, 0);                     // 1 broadcast of 32 bytes, 1 wait
      std::vector<at::Tensor> two{t, t.clone()};  // clone: 1 launch
      comm->all_reduce_sum(two);                 // 1 all_reduce of 64 bytes, 1 wait
      at::Tensor foreign = t.to(sim::device(1));  // D2D to another device: cross-device
      at::Tensor home = t.cpu();                  // D2H from the home device: not cross-device
      at::Tensor away = foreign.cpu();            // D2H from sim:1: cross-device
    }
    const PhaseCounts c = collector.snapshot().total();
    auto expect = [](bool ok, const char* what) {
      if (!ok) throw std::runtime_error(what);
    };
    expect(c.collectives.at("broadcast").count == 1, "one broadcast");
    expect(c.collectives.at("broadcast").bytes == 32, "broadcast bytes");
    expect(c.collectives.at("all_reduce").count == 1, "one all_reduce");
    expect(c.collectives.at("all_reduce").bytes == 64, "all_reduce bytes: both tensors");
    expect(c.collective_waits == 2, "a device-side wait per collective");
    expect(c.syncs == 2, "two blocking D2H copies: waits for collectives on sim tensors are not "
                         "host syncs");
    expect(c.cross_device.count == 2, "the D2D to sim:1 and the D2H from sim:1");
    // clone() is a same-device D2D memcpy, as on CUDA; the copy to sim:1 is the other one.
    expect(c.d2d.count == 2, ("d2d " + std::to_string(c.d2d.count)).c_str());
    expect(c.d2h.count == 2, ("d2h " + std::to_string(c.d2h.count)).c_str());
  }));
}

// Waits as a GPU has them: on sim tensors device-side (not a sync), on CPU tensors and at a
// barrier a host sync; the Work's future holds the caller's (sim) tensors.
TEST(CollectiveCounting, WaitsOnDeviceTensorsAreDeviceSideBarriersAndHostTensorsSync) {
  TempDir tmp;
  ASSERT_TRUE(run_in_processes(1, [&](int) {
    sim::initialize();
    auto store = c10::make_intrusive<c10d::FileStore>(tmp.path + "/store", 1);
    auto backend = c10::make_intrusive<CountingBackend>(
        make_gloo_backend(store, 0, 1, std::chrono::seconds(30)));
    EventCollector collector;
    at::Tensor on_sim = at::ones({4}, at::TensorOptions().device(sim::device(0)));
    at::Tensor on_host = at::ones({4});
    c10::intrusive_ptr<c10::ivalue::Future> future;
    {
      ScopedCollection on(collector);
      std::vector<at::Tensor> sim_list{on_sim}, host_list{on_host};
      auto work = backend->allreduce(sim_list, c10d::AllreduceOptions());
      future = work->getFuture();
      work->wait();                           // device-side
      backend->allreduce(host_list, c10d::AllreduceOptions())->wait();  // Gloo blocks the host
      backend->barrier(c10d::BarrierOptions())->wait();  // the host waits
    }
    future->wait();
    const Counts counts = collector.snapshot();
    const PhaseCounts c = counts.total();
    auto expect = [](bool ok, const std::string& what) {
      if (!ok) throw std::runtime_error(what);
    };
    expect(c.collective_waits == 1, "one device-side wait: " + std::to_string(c.collective_waits));
    expect(c.syncs == 2 && c.collective_syncs == 2, "two host syncs: " + std::to_string(c.syncs));
    std::set<std::string> reasons;
    for (const auto& [site, tally] : counts.sync_sites) reasons.insert(site.op + ":" + site.reason);
    expect(reasons == std::set<std::string>{"all_reduce:collective wait (CPU tensors)",
                                            "barrier:barrier"},
           "sync sites");
    const auto results = future->value().toTensorVector();
    expect(results.size() == 1 && results[0].is_same(on_sim), "the future holds the sim tensor");
  }));
}

}  // namespace
}  // namespace harness::runtime

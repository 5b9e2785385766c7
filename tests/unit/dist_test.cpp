// Data parallel training on real ranks: each test forks its ranks first thing (this binary runs
// no Torch work before forking), joins them through a FileStore, and compares what they trained
// with single-device training on the same global batch. Also the ZeRO partition and the counting
// rules of collectives (issue, wait, bytes) and of cross-device copies.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ATen/ops/arange.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/full.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/tensor.h>
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

// What NCCL runs and Gloo cannot, on two ranks: PREMUL_SUM (torch's FSDP2 with a gradient divide
// factor) is Gloo's sum scaled by the factor; coalesced calls and all_to_all run, each tensor of a
// coalesced call counted as one collective with its bytes, one wait for the call.
TEST(CollectiveCounting, PremulSumAndCoalescedCallsRunAsNcclWouldAndCountEachTensor) {
  TempDir tmp;
  ASSERT_TRUE(run_in_processes(2, [&](int rank) {
    sim::initialize();
    auto store = c10::make_intrusive<c10d::FileStore>(tmp.path + "/store", 2);
    auto backend = c10::make_intrusive<CountingBackend>(
        make_gloo_backend(store, rank, 2, std::chrono::seconds(30)));
    auto expect = [](bool ok, const std::string& what) {
      if (!ok) throw std::runtime_error(what);
    };
    const auto on_sim = at::TensorOptions().device(sim::device(0));
    const auto values = [&](int64_t n, double first) {  // rank r: first + r, first + r + 1, ...
      return (at::arange(n, at::kFloat) + first + rank).to(sim::device(0));
    };
    EventCollector collector;
    {
      ScopedCollection on(collector);
      // all_reduce with PREMUL_SUM(0.5): (x0 + x1) / 2, as NCCL gives it
      std::vector<at::Tensor> x{values(4, 1.0)};
      c10d::AllreduceOptions premul;
      premul.reduceOp = c10d::makeNCCLPreMulSum(0.5);
      backend->allreduce(x, premul)->wait();
      expect(at::equal(x[0].cpu(), at::arange(4, at::kFloat) + 1.5), "premul all_reduce");
      // _reduce_scatter_base with a factor tensor on the device
      at::Tensor in = values(4, 0.0), out = at::zeros({2}, on_sim);
      c10d::ReduceScatterOptions scaled;
      scaled.reduceOp = c10d::makeNCCLPreMulSum(at::full({1}, 0.25).to(sim::device(0)));
      backend->_reduce_scatter_base(out, in, scaled)->wait();
      const at::Tensor summed = (at::arange(4, at::kFloat) * 2 + 1).slice(0, 2 * rank, 2 * rank + 2);
      expect(at::equal(out.cpu(), summed * 0.25), "premul reduce_scatter");
      // reduce_scatter_tensor_coalesced of two tensors (DTensor's redistribution takes this)
      std::vector<at::Tensor> ins{values(4, 0.0), values(2, 10.0)};
      std::vector<at::Tensor> outs{at::zeros({2}, on_sim), at::zeros({1}, on_sim)};
      backend->reduce_scatter_tensor_coalesced(outs, ins, c10d::ReduceScatterOptions())->wait();
      expect(at::equal(outs[1].cpu(), at::full({1}, rank == 0 ? 21.0f : 23.0f)), "coalesced");
      // allgather_into_tensor_coalesced and alltoall_base
      std::vector<at::Tensor> gathered{at::zeros({4}, on_sim)}, mine{values(2, 0.0)};
      backend->allgather_into_tensor_coalesced(gathered, mine, c10d::AllgatherOptions())->wait();
      expect(at::equal(gathered[0].cpu(), at::tensor({0.0f, 1.0f, 1.0f, 2.0f})), "gathered");
      at::Tensor to_all = values(2, 0.0), from_all = at::zeros({2}, on_sim);
      std::vector<int64_t> splits;
      backend->alltoall_base(from_all, to_all, splits, splits, c10d::AllToAllOptions())->wait();
      expect(at::equal(from_all.cpu(), at::tensor({0.0f + rank, 1.0f + rank})), "all_to_all");
    }
    const PhaseCounts c = collector.snapshot().total();
    const auto tally = [&](const std::string& op) {
      const auto it = c.collectives.find(op);
      return it == c.collectives.end() ? std::make_pair(int64_t{0}, int64_t{0})
                                       : std::make_pair(it->second.count, it->second.bytes);
    };
    expect(tally("all_reduce") == std::make_pair(int64_t{1}, int64_t{16}), "all_reduce tally");
    expect(tally("reduce_scatter") == std::make_pair(int64_t{3}, int64_t{16 + 16 + 8}),
           "reduce_scatter: the base call and the two tensors of the coalesced one");
    expect(tally("all_gather") == std::make_pair(int64_t{1}, int64_t{8}), "all_gather tally");
    expect(tally("all_to_all") == std::make_pair(int64_t{1}, int64_t{8}), "all_to_all tally");
    expect(c.collective_waits == 5, "one wait per call: " + std::to_string(c.collective_waits));
  }));
}

}  // namespace
}  // namespace harness::runtime

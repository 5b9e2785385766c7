// Metric on real ranks (forked first thing): what each sync path costs (scalar, equal shapes,
// unequal shapes with padding, a list state), sync without a process group, a checkpoint round
// trip, and the pre-#12193 trainer's sync on save and reset on load.
#include "harness/runtime/metrics/metric.h"

#include <ATen/ops/full.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/zeros.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "harness/instrument/collector.h"
#include "harness/instrument/sim/sim_device.h"
#include "harness/runtime/parallel/data_parallel.h"
#include "harness/runtime/mlp.h"
#include "harness/runtime/trainer.h"
#include "tests/unit/dist_support.h"

namespace harness::runtime {
namespace {

using test::check;
using test::join;

// A metric with one state of each kind the sync distinguishes.
class Probe final : public Metric {
 public:
  enum Kind { Scalar, Vector, List };
  explicit Probe(Kind kind) : Metric("probe"), kind_(kind) {
    if (kind == Scalar) add_state("s", at::zeros({}), Reduction::Sum, true);
    if (kind == Vector) add_state("v", at::zeros({3}), Reduction::Sum, true);
    if (kind == List) add_list_state("l", true);
  }
  void update(const at::Tensor& x, const at::Tensor&, const at::Tensor&) override {
    if (kind_ == Scalar) state("s").add_(x.sum());
    if (kind_ == Vector) state("v").add_(x);
    if (kind_ == List) list_state("l").push_back(x);
  }
  at::Tensor compute() const override {
    if (kind_ == Scalar) return state("s");
    if (kind_ == Vector) return state("v").sum();
    return at::cat(list_state("l")).sum();
  }

 private:
  Kind kind_;
};

struct SyncCost {
  int64_t barriers, all_gathers, h2d, d2h, syncs, waits, launches;
};

// Syncs a Probe on 2 ranks after `updates(rank)` updates of ones(3), counting only the sync.
void expect_sync_cost(Probe::Kind kind, int (*updates)(int), SyncCost expected, double value) {
  test::TempDir tmp;
  ASSERT_TRUE(test::run_in_processes(2, [&](int rank) {
    auto comm = join(rank, 2, tmp.path);
    Probe probe(kind);
    probe.to(sim::device(rank));
    const at::Tensor x = at::ones({3}, at::TensorOptions().device(sim::device(rank)));
    for (int i = 0; i < updates(rank); ++i) probe.update(x, x, x);
    EventCollector collector;
    {
      ScopedCollection on(collector);
      probe.sync(comm.get());
    }
    const PhaseCounts c = collector.snapshot().total();
    auto collective = [&](const char* name) {
      return c.collectives.count(name) ? c.collectives.at(name).count : 0;
    };
    std::string got = "barriers " + std::to_string(collective("barrier")) + ", all_gathers " +
                      std::to_string(collective("all_gather")) + ", h2d " +
                      std::to_string(c.h2d.count) + ", d2h " + std::to_string(c.d2h.count) +
                      ", syncs " + std::to_string(c.syncs) + ", waits " +
                      std::to_string(c.collective_waits) + ", launches " +
                      std::to_string(c.launches) + " (rank " + std::to_string(rank) + ":";
    for (const auto& [op, n] : c.launches_by_op) got += " " + op + " " + std::to_string(n);
    got += ")";
    check(collective("barrier") == expected.barriers &&
              collective("all_gather") == expected.all_gathers && c.h2d.count == expected.h2d &&
              c.d2h.count == expected.d2h && c.syncs == expected.syncs &&
              c.collective_waits == expected.waits && c.launches == expected.launches,
          got);
    check(probe.compute().item<double>() == value,
          "synced value " + std::to_string(probe.compute().item<double>()));
    probe.unsync();
    check(!probe.synced(), "unsync restores the local states");
  }));
}

TEST(MetricSync, ScalarStateIsOneBarrierAndOneGather) {
  // zeros_like x2, stack, sum: 4 launches; the barrier is a host sync, the gather's wait a
  // device-side collective wait.
  expect_sync_cost(
      Probe::Scalar, [](int) { return 2; }, {1, 1, 0, 0, 1, 1, 4}, 12.0);
}

TEST(MetricSync, EqualShapesGatherTheShapesThenTheData) {
  // Shape: 1 blocking H2D; its gather (zeros_like x2); stack, max; eq per rank with one host
  // read each (1 dim); the data's gather (zeros_like x2); stack, sum.
  expect_sync_cost(
      Probe::Vector, [](int) { return 1; },
      {1, 2, 1, 2, /*syncs=*/1 + 1 + 2, /*waits=*/2, /*launches=*/2 + 2 + 2 + 2 + 2}, 6.0);
}

TEST(MetricSync, UnequalShapesArePaddedGatheredAndSliced) {
  // A list state of 1 x 3 elements on rank 0 and 2 x 3 (concatenated: 1 launch) on rank 1. The
  // first comparison fails (one read); the differences come back (one D2H); pad (a launch on
  // rank 0; rank 1, the largest, pads by nothing: a copy), gather; a host read per rank to slice.
  expect_sync_cost(
      Probe::List, [](int rank) { return rank + 1; },
      {1, 2, 1, 1 + 1 + 2, /*syncs=*/1 + 1 + 1 + 1 + 2, /*waits=*/2,
       /*launches=*/0 + 2 + 2 + 1 + 1 + 1 + 2 + 1},
      9.0);
}

TEST(MetricSync, WithoutAProcessGroupSyncIsFree) {
  ASSERT_TRUE(test::run_in_processes(1, [&](int) {
    sim::initialize();
    Probe probe(Probe::Vector);
    probe.to(sim::device(0));
    EventCollector collector;
    {
      ScopedCollection on(collector);
      probe.sync(nullptr);
    }
    check(collector.snapshot().total() == PhaseCounts{}, "sync without ranks cost something");
    check(!probe.synced(), "nothing to unsync");
  }));
}

TEST(MetricCheckpoint, PersistentStatesSurviveASaveAndLoad) {
  test::TempDir tmp;
  ASSERT_TRUE(test::run_in_processes(1, [&](int) {
    sim::initialize();
    MlpConfig config = test::kModel;
    config.metrics = true;
    MlpRegression model(config, AdamOptions{});
    SyntheticRegressionData data({test::kGlobalBatch, 32, 4, 7, false});
    SingleDeviceStrategy strategy(sim::device(0), RestorePolicy::Rebuild);
    Trainer trainer(strategy, data, {3, 1});
    trainer.fit(model);
    trainer.save_checkpoint(tmp.path + "/m.ckpt");
    MlpRegression again(config, AdamOptions{});
    Trainer resumed(strategy, data, {3, 1});
    resumed.fit(again, tmp.path + "/m.ckpt");  // at max_steps already: loads, trains nothing
    for (size_t i = 0; i < model.metrics().size(); ++i) {
      check(at::equal(model.metrics()[i]->compute(), again.metrics()[i]->compute()),
            model.metrics()[i]->name() + " differs after the round trip");
    }
  }));
}

// The pre-#12193 trainer, both modes: ranks other than 0 reset their metrics after a load. With
// fault-tolerant training rank 0's file holds the synced states; by default it holds rank 0's
// own, so rank 1's two steps are lost on resume.
void check_pre_fix_trainer(MetricCheckpointing mode) {
  test::TempDir tmp;
  auto run = [&](int rank, bool resume) {
    auto comm = join(rank, 2, tmp.path + (resume ? "/b" : "/a"));
    MlpConfig config = test::kModel;
    config.metrics = true;
    MlpRegression model(config, AdamOptions{});
    SyntheticRegressionData data({test::kGlobalBatch, 32, 4, 7, false});
    DataParallelStrategy strategy(*comm, sim::device(rank));
    Trainer trainer(strategy, data, {resume ? 3 : 2, 1, mode});
    if (!resume) {
      trainer.fit(model);
      trainer.save_checkpoint(tmp.path + "/m.ckpt");
      return;
    }
    trainer.fit(model, tmp.path + "/m.ckpt");  // one step after the load
    const double rows = static_cast<double>(test::kGlobalBatch / 2);
    const at::Tensor count = model.metrics()[0]->state_dict()[1].second;  // mean_loss.count
    // Rank 0: what its file holds of the first 2 steps, and its own third; rank 1: the third.
    const double saved = mode == MetricCheckpointing::TrainerFaultTolerant ? 4 * rows : 2 * rows;
    check(count.item<double>() == (rank == 0 ? saved + rows : rows),
          "rank " + std::to_string(rank) + " count " + std::to_string(count.item<double>()));
  };
  test::fs::create_directories(tmp.path + "/a");
  test::fs::create_directories(tmp.path + "/b");
  ASSERT_TRUE(test::run_in_processes(2, [&](int r) { run(r, false); }));
  ASSERT_TRUE(test::run_in_processes(2, [&](int r) { run(r, true); }));
}

TEST(MetricCheckpoint, FaultTolerantTrainerSyncsOnSaveAndOtherRanksResetOnLoad) {
  check_pre_fix_trainer(MetricCheckpointing::TrainerFaultTolerant);
}

TEST(MetricCheckpoint, DefaultTrainerSavesRankZerosOwnStatesAndLosesTheOthers) {
  check_pre_fix_trainer(MetricCheckpointing::TrainerDefault);
}

}  // namespace
}  // namespace harness::runtime

// The sharded strategy on real ranks (forked first thing, as in dist_test.cpp): training matches
// single-device training for every set-up path, what one step costs per unit, the unit status
// machine and the engines of trainer stages.
#include <ATen/ops/allclose.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>

#include "harness/instrument/collector.h"
#include "harness/instrument/phase.h"
#include "harness/instrument/sim/sim_device.h"
#include "harness/runtime/llama.h"
#include "harness/runtime/mlp.h"
#include "harness/runtime/sharded/sharded_strategy.h"
#include "harness/runtime/trainer.h"
#include "tests/unit/dist_support.h"

namespace harness::runtime {
namespace {

using test::kGlobalBatch;
using test::kModel;
using test::kSteps;
using test::kTolerance;
namespace fs = std::filesystem;

using test::check;
using test::join;

ShardedOptions options_for(ShardedSetup setup, EnginePolicy engines = EnginePolicy::Reuse) {
  ShardedOptions o;
  o.setup = setup;
  o.engines = engines;
  o.deepspeed_optimizer_setup = true;
  o.init_seed = kModel.seed;
  return o;
}

MlpConfig model_for(ShardedSetup setup, int rank) {
  MlpConfig c = kModel;
  c.materialize = builds_on_host(setup, rank);
  return c;
}

void train_sharded(int rank, int world, const std::string& dir, ShardedSetup setup) {
  auto comm = join(rank, world, dir, std::string("store-") + to_string(setup));
  MlpRegression model(model_for(setup, rank), AdamOptions{});
  SyntheticRegressionData data({kGlobalBatch, 32, 4, 7, false});
  ShardedStrategy strategy(*comm, sim::device(rank), options_for(setup));
  Trainer trainer(strategy, data, {kSteps, 1});
  trainer.fit(model);
  const std::vector<at::Tensor> full = strategy.gather_full_parameters();
  if (rank == 0) test::save_tensors(full, dir + "/" + to_string(setup) + ".pt");
}

// Adam steps the shards with every implementation (each one's own ops, on flat shards).
TEST(Sharded, EveryAdamImplementationMatchesSingleDevice) {
  for (AdamOptions adam : {AdamOptions{.impl = AdamImpl::ForLoop},
                           AdamOptions{.impl = AdamImpl::Fused}, AdamOptions{.capturable = true}}) {
    test::TempDir tmp;
    const std::string name = implementation_name(adam);
    ASSERT_TRUE(test::run_in_processes(
        1, [&](int) { test::train_single_device(tmp.path + "/single.pt", adam); }));
    ASSERT_TRUE(test::run_in_processes(2, [&](int rank) {
      auto comm = join(rank, 2, tmp.path);
      MlpRegression model(kModel, adam);
      SyntheticRegressionData data({kGlobalBatch, 32, 4, 7, false});
      ShardedOptions options = options_for(ShardedSetup::FullThenShard);
      options.adam = adam;
      ShardedStrategy strategy(*comm, sim::device(rank), options);
      Trainer trainer(strategy, data, {kSteps, 1});
      trainer.fit(model);
      const std::vector<at::Tensor> full = strategy.gather_full_parameters();
      if (rank == 0) test::save_tensors(full, tmp.path + "/sharded.pt");
    })) << name;
    EXPECT_LT(test::max_abs_diff(test::load_tensors(tmp.path + "/sharded.pt"),
                                 test::load_tensors(tmp.path + "/single.pt")),
              kTolerance)
        << name;
  }
}

void expect_sharded_matches_single_device(int world) {
  test::TempDir tmp;
  ASSERT_TRUE(
      test::run_in_processes(1, [&](int) { test::train_single_device(tmp.path + "/single.pt"); }));
  const auto single = test::load_tensors(tmp.path + "/single.pt");
  std::vector<at::Tensor> first;
  for (ShardedSetup setup :
       {ShardedSetup::FullThenShard, ShardedSetup::MetaInit, ShardedSetup::Rank0Broadcast}) {
    ASSERT_TRUE(test::run_in_processes(world, [&](int r) {
      train_sharded(r, world, tmp.path, setup);
    })) << to_string(setup);
    const auto trained = test::load_tensors(tmp.path + "/" + to_string(setup) + ".pt");
    EXPECT_LT(test::max_abs_diff(trained, single), kTolerance) << to_string(setup);
    // Every set-up path starts from the same values, so trains to bitwise the same ones.
    if (first.empty()) first = trained;
    EXPECT_EQ(test::max_abs_diff(trained, first), 0.0) << to_string(setup);
  }
}

TEST(Sharded, EverySetupOnTwoRanksMatchesSingleDevice) { expect_sharded_matches_single_device(2); }
TEST(Sharded, EverySetupOnFourRanksMatchesSingleDevice) { expect_sharded_matches_single_device(4); }

// Checkpoints in either format resume to bitwise the parameters of the uninterrupted run.
void train_with_checkpoint(int rank, int world, const std::string& dir, ShardedCheckpoint format,
                           bool resume) {
  auto comm = join(rank, world, dir, resume ? "store-resumed" : "store-straight");
  MlpRegression model(kModel, AdamOptions{});
  SyntheticRegressionData data({kGlobalBatch, 32, 4, 7, false});
  ShardedOptions options = options_for(ShardedSetup::FullThenShard);
  options.checkpoint = format;
  ShardedStrategy strategy(*comm, sim::device(rank), options);
  Trainer trainer(strategy, data, {kSteps, 1});
  fs::create_directories(dir + "/ckpt");
  CheckpointCallback save(dir + "/ckpt", kSteps / 2);
  if (!resume) trainer.add_callback(&save);
  trainer.fit(model, resume ? std::optional<std::string>(save.path_for(kSteps / 2)) : std::nullopt);
  const std::vector<at::Tensor> full = strategy.gather_full_parameters();
  if (rank == 0) test::save_tensors(full, dir + (resume ? "/resumed.pt" : "/straight.pt"));
}

void expect_resume_is_exact(ShardedCheckpoint format) {
  test::TempDir tmp;
  ASSERT_TRUE(test::run_in_processes(
      2, [&](int r) { train_with_checkpoint(r, 2, tmp.path, format, false); }));
  ASSERT_TRUE(test::run_in_processes(
      2, [&](int r) { train_with_checkpoint(r, 2, tmp.path, format, true); }));
  const auto straight = test::load_tensors(tmp.path + "/straight.pt");
  const auto resumed = test::load_tensors(tmp.path + "/resumed.pt");
  EXPECT_EQ(test::max_abs_diff(resumed, straight), 0.0) << to_string(format);
  const std::string saved = tmp.path + "/ckpt/step=" + std::to_string(kSteps / 2) + ".ckpt";
  if (format == ShardedCheckpoint::PerRank) {
    EXPECT_TRUE(fs::exists(saved + "/rank0.ckpt") && fs::exists(saved + "/rank1.ckpt"));
  } else {
    EXPECT_TRUE(fs::is_regular_file(saved));
  }
}

TEST(ShardedCheckpoints, ConsolidatedResumesBitwise) {
  expect_resume_is_exact(ShardedCheckpoint::Consolidated);
}
TEST(ShardedCheckpoints, PerRankResumesBitwise) {
  expect_resume_is_exact(ShardedCheckpoint::PerRank);
}

// A consolidated checkpoint has the single-device layout: a single-device run resumes from it.
TEST(ShardedCheckpoints, ConsolidatedLoadsIntoASingleDeviceRun) {
  test::TempDir tmp;
  ASSERT_TRUE(test::run_in_processes(2, [&](int r) {
    train_with_checkpoint(r, 2, tmp.path, ShardedCheckpoint::Consolidated, false);
  }));
  ASSERT_TRUE(test::run_in_processes(1, [&](int) {
    sim::initialize();
    MlpRegression model(kModel, AdamOptions{});
    SyntheticRegressionData data({kGlobalBatch, 32, 4, 7, false});
    SingleDeviceStrategy strategy(sim::device(0), RestorePolicy::Rebuild);
    Trainer trainer(strategy, data, {kSteps, 1});
    trainer.fit(model, tmp.path + "/ckpt/step=" + std::to_string(kSteps / 2) + ".ckpt");
    test::save_tensors(model.parameters(), tmp.path + "/single.pt");
  }));
  EXPECT_LT(test::max_abs_diff(test::load_tensors(tmp.path + "/single.pt"),
                               test::load_tensors(tmp.path + "/straight.pt")),
            kTolerance);
}

// Per unit and step: one all_gather before forward, one before backward, one reduce_scatter.
TEST(Sharded, OneStepGathersEachUnitTwiceAndReduceScattersItOnce) {
  test::TempDir tmp;
  ASSERT_TRUE(test::run_in_processes(2, [&](int rank) {
    auto comm = join(rank, 2, tmp.path);
    MlpRegression model(kModel, AdamOptions{});
    SyntheticRegressionData data({kGlobalBatch, 32, 4, 7, false});
    ShardedStrategy strategy(*comm, sim::device(rank), options_for(ShardedSetup::FullThenShard));
    Trainer trainer(strategy, data, {2, 1});
    EventCollector collector;
    {
      ScopedCollection on(collector);
      trainer.fit(model);
    }
    const Counts counts = collector.snapshot();
    const int64_t units = 5;  // the Linear layers of 32-64-64-32-16-4
    auto collective = [&](const char* phase, const char* name) {
      const auto& c = counts.phases.at(phase).collectives;
      return c.count(name) ? c.at(name).count : 0;
    };
    check(collective("train.forward", "all_gather") == 2 * units, "forward: a gather per unit");
    check(collective("train.backward", "all_gather") == 2 * units, "backward: a gather per unit");
    check(collective("train.backward", "reduce_scatter") == 2 * units, "a reduce-scatter per unit");
    check(collective("setup", "all_gather") == units, "optimizer set-up gathers each unit once");
    // Each unit's shard: ceil(numel / 2) float32 elements gathered per gather.
    const int64_t shard_bytes = 4 * ((32 * 64 + 64 + 1) / 2);
    check(counts.phases.at("setup").collectives.at("all_gather").bytes >= shard_bytes,
          "gather bytes are the shard's");
  }));
}

// A unit of several parameters (a transformer block, FSDP2's fully_shard unit), gathered in
// bf16: after its forward the gathered bytes are gone but the storage stays (the graph's saved
// parameters are views of it, as FSDP2 resizes the unsharded storage to 0); the backward's gather
// refills it, and float32 gradients reach the float32 shards.
TEST(Sharded, ABlockUnitFreesItsGatheredBytesAfterForwardAndRefillsThemForBackward) {
  test::TempDir tmp;
  ASSERT_TRUE(test::run_in_processes(2, [&](int rank) {
    auto comm = join(rank, 2, tmp.path);
    LlamaConfig config;  // the tiny one: 2 blocks
    config.materialize = false;
    LlamaLM model(config, AdamOptions{});
    ShardedOptions options = options_for(ShardedSetup::MetaInit);
    options.compute_dtype = at::kBFloat16;
    ShardedStrategy strategy(*comm, sim::device(rank), options);
    SyntheticTokenData data(4, config.seq_len, config.vocab_size, 7, false);
    Trainer trainer(strategy, data, {1, 1});
    trainer.setup(model, Stage::Fit);
    std::vector<FlatUnit>& units = strategy.model().units();
    check(units.size() == 4, "units: the embedding, 2 blocks, the head");
    const int device = rank;
    const int64_t before = memory::stats(device).allocated_bytes;
    const at::Tensor loss = model.training_step(strategy.batch_to_device(data.batch(0)));
    int64_t saved_storages = 0;
    for (FlatUnit& unit : units) {
      check(unit.status == UnitStatus::NotAvailable, unit.name + " released after forward");
      check(unit.full.defined() && unit.full.scalar_type() == at::kBFloat16,
            unit.name + " keeps its bf16 gathered tensor");
      check(unit.full.storage().nbytes() == 0, unit.name + "'s gathered bytes freed");
      saved_storages += unit.full.defined();
    }
    check(saved_storages == 4, "every unit's storage kept");
    check(memory::stats(device).allocated_bytes > before, "the forward keeps activations");
    loss.backward();
    for (FlatUnit& unit : units) {
      check(unit.full.storage().nbytes() == 0, unit.name + "'s bytes freed after backward");
      check(unit.shard.grad().defined() && unit.shard.grad().scalar_type() == at::kFloat,
            unit.name + ": a float32 gradient on the shard");
      check(unit.shard.grad().abs().sum().item<double>() > 0, unit.name + ": a gradient");
    }
    // What is left of the step: the shards' gradients, the loss, the rotary tables (cos, sin)
    // -- each a 512-byte multiple -- and nothing gathered.
    auto block = [](int64_t bytes) { return (bytes + 511) / 512 * 512; };
    int64_t expected = block(4) + 2 * block(2 * config.seq_len * config.head_dim());
    for (FlatUnit& unit : units) expected += block(4 * unit.shard_numel);
    const int64_t left = memory::stats(device).allocated_bytes - before;
    check(left == expected, "after backward " + std::to_string(left) + " bytes held, expected " +
                                std::to_string(expected));
  }));
}

// The status machine: a unit left INFLIGHT by one engine's prefetch, met by another engine.
TEST(Sharded, AGatherInAnotherEnginesPrivateRegistryFailsNamingTheUnitAndBothEngines) {
  test::TempDir tmp;
  ASSERT_TRUE(test::run_in_processes(1, [&](int) {
    auto comm = join(0, 1, tmp.path);
    MlpRegression model(kModel, AdamOptions{});
    ShardedStrategy strategy(*comm, sim::device(0), options_for(ShardedSetup::FullThenShard));
    strategy.setup_module(model);
    ShardedModel& sharded = strategy.model();
    ShardedEngine first(sharded, {"first", /*private_registry=*/true, /*prefetch=*/true});
    ShardedEngine second(sharded, {"second", /*private_registry=*/true, /*prefetch=*/true});
    first.fetch(sharded.units()[0], /*prefetch_next=*/true, /*wrap=*/false);
    check(sharded.units()[1].status == UnitStatus::Inflight, "the next unit is prefetched");
    std::string error;
    try {
      second.fetch(sharded.units()[1], false, false);
    } catch (const std::exception& e) {
      error = e.what();
    }
    check(error.find("layer 2 (Linear 64->64) is INFLIGHT") != std::string::npos, error);
    check(error.find("'second'") != std::string::npos && error.find("'first'") != std::string::npos,
          error);
    first.fetch(sharded.units()[1], false, false);  // its own registry has it
    check(sharded.units()[1].status == UnitStatus::Available, "waited for its own gather");
  }));
}

// validate, fit, test on one trainer: hooks and failures of each engine policy.
void stages(EnginePolicy policy, int64_t expected_engines, int64_t expected_hook_sets,
            int64_t expected_sets_after_fit) {
  test::TempDir tmp;
  ASSERT_TRUE(test::run_in_processes(1, [&](int) {
    auto comm = join(0, 1, tmp.path);
    MlpRegression model(kModel, AdamOptions{});
    SyntheticRegressionData data({kGlobalBatch, 32, 4, 7, false});
    ShardedStrategy strategy(*comm, sim::device(0),
                             options_for(ShardedSetup::FullThenShard, policy));
    Trainer trainer(strategy, data, {2, 1});
    trainer.validate(model);
    std::string error;
    int64_t hooks_after_fit = -1;
    try {
      trainer.fit(model);
      hooks_after_fit = static_cast<int64_t>(strategy.model().hooks().size());
      trainer.test(model);
    } catch (const std::exception& e) {
      error = e.what();
    }
    if (policy == EnginePolicy::NewPerStagePrivate) {
      check(error.find("INFLIGHT") != std::string::npos, "expected the #17523 failure: " + error);
      return;
    }
    check(error.empty(), error);
    check(strategy.engines_built() == expected_engines,
          "engines built: " + std::to_string(strategy.engines_built()));
    // DeepSpeed's count: the engine's two, one start-of-forward hook, four per module of the tree
    // (parameterless ones, the layers' Sequential and the root -- the LightningModule -- included).
    const ShardedModel& sharded = strategy.model();
    const int64_t per_engine =
        2 + 1 + 4 * (static_cast<int64_t>(model.module().named_modules().size()) + 1);
    check(per_engine == 47, "hooks an engine registers: " + std::to_string(per_engine));
    check(hooks_after_fit == expected_sets_after_fit * per_engine,
          "hooks after fit: " + std::to_string(hooks_after_fit));
    check(static_cast<int64_t>(sharded.hooks().size()) == expected_hook_sets * per_engine,
          "hooks: " + std::to_string(sharded.hooks().size()));
    check(sharded.hooks_registered() == expected_engines * per_engine &&
              sharded.hooks_removed() == (expected_engines - expected_hook_sets) * per_engine,
          "registered " + std::to_string(sharded.hooks_registered()) + ", removed " +
              std::to_string(sharded.hooks_removed()));
    // Every hook on the module runs once per forward, whichever engine registered it.
    const int64_t before = sharded.hook_calls();
    trainer.validate(model);  // eval_batches (1) forwards
    check(sharded.hook_calls() - before == static_cast<int64_t>(sharded.hooks().size()),
          "hook calls in one forward: " + std::to_string(sharded.hook_calls() - before));
  }));
}

// Lightning clears the module's hooks before an evaluation engine only: the validate engine's
// hooks stay through fit, the test engine's set-up clears the fit engine's.
TEST(ShardedStages, NewEnginePerStageKeepsTheValidateHooksThroughFit) {
  stages(EnginePolicy::NewPerStage, 3, 1, 2);
}
TEST(ShardedStages, PrivateRegistriesFailAtTheFitEngine) {
  stages(EnginePolicy::NewPerStagePrivate, 0, 0, 0);
}
TEST(ShardedStages, ReusedEngineIsBuiltOnce) { stages(EnginePolicy::Reuse, 1, 1, 1); }
TEST(ShardedStages, DestroyedEnginesLeaveOneSetOfHooks) {
  stages(EnginePolicy::DestroyBetween, 3, 1, 1);
}

}  // namespace
}  // namespace harness::runtime

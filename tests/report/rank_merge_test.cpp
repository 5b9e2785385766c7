// merge_rank_results: what rank 0 makes of the ranks' results.
#include <gtest/gtest.h>

#include "harness/report/model/rank_merge.h"

namespace harness {
namespace {

VariantResult variant(const std::string& name, double syncs, std::optional<double> launches,
                      double median_ns) {
  VariantResult v;
  v.name = name;
  v.ran = true;
  v.measured_steps = 5;
  v.per_step = {{"sync.count", syncs, "count", ""}, {"launch.count", launches, "count", ""}};
  v.total = {{"sync.count", syncs * 5, "count", ""}};
  v.phases["optimizer.step"] = {{"sync.count", syncs, "count", ""}};
  v.launches_by_op = {{"aten::add_", 2}};
  v.sync_sites = {{"optimizer.step", "broadcast", "collective wait", 3}};
  v.timing = {{"step_time.median", median_ns, "ns", ""}};
  return v;
}

ScenarioResult scenario(std::vector<VariantResult> variants) {
  ScenarioResult s;
  s.name = "zero_broadcast";
  s.variants = std::move(variants);
  return s;
}

TEST(RankMerge, SumsCountsKeepsSlowestTimingAndAddsPerRankVariants) {
  const ScenarioResult merged = merge_rank_results(
      {scenario({variant("a", 2, 10, 100)}), scenario({variant("a", 3, 10, 300)})});
  ASSERT_EQ(merged.variants.size(), 3u);
  const VariantResult& a = merged.variants[0];
  EXPECT_EQ(a.name, "a");
  EXPECT_EQ(a.axes.at("ranks"), "2");
  EXPECT_EQ(*find_metric(a, "per_step.sync.count")->value, 5);
  EXPECT_EQ(*find_metric(a, "total.sync.count")->value, 25);
  EXPECT_EQ(*find_metric(a, "phase[optimizer.step].sync.count")->value, 5);
  EXPECT_EQ(a.launches_by_op.at("aten::add_"), 4);
  ASSERT_EQ(a.sync_sites.size(), 1u);
  EXPECT_EQ(a.sync_sites[0].count, 6);
  EXPECT_EQ(*find_metric(a, "timing.step_time.median")->value, 300);
  EXPECT_EQ(*find_metric(a, "timing.slowest_rank")->value, 1);
  EXPECT_EQ(merged.variants[1].name, "rank0/a");
  EXPECT_EQ(merged.variants[2].name, "rank1/a");
  EXPECT_EQ(merged.variants[2].axes.at("rank"), "1");
  EXPECT_EQ(*find_metric(merged.variants[2], "per_step.sync.count")->value, 3);
}

// Time waited in syncs and GPU time add up over ranks, as counts do; a phase's GPU span and the
// step-time statistics are the slowest rank's. A site's wait unknown on one rank is unknown.
TEST(RankMerge, SyncWaitAndGpuTimeAreSummedSpansAreTheSlowestRanks) {
  VariantResult r0 = variant("a", 1, 1, 1);
  VariantResult r1 = variant("a", 1, 1, 1);
  r0.total.push_back({"sync.wait_time", 1000, "ns", ""});
  r1.total.push_back({"sync.wait_time", 3000, "ns", ""});
  r0.phases["optimizer.step"].push_back({"gpu_time", 200, "ns", ""});
  r1.phases["optimizer.step"].push_back({"gpu_time", 500, "ns", ""});
  r0.phases["optimizer.step"].push_back({"gpu_span", 400, "ns", ""});
  r1.phases["optimizer.step"].push_back({"gpu_span", 700, "ns", ""});
  r0.sync_sites = {{"optimizer.step", "aten::_local_scalar_dense", "item", 3, 900},
                   {"checkpoint.load", "aten::copy_", "blocking copy D2H", 1, 50}};
  r1.sync_sites = {{"optimizer.step", "aten::_local_scalar_dense", "item", 2, 100},
                   {"checkpoint.load", "aten::copy_", "blocking copy D2H", 1, std::nullopt}};
  const VariantResult a = merge_rank_results({scenario({r0}), scenario({r1})}).variants[0];
  EXPECT_EQ(*find_metric(a, "total.sync.wait_time")->value, 4000);
  EXPECT_EQ(*find_metric(a, "phase[optimizer.step].gpu_time")->value, 700);
  EXPECT_EQ(*find_metric(a, "phase[optimizer.step].gpu_span")->value, 700);
  ASSERT_EQ(a.sync_sites.size(), 2u);
  EXPECT_EQ(a.sync_sites[0].phase, "checkpoint.load");
  EXPECT_EQ(a.sync_sites[0].count, 2);
  EXPECT_EQ(a.sync_sites[0].wait_ns, std::nullopt);
  EXPECT_EQ(a.sync_sites[1].count, 5);
  EXPECT_EQ(a.sync_sites[1].wait_ns, 1000);
}

// Memory levels of a merged variant are summed too (their descriptions say so): the sum of the
// ranks' peaks bounds the peak of all ranks together.
TEST(RankMerge, MemoryIsSummedOverRanksAndNullStaysNull) {
  VariantResult r0 = variant("a", 1, 1, 1);
  VariantResult r1 = variant("a", 1, 1, 1);
  r0.total.push_back({"memory.peak_bytes", 1000, "bytes", ""});
  r1.total.push_back({"memory.peak_bytes", 3000, "bytes", ""});
  r0.phases["setup"] = {{"memory.allocated_bytes", 10, "bytes", ""},
                        {"host_memory.peak_bytes", std::nullopt, "bytes", ""}};
  r1.phases["setup"] = {{"memory.allocated_bytes", 20, "bytes", ""},
                        {"host_memory.peak_bytes", 5, "bytes", ""}};
  const VariantResult a = merge_rank_results({scenario({r0}), scenario({r1})}).variants.at(0);
  EXPECT_EQ(find_metric(a, "total.memory.peak_bytes")->value, 4000);
  EXPECT_EQ(find_metric(a, "phase[setup].memory.allocated_bytes")->value, 30);
  EXPECT_FALSE(find_metric(a, "phase[setup].host_memory.peak_bytes")->value.has_value());
}

TEST(RankMerge, NullOnAnyRankIsNullAndFailuresNameTheRank) {
  VariantResult failed = variant("a", 1, 4, 1);
  failed.ran = false;
  failed.error = "boom";
  failed.correctness = {true, false, "differs"};
  VariantResult fine = variant("a", 1, std::nullopt, 1);
  fine.correctness = {true, true, "equal"};
  const ScenarioResult merged = merge_rank_results({scenario({fine}), scenario({failed})});
  const VariantResult& a = merged.variants[0];
  EXPECT_FALSE(find_metric(a, "per_step.launch.count")->value.has_value());
  EXPECT_FALSE(a.ran);
  EXPECT_EQ(a.error, "rank 1: boom");
  EXPECT_TRUE(a.correctness.checked);
  EXPECT_FALSE(a.correctness.passed);
  EXPECT_NE(a.correctness.detail.find("rank 1: differs"), std::string::npos);
}

TEST(RankMerge, AnExpectedFailureStaysExpectedOnlyIfEveryRankFailedAsExpected) {
  VariantResult expected = variant("v", 0, 0, 1);
  expected.ran = false;
  expected.error = "INFLIGHT";
  expected.expected_failure = "issue";
  VariantResult unexpected = expected;
  unexpected.expected_failure.clear();  // this rank failed some other way
  const ScenarioResult both = merge_rank_results({scenario({expected}), scenario({expected})});
  EXPECT_TRUE(both.variants.at(0).failed_as_expected());
  const ScenarioResult mixed = merge_rank_results({scenario({expected}), scenario({unexpected})});
  EXPECT_FALSE(mixed.variants.at(0).ran);
  EXPECT_FALSE(mixed.variants.at(0).failed_as_expected());
}

TEST(RankMerge, PhaseTimesAreTheSlowestRanksNotASum) {
  VariantResult a = variant("a", 1, 1, 100);
  VariantResult b = variant("a", 1, 1, 100);
  a.phases["optimizer.step"].push_back({"time.median", 40.0, "ns", ""});
  b.phases["optimizer.step"].push_back({"time.median", 70.0, "ns", ""});
  const ScenarioResult merged = merge_rank_results({scenario({a}), scenario({b})});
  EXPECT_EQ(*find_metric(merged.variants[0], "phase[optimizer.step].time.median")->value, 70.0);
  EXPECT_EQ(*find_metric(merged.variants[0], "phase[optimizer.step].sync.count")->value, 2.0);
}

TEST(RankMerge, AVariantRankZeroRanAloneIsKeptAsItIs) {
  VariantResult solo = variant("world1/x", 2, 3, 1);
  solo.axes["ranks"] = "1";
  const ScenarioResult merged = merge_rank_results(
      {scenario({variant("v", 1, 1, 1), solo}), scenario({variant("v", 1, 1, 1)})});
  ASSERT_EQ(merged.variants.size(), 4u);  // v, world1/x, rank0/v, rank1/v
  const VariantResult* kept = find_variant(merged, "world1/x");
  ASSERT_NE(kept, nullptr);
  EXPECT_EQ(kept->per_step.at(0).value, 2);  // not summed
  EXPECT_EQ(find_variant(merged, "rank0/world1/x"), nullptr);
}

TEST(RankMerge, OneRankHasNoPerRankCopiesAndMissingVariantsThrow) {
  EXPECT_EQ(merge_rank_results({scenario({variant("a", 1, 1, 1)})}).variants.size(), 1u);
  EXPECT_THROW(merge_rank_results({scenario({variant("a", 1, 1, 1)}), scenario({})}),
               std::runtime_error);
  EXPECT_THROW(merge_rank_results({}), std::invalid_argument);
}

}  // namespace
}  // namespace harness

// Merging the reports of one command's fresh processes (bench --repetitions).
#include <gtest/gtest.h>

#include "harness/errors.h"
#include "harness/report/model/repetition_merge.h"
#include "tests/report/test_support.h"

namespace harness {
namespace {

const Measurement* timing(const VariantResult& v, const std::string& name) {
  for (const Measurement& m : v.timing) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

// The sample report with `steps` as fresh/foreach's step times, their median and count.
RunReport process_with(const std::vector<double>& steps) {
  RunReport r = sample_report();
  VariantResult& v = sample_variant(r, "fresh/foreach");
  v.samples["step_time"] = steps;
  v.timing = {{"step_time.count", static_cast<double>(steps.size()), "count", ""},
              {"step_time.median", 0.0, "ns", ""},
              {"step_time.max", 0.0, "ns", ""},
              {"cpu_wait.share", 0.1 * static_cast<double>(steps.size()), "ratio", ""}};
  return r;
}

TEST(RepetitionMerge, SamplesFollowOneAnotherAndTheirStatisticsAreTakenAgain) {
  RunReport merged =
      merge_repetitions({process_with({1, 2, 3}), process_with({10, 20}), process_with({5})});
  const VariantResult& v = sample_variant(merged, "fresh/foreach");
  EXPECT_EQ(v.processes, 3);
  EXPECT_EQ(v.samples.at("step_time"), (std::vector<double>{1, 2, 3, 10, 20, 5}));
  EXPECT_EQ(timing(v, "step_time.count")->value, 6.0);
  EXPECT_DOUBLE_EQ(*timing(v, "step_time.median")->value, 4.0);  // of 1 2 3 5 10 20
  EXPECT_DOUBLE_EQ(*timing(v, "step_time.max")->value, 20.0);
  EXPECT_NEAR(*timing(v, "cpu_wait.share")->value, (0.3 + 0.2 + 0.1) / 3, 1e-12);  // the mean
  EXPECT_TRUE(merged.warnings == sample_report().warnings);  // the counts agreed
}

TEST(RepetitionMerge, ACountThatDiffersIsAWarningAndAFailureFails) {
  RunReport second = sample_report();
  VariantResult& v = sample_variant(second, "fresh/foreach");
  for (Measurement& m : v.per_step) {
    if (m.unit != "ns" && m.value) *m.value += 1;
  }
  RunReport merged = merge_repetitions({sample_report(), second});
  ASSERT_FALSE(merged.warnings.empty());
  EXPECT_NE(merged.warnings.back().find("counts differ between processes: "), std::string::npos);
  EXPECT_NE(merged.warnings.back().find("in process 2"), std::string::npos);

  RunReport failed = sample_report();
  VariantResult& f = sample_variant(failed, "fresh/foreach");
  f.ran = false;
  f.error = "out of memory";
  merged = merge_repetitions({sample_report(), failed});
  const VariantResult& m = sample_variant(merged, "fresh/foreach");
  EXPECT_FALSE(m.ran);
  EXPECT_EQ(m.error, "process 2: out of memory");
}

TEST(RepetitionMerge, AProcessThatRanSomethingElseIsNotOneCommand) {
  RunReport other = sample_report();
  other.scenarios.at(0).variants.pop_back();
  EXPECT_THROW(merge_repetitions({sample_report(), other}), InputError);
  EXPECT_THROW(merge_repetitions({}), std::invalid_argument);
}

}  // namespace
}  // namespace harness

// VariantRunner: a failing variant is recorded, and a variant that reproduces a known failure
// passes by failing and fails by running through.
#include "harness/variant_runner.h"

#include <gtest/gtest.h>

#include <stdexcept>

#include "harness/instrument/instrument.h"

namespace harness {
namespace {

class VariantRunnerTest : public ::testing::Test {
 protected:
  std::unique_ptr<Instrument> instrument = make_instrument(DeviceKind::Cpu);
  Progress progress{/*quiet=*/true};
  RunContext context{
      {runtime::DeviceKind::Cpu, "cpu"}, *instrument, RunOptions{}, progress, "/tmp"};
  VariantRunner runner{context, "scenario", {"a"}};
};

TEST_F(VariantRunnerTest, AThrowingVariantIsFailedWithItsError) {
  const VariantResult r =
      runner.run("a", [](VariantResult&) { throw std::runtime_error("boom\ntrace"); });
  EXPECT_FALSE(r.ran);
  EXPECT_FALSE(r.failed_as_expected());
  EXPECT_EQ(r.error, "boom");
}

TEST_F(VariantRunnerTest, AnExpectedFailureThatFailsIsFailedAsExpected) {
  const VariantResult r = runner.run(
      "a", [](VariantResult&) { throw std::runtime_error("INFLIGHT"); }, "issue 1");
  EXPECT_FALSE(r.ran);
  EXPECT_TRUE(r.failed_as_expected());
  EXPECT_EQ(r.error, "INFLIGHT");
  EXPECT_EQ(r.expected_failure, "issue 1");
}

TEST_F(VariantRunnerTest, AnExpectedFailureThatRunsThroughIsAFailure) {
  const VariantResult r = runner.run(
      "a", [](VariantResult&) {}, "issue 1");
  EXPECT_FALSE(r.ran);
  EXPECT_FALSE(r.failed_as_expected());
  EXPECT_NE(r.error.find("expected to fail (issue 1) but it ran to the end"), std::string::npos)
      << r.error;
}

}  // namespace
}  // namespace harness

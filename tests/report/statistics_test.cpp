// The statistics of time comparisons against values computed independently: p-values from
// scipy.stats.mannwhitneyu (scipy 1.10.1, Debian 12's python3-scipy), the Hodges-Lehmann ratio
// and its interval by brute force in Python (every pairwise ratio sorted; k from scipy's own
// exact distribution of U, or from the normal quantile). The script is in the comment of each
// sample; the numbers are pinned.
#include <gtest/gtest.h>

#include <cmath>

#include "harness/report/compare/statistics.h"

namespace harness {
namespace {

// A: 12 vs 10, no ties. B: 10 vs 11 small integers, many ties. C, D: 600 vs 600 from formulas
// (integers, ties), large enough for the normal approximation.
const std::vector<double> kAHead = {12.1, 13.4, 11.8, 14.2, 13.9, 12.7,
                                    15.1, 13.3, 14.8, 12.9, 13.6, 14.4};
const std::vector<double> kABase = {11.2, 12.0, 11.5, 12.6, 11.9, 12.3, 11.1, 12.8, 11.7, 12.2};
const std::vector<double> kBHead = {5, 7, 7, 9, 10, 6, 8, 8, 11, 7};
const std::vector<double> kBBase = {6, 6, 7, 8, 5, 9, 7, 6, 5, 8, 6};

std::vector<double> formula(double offset, int multiplier, int modulus) {
  std::vector<double> out;
  for (int i = 0; i < 600; ++i) out.push_back(offset + (i * multiplier) % modulus);
  return out;
}
const std::vector<double> kCHead = formula(1003, 53, 97);
const std::vector<double> kCBase = formula(1000, 37, 101);
const std::vector<double> kDHead = formula(1010, 53, 97);

void expect_relative(double actual, double expected, double tolerance) {
  EXPECT_NEAR(actual, expected, std::fabs(expected) * tolerance) << "expected " << expected;
}

// scipy.stats._mannwhitneyu._mwu_state.pmf(np.arange(64), 7, 9)
TEST(MannWhitneyPmf, MatchesScipysExactDistribution) {
  const std::vector<double> pmf = mann_whitney_pmf(7, 9);
  ASSERT_EQ(pmf.size(), 64u);
  const double expected[] = {8.7412587412587413e-05, 8.7412587412587413e-05,
                             0.00017482517482517483, 0.00026223776223776224,
                             0.00043706293706293706, 0.00061188811188811194};
  for (size_t u = 0; u < 6; ++u) expect_relative(pmf[u], expected[u], 1e-12);
  expect_relative(pmf[31], 0.040909090909090909, 1e-12);
  double sum = 0;
  for (double p : pmf) sum += p;
  EXPECT_NEAR(sum, 1.0, 1e-12);
  EXPECT_EQ(mann_whitney_pmf(9, 7), pmf);  // symmetric in the sizes
}

TEST(MannWhitneyPmf, StaysAccurateForLargeSamples) {
  // 200 vs 200: C(400, 200) is about 1e119; the normalised recurrence keeps it in range.
  const std::vector<double> pmf = mann_whitney_pmf(200, 200);
  double sum = 0;
  for (double p : pmf) sum += p;
  EXPECT_NEAR(sum, 1.0, 1e-9);
  EXPECT_NEAR(pmf[0], std::exp(-(std::lgamma(401.0) - 2 * std::lgamma(201.0))), 1e-130);
  EXPECT_DOUBLE_EQ(pmf[19999], pmf[20001]);
}

// mannwhitneyu(A_h, A_b, alternative='greater'|'less', method='exact')
TEST(MannWhitneyU, ExactWithoutTiesMatchesScipy) {
  const MannWhitney t = mann_whitney_u(kAHead, kABase);
  EXPECT_TRUE(t.exact);
  EXPECT_EQ(t.u_head, 109.0);
  expect_relative(t.p_greater, 0.0003000095879352845, 1e-9);
  expect_relative(t.p_less, 0.99978504467668594, 1e-12);
  expect_relative(t.min_p, 1.0 / 646646, 1e-12);  // C(22, 10)
}

// With ties scipy's exact method uses floor(U) (U = 76.5 here), as we do.
TEST(MannWhitneyU, ExactWithTiesMatchesScipy) {
  const MannWhitney t = mann_whitney_u(kBHead, kBBase);
  EXPECT_TRUE(t.exact);
  EXPECT_EQ(t.u_head, 76.5);
  expect_relative(t.p_greater, 0.075868404041778664, 1e-9);
  expect_relative(t.p_less, 0.94276698533664494, 1e-12);
}

// E: 40 vs 45 (one tie): E_h = [100 + ((i*53) % 97) * 0.37 for i in range(40)],
// E_b = [95 + ((i*37) % 101) * 0.31 for i in range(45)]; method='exact'.
TEST(MannWhitneyU, ExactForMediumSamplesMatchesScipy) {
  std::vector<double> head, base;
  for (int i = 0; i < 40; ++i) head.push_back(100 + ((i * 53) % 97) * 0.37);
  for (int i = 0; i < 45; ++i) base.push_back(95 + ((i * 37) % 101) * 0.31);
  const MannWhitney t = mann_whitney_u(head, base);
  EXPECT_TRUE(t.exact);
  EXPECT_EQ(t.u_head, 1201.5);
  expect_relative(t.p_greater, 0.0038431329065873286, 1e-9);
  expect_relative(t.p_less, 0.99636013613022578, 1e-12);
}

// mannwhitneyu(C_h, C_b, ..., method='asymptotic'): tie and continuity corrections.
TEST(MannWhitneyU, AsymptoticForLargeSamplesMatchesScipy) {
  const MannWhitney c = mann_whitney_u(kCHead, kCBase);
  EXPECT_FALSE(c.exact);
  EXPECT_EQ(c.u_head, 183017.0);
  expect_relative(c.p_greater, 0.30763476890078878, 1e-9);
  expect_relative(c.p_less, 0.69242380931313019, 1e-9);
  const MannWhitney d = mann_whitney_u(kDHead, kCBase);
  EXPECT_EQ(d.u_head, 207310.0);
  expect_relative(d.p_greater, 2.6834967149187914e-06, 1e-7);
}

TEST(MannWhitneyU, EmptyOrConstantSamplesGiveNoEvidence) {
  EXPECT_EQ(mann_whitney_u({}, kABase).p_greater, 1.0);
  const std::vector<double> same(600, 5.0);
  const MannWhitney t = mann_whitney_u(same, same);
  EXPECT_EQ(t.p_greater, 1.0);
  EXPECT_EQ(t.p_less, 1.0);
}

// Brute force: sorted([h / b for h in H for b in B]); median; [r[k-1], r[N-k]].
TEST(HodgesLehmann, ExactIntervalMatchesBruteForce) {
  const RatioEstimate a = hodges_lehmann_ratio(kAHead, kABase);
  expect_relative(*a.ratio, 1.1353403540903542, 1e-12);
  expect_relative(*a.low, 1.0625, 1e-12);  // k = 30
  expect_relative(*a.high, 1.2072072072072073, 1e-12);
  const RatioEstimate b = hodges_lehmann_ratio(kBHead, kBBase);
  expect_relative(*b.ratio, 1.1666666666666667, 1e-12);
  expect_relative(*b.low, 1.0, 1e-12);  // k = 27
  expect_relative(*b.high, 1.3999999999999999, 1e-12);
}

TEST(HodgesLehmann, NormalIntervalForLargeSamplesMatchesBruteForce) {
  const RatioEstimate c = hodges_lehmann_ratio(kCHead, kCBase);
  expect_relative(*c.ratio, 1.0009389671361502, 1e-12);
  expect_relative(*c.low, 0.99801587301587302, 1e-12);  // k = 168235
  expect_relative(*c.high, 1.0038759689922481, 1e-12);
  const RatioEstimate d = hodges_lehmann_ratio(kDHead, kCBase);
  expect_relative(*d.ratio, 1.0075117370892019, 1e-12);
  expect_relative(*d.low, 1.0045578851412944, 1e-12);
  expect_relative(*d.high, 1.0106589147286822, 1e-12);
}

TEST(HodgesLehmann, TooFewSamplesHaveNoIntervalAndBadTimesNoRatio) {
  const RatioEstimate tiny = hodges_lehmann_ratio({2, 3}, {1, 2});
  EXPECT_TRUE(tiny.ratio.has_value());
  EXPECT_FALSE(tiny.low.has_value());  // P(U = 0) = 1/6 > 0.025
  EXPECT_FALSE(hodges_lehmann_ratio({0, 1}, {1, 2}).ratio.has_value());
  EXPECT_FALSE(hodges_lehmann_ratio({}, {1, 2}).ratio.has_value());
}

TEST(CompareTimes, SlowerAndSignificantIsARegression) {
  const TimeComparison c = compare_times(kAHead, kABase, {});
  EXPECT_EQ(c.verdict, TimeVerdict::Regression) << c.reason;  // ratio 1.135 > 1.10, p 0.0003
  EXPECT_NE(c.reason.find("p 3.0e-04 < 0.010"), std::string::npos) << c.reason;
  // The same pair the other way round is an improvement.
  EXPECT_EQ(compare_times(kABase, kAHead, {}).verdict, TimeVerdict::Improvement);
}

TEST(CompareTimes, SignificantButSmallIsUnchanged) {
  const TimeComparison c = compare_times(kDHead, kCBase, {});
  EXPECT_EQ(c.verdict, TimeVerdict::Unchanged);  // p 2.7e-6, but the ratio is 1.0075
  EXPECT_NE(c.reason.find("significant but within 1.10x"), std::string::npos) << c.reason;
  TimeTestOptions strict;
  strict.max_ratio = 1.005;
  EXPECT_EQ(compare_times(kDHead, kCBase, strict).verdict, TimeVerdict::Regression);
}

TEST(CompareTimes, NoiseIsUnchanged) {
  EXPECT_EQ(compare_times(kCHead, kCBase, {}).verdict, TimeVerdict::Unchanged);
}

TEST(MachineDrift, ATimeThatMovedWithTheMachineProbeIsTheMachines) {
  // Both runs' probes: the head's machine 1.8x slower, significantly (10 vs 10, no overlap).
  const std::vector<double> base_probe = {20, 21, 20.5, 19.8, 20.2, 20.9, 21.1, 19.9, 20.4, 20.6};
  std::vector<double> head_probe = base_probe;
  for (double& x : head_probe) x *= 1.8;
  TimeTestOptions options;
  options.max_ratio = 2.0;
  // A step 2.5x slower: 1.39x the machine's move, within 2.0x.
  const std::string why = machine_drift(2.5, &head_probe, &base_probe, options);
  EXPECT_NE(why.find("the machine itself was slower in head's run"), std::string::npos) << why;
  EXPECT_NE(why.find("moved 1.800 ["), std::string::npos) << why;
  EXPECT_NE(why.find("is 1.389x that, within 2.00x"), std::string::npos) << why;
  // 4x slower is beyond the machine's move: the code's.
  EXPECT_EQ(machine_drift(4.0, &head_probe, &base_probe, options), "");
  // Faster the same way: an improvement that is the machine's.
  EXPECT_NE(machine_drift(1 / 2.5, &base_probe, &head_probe, options).find("faster"),
            std::string::npos);
  // A probe that did not move (the same samples) explains nothing.
  EXPECT_EQ(machine_drift(2.5, &base_probe, &base_probe, options), "");
  // No probe on a side (a report before schema 1.6), or too few samples: nothing either.
  EXPECT_EQ(machine_drift(2.5, nullptr, &base_probe, options), "");
  options.min_samples = 11;
  EXPECT_EQ(machine_drift(2.5, &head_probe, &base_probe, options), "");
}

TEST(CompareTimes, TooFewSamplesAreInconclusive) {
  TimeTestOptions options;
  options.min_samples = 11;
  const TimeComparison few = compare_times(kAHead, kABase, options);  // 10 on the base side
  EXPECT_EQ(few.verdict, TimeVerdict::Inconclusive);
  EXPECT_NE(few.reason.find("fewer than min_samples 11"), std::string::npos) << few.reason;
  // 3 vs 3 can never reach p < 0.01: the smallest possible p is 1/20.
  options.min_samples = 3;
  const TimeComparison small = compare_times({9, 9.5, 10}, {1, 1.5, 2}, options);
  EXPECT_EQ(small.verdict, TimeVerdict::Inconclusive);
  EXPECT_NE(small.reason.find("smallest possible p 0.050"), std::string::npos) << small.reason;
}

// Three processes a side, 12 steps each: each process's steps around its own level (a shift
// between processes that its steps cannot show), with a little noise within.
std::vector<double> processes_at(const std::vector<double>& levels) {
  std::vector<double> out;
  for (double level : levels) {
    for (int i = 0; i < 12; ++i) out.push_back(level * (1 + 0.002 * ((i * 7) % 12)));
  }
  return out;
}

TEST(CompareTimesBetweenRuns, OneProcessASideCannotTellAShiftFromAChange) {
  // Every step of head 1.4x slower: within one run that is a regression...
  const std::vector<double> base = processes_at({100}), head = processes_at({140});
  EXPECT_EQ(compare_times(head, base, {}).verdict, TimeVerdict::Regression);
  // ...between two runs of one process each, a shift between processes could be all of it.
  const TimeComparison c = compare_times(head, base, {}, ProcessCounts{1, 1});
  EXPECT_EQ(c.verdict, TimeVerdict::Inconclusive) << c.reason;
  EXPECT_NE(c.reason.find("1 vs 1 process(es), fewer than min_processes 3"), std::string::npos)
      << c.reason;
  EXPECT_NE(c.reason.find("bench --repetitions 3"), std::string::npos) << c.reason;
}

TEST(CompareTimesBetweenRuns, ProcessesApartAreAChange) {
  // 1.3x slower, the processes of each side within 4 % of each other.
  const std::vector<double> base = processes_at({100, 103, 98}), head = processes_at({130, 127, 132});
  const TimeComparison c = compare_times(head, base, {}, ProcessCounts{3, 3});
  EXPECT_EQ(c.verdict, TimeVerdict::Regression) << c.reason;
  EXPECT_NE(c.reason.find("every process apart by more than 1.10x"), std::string::npos) << c.reason;
  EXPECT_EQ(compare_times(base, head, {}, ProcessCounts{3, 3}).verdict, TimeVerdict::Improvement);
}

TEST(CompareTimesBetweenRuns, ProcessesThatOverlapAreTheVariationBetweenRuns) {
  // Two runs of the same code: one process of head landed 66 % slower (the seen case); its
  // steps are 10 of 10 slower than base's, p tiny, yet the other processes overlap.
  const std::vector<double> base = processes_at({100, 101, 99}), head = processes_at({166, 150, 101});
  const TimeComparison one_each = compare_times(processes_at({166}), processes_at({100}), {});
  EXPECT_EQ(one_each.verdict, TimeVerdict::Regression);  // what within-run statistics say
  const TimeComparison c = compare_times(head, base, {}, ProcessCounts{3, 3});
  EXPECT_EQ(c.verdict, TimeVerdict::Inconclusive) << c.reason;
  EXPECT_NE(c.reason.find("3 vs 3 process(es) overlap within 1.10x"), std::string::npos)
      << c.reason;
  // Apart, but by less than max_ratio between the nearest processes: still not a verdict.
  const TimeComparison near = compare_times(processes_at({125, 108, 125}), processes_at({100, 100, 100}),
                                            {}, ProcessCounts{3, 3});
  EXPECT_EQ(near.verdict, TimeVerdict::Inconclusive) << near.reason;
  // No effect at all stays unchanged, with or without processes.
  EXPECT_EQ(compare_times(base, base, {}, ProcessCounts{3, 3}).verdict, TimeVerdict::Unchanged);
  // min_processes is an option.
  TimeTestOptions two;
  two.min_processes = 2;
  EXPECT_EQ(compare_times(processes_at({130, 131}), processes_at({100, 99}), two,
                          ProcessCounts{2, 2}).verdict,
            TimeVerdict::Regression);
}

TEST(ProcessMedians, EachProcessItsOwnPart) {
  EXPECT_EQ(process_medians({1, 2, 3, 10, 20, 30}, 2), (std::vector<double>{2, 20}));
  EXPECT_EQ(process_medians({1, 2, 3, 4, 5, 6, 7}, 1), (std::vector<double>{4}));
  EXPECT_TRUE(process_medians({}, 3).empty());
}

TEST(CompareTimes, ARiseFromZeroIsARise) {
  // A sync wait of 0 in every base step and 50 ms in every head step: no ratio can be formed
  // (a time of 0), yet it is the largest rise there is.
  const std::vector<double> base(12, 0.0);
  std::vector<double> head;
  for (int i = 0; i < 12; ++i) head.push_back(50e6 + i * 1e3);
  const TimeComparison c = compare_times(head, base, {});
  EXPECT_EQ(c.verdict, TimeVerdict::Regression) << c.reason;
  EXPECT_NE(c.reason.find("from 0 to a median of"), std::string::npos) << c.reason;
  EXPECT_EQ(compare_times(base, head, {}).verdict, TimeVerdict::Improvement);
  // Between runs it needs the processes too: 3 a side, apart.
  std::vector<double> base3(36, 0.0), head3;
  for (int i = 0; i < 36; ++i) head3.push_back(50e6 + i * 1e3);
  EXPECT_EQ(compare_times(head3, base3, {}, ProcessCounts{3, 3}).verdict, TimeVerdict::Regression);
  // Zeros on both sides in most steps, a few small waits: not a rise.
  std::vector<double> mostly_zero(12, 0.0);
  mostly_zero[3] = 100;
  EXPECT_EQ(compare_times(mostly_zero, base, {}).verdict, TimeVerdict::Unchanged);
}

}  // namespace
}  // namespace harness

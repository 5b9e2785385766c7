// What a history accepts (harness/report/history/values.h): dates that exist, labels without
// control characters, values that can be, every variant once.
#include <gtest/gtest.h>

#include <string>

#include "harness/errors.h"
#include "harness/report/history/values.h"

namespace harness::history {
namespace {

// The InputError's message of `f`, or "" when it throws none.
template <typename F>
std::string refusal(F f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(HistoryValues, DatesAreNormalisedToUtc) {
  EXPECT_EQ(utc_date("2026-02-01T08:00:00+02:00"), "2026-02-01T06:00:00Z");
  EXPECT_EQ(utc_date("2026-05-01"), "2026-05-01T00:00:00Z");
  EXPECT_EQ(utc_date("2024-02-29 23:59:59.125Z"), "2024-02-29T23:59:59Z");
  EXPECT_EQ(utc_date("2026-12-31T23:30-01:00"), "2027-01-01T00:30:00Z");
  EXPECT_EQ(utc_date(""), "");
}

TEST(HistoryValues, DatesThatDoNotExistAreRefused) {
  for (const char* bad : {"2026-02-30", "2026-02-29", "2026-04-31", "2026-13-01", "2026-00-10",
                          "0000-01-01", "2026-01-01T24:00", "2026-01-01T12:60", "2026-01-01T23:59:60Z",
                          "2026-01-01T12:00+25:00", "2026-01-01T12:00+01:60", "-001-01-01",
                          " 2026-01-01", "2026-1-01", "2026-01-01T12:00:00Zjunk", "2026-01-01T"}) {
    const std::string why = refusal([&] { utc_date(bad); });
    EXPECT_NE(why.find(std::string("date '") + bad + "'"), std::string::npos) << bad << ": " << why;
  }
}

TEST(HistoryValues, ControlCharactersAreEscaped) {
  EXPECT_EQ(escaped("main"), "main");
  EXPECT_EQ(escaped("a\nb\x1b[31m\x7f"), "a\\x0ab\\x1b[31m\\x7f");
}

RunReport report_with(double count, double time) {
  RunReport r;
  r.provenance.git_sha = "abc";
  r.provenance.started_at = "2026-01-01T00:00:00Z";
  VariantResult v;
  v.name = "fresh/foreach";
  v.ran = true;
  v.per_step.push_back({"sync.count", count, "count", ""});
  v.timing.push_back({"step_time.median", time, "ns", ""});
  r.scenarios.push_back({"resume_adam", "", "", {}, 1, {v}, {}});
  return r;
}

TEST(HistoryValues, ValuesThatCannotBeAreRefusedByName) {
  EXPECT_EQ(refusal([] { check_report_values(report_with(20, 1e6), "r.json"); }), "");
  EXPECT_EQ(refusal([] { check_report_values(report_with(-3, 1e6), "r.json"); }),
            "report 'r.json': resume_adam fresh/foreach per_step.sync.count = -3 is negative: a "
            "count cannot be");
  EXPECT_NE(refusal([] { check_report_values(report_with(20, 1e200), "r.json"); })
                .find("timing.step_time.median = 1e+200 is beyond any time"),
            std::string::npos);
  EXPECT_NE(refusal([] { check_report_values(report_with(20, -1), "r.json"); }).find("negative"),
            std::string::npos);
}

TEST(HistoryValues, AVariantTwiceIsRefusedByName) {
  RunReport r = report_with(20, 1e6);
  r.scenarios[0].variants.push_back(r.scenarios[0].variants[0]);
  EXPECT_EQ(refusal([&] { check_report_values(r, "r.json"); }),
            "report 'r.json' holds variant 'fresh/foreach' of scenario 'resume_adam' twice: which "
            "one to keep?");
}

TEST(HistoryValues, LabelsWithControlCharactersAreRefused) {
  const RunReport r = report_with(20, 1e6);
  EXPECT_EQ(run_of(r, {}, "r.json").commit, "abc");
  EXPECT_EQ(refusal([&] { run_of(r, {"abc\n  REGRESSION forged", "", ""}, "r.json"); }),
            "commit 'abc\\x0a  REGRESSION forged' of report 'r.json' holds a control character (a "
            "newline, an escape): not a commit");
  EXPECT_NE(refusal([&] { run_of(r, {"", "main\x1b[2J", ""}, "r.json"); }).find("branch 'main\\x1b[2J'"),
            std::string::npos);
  EXPECT_NE(refusal([&] { run_of(r, {"", "", "2026-02-30"}, "r.json"); }).find("date '2026-02-30'"),
            std::string::npos);
}

}  // namespace
}  // namespace harness::history

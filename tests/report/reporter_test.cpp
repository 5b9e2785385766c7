// Reporters: the console table, the markdown and JSON files, and forwarding by MultiReporter.
#include "harness/report/text/reporter.h"

#include <gtest/gtest.h>

#include <regex>
#include <sstream>

#include "harness/report/text/format.h"
#include "harness/report/io/json_report.h"
#include "test_support.h"

namespace harness {
namespace {

// Feeds a whole run, event by event, to `reporter`.
void replay(Reporter& reporter, const RunReport& report) {
  reporter.on_run_start(report.provenance);
  for (const auto& s : report.scenarios) {
    reporter.on_scenario_start(s.name, s.variants.size());
    for (const auto& v : s.variants) reporter.on_variant_done(s.name, v);
    reporter.on_scenario_done(s);
  }
  reporter.on_run_done(report);
}

std::string console_output(const RunReport& report) {
  std::ostringstream out;
  ConsoleReporter console(out);
  replay(console, report);
  return out.str();
}

void expect_line(const std::string& text, const std::string& pattern) {
  EXPECT_TRUE(std::regex_search(text, std::regex(pattern)))
      << "no line matches " << pattern << " in\n"
      << text;
}

TEST(ConsoleReporter, PrintsTheVariantTable) {
  const std::string text = console_output(sample_report());
  EXPECT_CONTAINS(text, "harness 0.1.0 | build Debug | git abc1234 (dirty) | LibTorch 2.11.0\n");
  EXPECT_CONTAINS(text,
                  "device sim (sim (simulated accelerator, host memory)) | instrument "
                  "dispatcher (ok)\n");
  EXPECT_CONTAINS(text, "== resume_adam: Adam's step tensor after resuming from a checkpoint\n");
  EXPECT_CONTAINS(text, "measured: the 5 steps after resume\n");
  EXPECT_CONTAINS(text, "config: params=4, steps=5\n");
  expect_line(text,
              "\n  variant +steps +launch/step +H2D/step +D2H/step +D2D/step +sync/step +"
              "step time +correct\n  -+\n");
  expect_line(text, "\n  fresh/foreach +5 +42 +1 +4 +0 +0 +1\\.23 ms +yes\n");
  expect_line(text, "\n  resume_move_all/foreach +5 +42 +1 +12 +0 +8 +1\\.23 ms +yes\n");
  expect_line(text, "\n  resume_rebuild/foreach +FAILED: checkpoint not found\n");
  expect_line(text, "\n  fresh/forloop +5 +2\\.40 +1 +4 +0 +0 +1\\.23 ms +-\n");
}

TEST(ConsoleReporter, ColumnsAreAligned) {
  const std::string text = console_output(sample_report());
  // "µs" or "ms" and "yes" end at the same column in every row of ran variants.
  std::istringstream lines(text);
  std::string line;
  std::vector<size_t> ends;
  while (std::getline(lines, line)) {
    if (line.find(" ms ") != std::string::npos) ends.push_back(line.find(" ms "));
  }
  ASSERT_EQ(ends.size(), 4u);
  for (size_t end : ends) EXPECT_EQ(end, ends[0]);
}

TEST(ConsoleReporter, PrintsTablesSyncSitesAndWarnings) {
  const std::string text = console_output(sample_report());
  EXPECT_CONTAINS(text, "\n  syncs by parameter count\n");
  expect_line(text, "\n  params +syncs\n  -+\n +4 +8\n +64 +128\n");
  EXPECT_CONTAINS(text, "sync sites");
  // The time waited in the window and per step; "-": not measured.
  expect_line(text,
              "\n  resume_move_all/foreach\n    optimizer.step +aten::_local_scalar_dense +"
              "item +40 +123.5 µs +24.7 µs +harness/runtime/optim/adam_foreach.cpp:145 in "
              "multi_tensor_adam\n    checkpoint.load +aten::_copy_from +blocking copy "
              "D2H +2 +- +- +-\n");
  // Copies a user would move, by line.
  expect_line(text,
              "copy sites .*\n  resume_move_all/foreach\n    checkpoint.load +D2H +blocking +2 +0.4 "
              "+4096 +train.py:7 in load \\(torch/serialization.py:1 in load\\)\n");
  EXPECT_CONTAINS(text, "warning (resume_move_all/foreach): step tensors live on the device\n");
  EXPECT_CONTAINS(text, "\n***WARNING*** debug build: times are not representative\n");
}

TEST(ConsoleReporter, LongSyncSiteListsAreCut) {
  RunReport report = sample_report();
  VariantResult& v = sample_variant(report, "fresh/foreach");
  for (int i = 0; i < 13; ++i) v.sync_sites.push_back({"p" + std::to_string(i), "op", "item", i});
  const std::string text = console_output(report);
  EXPECT_CONTAINS(text, "    p12  op  item  12  -  -  -\n");
  EXPECT_EQ(text.find("    p2 "), std::string::npos);
  EXPECT_CONTAINS(text, "    ... and 3 more\n");
}

TEST(Format, NumbersAndDurations) {
  EXPECT_EQ(format_per_step(12.0), "12");
  EXPECT_EQ(format_per_step(2.4), "2.40");
  EXPECT_EQ(format_per_step(std::nullopt), "-");
  EXPECT_EQ(format_number(2.4), "2.4");
  EXPECT_EQ(format_number(1.0 / 3.0), "0.333");
  EXPECT_EQ(format_ratio(1.0), "1.0");
  EXPECT_EQ(format_ratio(1.25), "1.25");
  EXPECT_EQ(format_duration_ns(812300), "812.3 µs");
  EXPECT_EQ(format_duration_ns(1234567), "1.23 ms");
  EXPECT_EQ(format_duration_ns(2.5e9), "2.50 s");
}

TEST(Markdown, RendersTheSummary) {
  const std::string text = render_markdown(sample_report());
  EXPECT_CONTAINS(text, "# Benchmark report\n");
  EXPECT_CONTAINS(text, "| device | sim (sim (simulated accelerator, host memory)) |\n");
  EXPECT_CONTAINS(text, "> **Warning:** debug build: times are not representative\n");
  EXPECT_CONTAINS(text, "\n## resume_adam\n");
  EXPECT_CONTAINS(text,
                  "| variant | steps | launch/step | H2D/step | D2H/step | D2D/step | "
                  "sync/step | step time | correct |\n| :-- | --: |");
  EXPECT_CONTAINS(text, "| fresh/foreach | 5 | 42 | 1 | 4 | 0 | 0 | 1.23 ms | yes |\n");
  EXPECT_CONTAINS(text, "| resume_rebuild/foreach | FAILED: checkpoint not found |  |");
  EXPECT_CONTAINS(text, "### syncs by parameter count\n");
  EXPECT_CONTAINS(text,
                  "| resume_move_all/foreach | optimizer.step | aten::_local_scalar_dense | "
                  "item | 40 | 123.5 µs | 24.7 µs | harness/runtime/optim/adam_foreach.cpp:145 in "
                  "multi_tensor_adam |\n");
  EXPECT_CONTAINS(text,
                  "| variant | phase | op | reason | count | waited | waited/step | where |\n");
  EXPECT_CONTAINS(text,
                  "| resume_move_all/foreach | checkpoint.load | D2H | blocking | 2 | 0.4 | 4096 | "
                  "train.py:7 in load (torch/serialization.py:1 in load) |\n");
}

TEST(JsonReporter, WritesAReportThatReadsBack) {
  TempDir dir;
  JsonReporter json(dir.path("report.json"));
  replay(json, sample_report());
  EXPECT_TRUE(read_report_file(dir.path("report.json")) == sample_report());
}

// Records the events it receives.
class RecordingReporter : public Reporter {
 public:
  explicit RecordingReporter(std::vector<std::string>& log) : log_(log) {}
  void on_run_start(const Provenance&) override { log_.push_back("run_start"); }
  void on_scenario_start(const std::string& name, size_t count) override {
    log_.push_back("scenario_start " + name + " " + std::to_string(count));
  }
  void on_variant_done(const std::string&, const VariantResult& v) override {
    log_.push_back("variant " + v.name);
  }
  void on_run_done(const RunReport&) override { log_.push_back("run_done"); }

 private:
  std::vector<std::string>& log_;
};

TEST(MultiReporter, ForwardsEveryEventToEachReporterInOrder) {
  std::vector<std::string> first, second;
  MultiReporter multi;
  EXPECT_TRUE(multi.empty());
  multi.add(std::make_unique<RecordingReporter>(first));
  multi.add(std::make_unique<RecordingReporter>(second));
  replay(multi, sample_report());
  ASSERT_EQ(first.size(), 8u);
  EXPECT_EQ(first.front(), "run_start");
  EXPECT_EQ(first[1], "scenario_start resume_adam 5");
  EXPECT_EQ(first[2], "variant fresh/foreach");
  EXPECT_EQ(first.back(), "run_done");
  EXPECT_EQ(first, second);
}

}  // namespace
}  // namespace harness

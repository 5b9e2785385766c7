// bench compare's decisions and renderings on the sample report and edited copies of it.
#include <gtest/gtest.h>

#include <algorithm>

#include "harness/report/compare/run_compare.h"
#include "test_support.h"

namespace harness {
namespace {

// The tests of rules other than the processes' (the sample reports have one process a side).
const TimeTestOptions kOneProcessEnough = [] {
  TimeTestOptions o;
  o.min_processes = 1;
  return o;
}();

const ComparedMetric* find_row(const RunComparison& c, const std::string& variant,
                               const std::string& metric) {
  for (const ComparedMetric& m : c.rows) {
    if (m.variant == variant && m.metric == metric) return &m;
  }
  return nullptr;
}

const ComparedMetric& row(const RunComparison& c, const std::string& variant,
                          const std::string& metric) {
  const ComparedMetric* m = find_row(c, variant, metric);
  EXPECT_NE(m, nullptr) << variant << " " << metric;
  static const ComparedMetric kNone;
  return m ? *m : kNone;
}

void set_per_step(VariantResult& v, const std::string& name, double value) {
  for (Measurement& m : v.per_step) {
    if (m.name == name) m.value = value;
  }
}

const std::vector<double> kSlow = {12.1, 13.4, 11.8, 14.2, 13.9, 12.7,
                                   15.1, 13.3, 14.8, 12.9, 13.6, 14.4};
const std::vector<double> kFast = {11.2, 12.0, 11.5, 12.6, 11.9, 12.3, 11.1, 12.8, 11.7, 12.2};

TEST(RunCompare, IdenticalReportsChangeNothing) {
  const RunReport r = sample_report();
  const RunComparison c = compare_reports(r, r, {});
  EXPECT_EQ(c.count(Change::Regression), 0u);
  EXPECT_EQ(c.count(Change::Improvement), 0u);
  EXPECT_EQ(c.count(Change::New) + c.count(Change::Missing), 0u);
  EXPECT_FALSE(c.failed(false));
  EXPECT_TRUE(c.environment.empty());
  // The sample has 5 timed steps a side: fewer than min_samples, so its times are inconclusive.
  EXPECT_EQ(row(c, "fresh/foreach", "samples.step_time").change, Change::Inconclusive);
  EXPECT_TRUE(c.failed(/*strict=*/true));
  // Phase times only when asked for.
  EXPECT_EQ(find_row(c, "fresh/foreach", "samples.phase[optimizer.step].time"), nullptr);
  const RunComparison with_phases = compare_reports(r, r, {}, /*phase_times=*/true);
  EXPECT_NE(find_row(with_phases, "fresh/foreach", "samples.phase[optimizer.step].time"), nullptr);
}

TEST(RunCompare, ACountThatRisesIsARegressionOneThatFallsAnImprovement) {
  const RunReport base = sample_report();
  RunReport head = sample_report();
  set_per_step(sample_variant(head, "fresh/foreach"), "d2h.count", 6);
  set_per_step(sample_variant(head, "resume_move_all/foreach"), "sync.count", 0);
  const RunComparison c = compare_reports(base, head, kOneProcessEnough);
  const ComparedMetric& d2h = row(c, "fresh/foreach", "per_step.d2h.count");
  EXPECT_EQ(d2h.change, Change::Regression);
  EXPECT_EQ(d2h.base, 4.0);
  EXPECT_EQ(d2h.head, 6.0);
  EXPECT_EQ(row(c, "resume_move_all/foreach", "per_step.sync.count").change, Change::Improvement);
  EXPECT_EQ(c.count(Change::Regression), 1u);
  EXPECT_TRUE(c.failed(false));
  EXPECT_EQ(c.tally().substr(0, 29), "1 regression, 1 improvement, ");
}

TEST(RunCompare, LaunchesByOpAreComparedPerStep) {
  const RunReport base = sample_report();
  RunReport head = sample_report();
  VariantResult& v = sample_variant(head, "fresh/foreach");
  v.launches_by_op["aten::_local_scalar_dense"] = 10;  // new op: 2 per step
  const RunComparison c = compare_reports(base, head, kOneProcessEnough);
  const ComparedMetric& op = row(c, "fresh/foreach", "launches_by_op[aten::_local_scalar_dense]");
  EXPECT_EQ(op.change, Change::Regression);
  EXPECT_EQ(op.base, 0.0);
  EXPECT_EQ(op.head, 2.0);
  EXPECT_EQ(row(c, "fresh/foreach", "launches_by_op[aten::mm]").head, 2.0);  // 10 over 5 steps
}

TEST(RunCompare, TimesAreDecidedOnTheirSamples) {
  RunReport base = sample_report();
  RunReport head = sample_report();
  sample_variant(base, "fresh/foreach").samples["step_time"] = kFast;
  sample_variant(head, "fresh/foreach").samples["step_time"] = kSlow;
  sample_variant(base, "resume_keep_step/foreach").samples["step_time"] = kSlow;
  sample_variant(head, "resume_keep_step/foreach").samples["step_time"] = kFast;
  const RunComparison c = compare_reports(base, head, kOneProcessEnough);
  const ComparedMetric& slower = row(c, "fresh/foreach", "samples.step_time");
  EXPECT_EQ(slower.change, Change::Regression);
  ASSERT_TRUE(slower.time.has_value());
  EXPECT_NEAR(*slower.time->ratio.ratio, 1.1353403540903542, 1e-12);
  EXPECT_EQ(slower.time->test.n_base, 10u);
  EXPECT_EQ(slower.time->test.n_head, 12u);
  EXPECT_DOUBLE_EQ(*slower.base, 11.95);  // medians
  EXPECT_DOUBLE_EQ(*slower.head, 13.5);
  EXPECT_EQ(row(c, "resume_keep_step/foreach", "samples.step_time").change, Change::Improvement);
  TimeTestOptions lenient = kOneProcessEnough;
  lenient.max_ratio = 1.2;
  EXPECT_EQ(row(compare_reports(base, head, lenient), "fresh/foreach", "samples.step_time").change,
            Change::Unchanged);
}

// Every variant that ran gets `samples` as its step times (10 or more: decidable).
void set_step_times(RunReport& report, const std::vector<double>& samples, double factor = 1) {
  for (VariantResult& v : report.scenarios.at(0).variants) {
    if (!v.ran) continue;
    v.samples["step_time"].clear();
    for (double x : samples) v.samples["step_time"].push_back(x * factor);
  }
}

TEST(RunCompare, HostMemoryOfScenariosOnRanksIsInformational) {
  RunReport base = sample_report();  // its scenario ran on 2 ranks
  RunReport head = sample_report();
  for (RunReport* r : {&base, &head}) {
    sample_variant(*r, "fresh/foreach")
        .total.push_back({"host_memory.peak_bytes", r == &base ? 1000.0 : 2000.0, "bytes", ""});
    sample_variant(*r, "fresh/foreach")
        .total.push_back({"memory.peak_bytes", r == &base ? 1000.0 : 2000.0, "bytes", ""});
  }
  const RunComparison c = compare_reports(base, head, kOneProcessEnough);
  const ComparedMetric& host = row(c, "fresh/foreach", "total.host_memory.peak_bytes");
  EXPECT_EQ(host.change, Change::Info);
  EXPECT_NE(host.note.find("--host-memory"), std::string::npos) << host.note;
  // Device memory is deterministic: its rise is a regression as ever.
  EXPECT_EQ(row(c, "fresh/foreach", "total.memory.peak_bytes").change, Change::Regression);
  EXPECT_EQ(c.count(Change::Info), 1u);
  EXPECT_NE(c.tally().find("1 informational"), std::string::npos) << c.tally();
  EXPECT_NE(comparison_text(c, false, false).find("1 informational rows not shown"),
            std::string::npos);
  // Asked for, or on one process, the level has a verdict.
  EXPECT_EQ(row(compare_reports(base, head, {}, false, /*host_memory=*/true), "fresh/foreach",
                "total.host_memory.peak_bytes")
                .change,
            Change::Regression);
  base.scenarios[0].world_size = head.scenarios[0].world_size = 1;
  EXPECT_EQ(row(compare_reports(base, head, kOneProcessEnough), "fresh/foreach", "total.host_memory.peak_bytes")
                .change,
            Change::Regression);
}

TEST(RunCompare, TimesOfAnOversubscribedScenarioAreInconclusive) {
  RunReport base = sample_report();
  RunReport head = sample_report();
  set_step_times(base, kFast);
  set_step_times(head, kFast);
  sample_variant(head, "fresh/foreach").samples["step_time"] = kSlow;
  for (double& x : sample_variant(head, "fresh/foreach").samples["step_time"]) x *= 2;
  EXPECT_EQ(row(compare_reports(base, head, kOneProcessEnough), "fresh/foreach", "samples.step_time").change,
            Change::Regression);
  head.provenance.ranks_per_host = 2;
  head.provenance.cpu_count = 2;  // 2 ranks on 2 CPUs
  const RunComparison c = compare_reports(base, head, kOneProcessEnough);
  const ComparedMetric& time = row(c, "fresh/foreach", "samples.step_time");
  EXPECT_EQ(time.change, Change::Inconclusive);
  EXPECT_NE(time.note.find("head: 2 ranks on 2 CPU(s)"), std::string::npos) << time.note;
  ASSERT_EQ(c.notes.size(), 1u);
  EXPECT_NE(c.notes[0].find("resume_adam: head: 2 ranks on 2 CPU(s)"), std::string::npos);
  // Enough CPUs, or a scenario on one rank: judged.
  head.provenance.cpu_count = 3;
  EXPECT_EQ(row(compare_reports(base, head, kOneProcessEnough), "fresh/foreach", "samples.step_time").change,
            Change::Regression);
  head.provenance.cpu_count = 2;
  head.scenarios[0].world_size = 1;
  EXPECT_EQ(row(compare_reports(base, head, kOneProcessEnough), "fresh/foreach", "samples.step_time").change,
            Change::Regression);
}

TEST(RunCompare, AChangeMeasuredWhileTheCoresWereBusyIsInconclusive) {
  RunReport base = sample_report();
  RunReport head = sample_report();
  set_step_times(base, kFast);
  set_step_times(head, kFast);
  sample_variant(head, "fresh/foreach").samples["step_time"] = kSlow;
  sample_variant(head, "fresh/forloop").timing.push_back(
      {"cpu_wait.share", 0.5, "ratio", "waited for a CPU"});
  sample_variant(head, "fresh/foreach").timing.push_back(
      {"cpu_wait.share", 0.35, "ratio", "waited for a CPU"});
  const RunComparison c = compare_reports(base, head, kOneProcessEnough);
  const ComparedMetric& slower = row(c, "fresh/foreach", "samples.step_time");
  EXPECT_EQ(slower.change, Change::Inconclusive);
  EXPECT_NE(slower.note.find("head: its threads waited for a CPU 35% of the time"),
            std::string::npos)
      << slower.note;
  // No change found under the load stays unchanged (a self-compare passes --strict).
  EXPECT_EQ(row(c, "fresh/forloop", "samples.step_time").change, Change::Unchanged);
  sample_variant(head, "fresh/foreach").timing.back().value = 0.05;  // a quiet machine
  EXPECT_EQ(row(compare_reports(base, head, kOneProcessEnough), "fresh/foreach", "samples.step_time").change,
            Change::Regression);
}

TEST(RunCompare, ATimeThatMovedWithItsWholeScenarioIsInconclusive) {
  RunReport base = sample_report();
  RunReport head = sample_report();
  set_step_times(base, kFast);
  set_step_times(head, kFast, 1.5);  // every variant 1.5x: a slower machine, or every variant
  sample_variant(head, "fresh/forloop").samples["step_time"] = kFast;
  for (double& x : sample_variant(head, "fresh/forloop").samples["step_time"]) x *= 3;
  const RunComparison c = compare_reports(base, head, kOneProcessEnough);
  const ComparedMetric& moved = row(c, "fresh/foreach", "samples.step_time");
  EXPECT_EQ(moved.change, Change::Inconclusive);
  EXPECT_NE(moved.note.find("moved with its scenario: ratio 1.5, the median of its 4 variants 1.5"),
            std::string::npos)
      << moved.note;
  // 3x where the others moved 1.5x: 2x beyond the scenario's move, a regression.
  EXPECT_EQ(row(c, "fresh/forloop", "samples.step_time").change, Change::Regression);
  EXPECT_TRUE(c.failed(false));
}

TEST(RunCompare, ATimeThatMovedWithTheMachineProbeIsInconclusive) {
  RunReport base = sample_report();
  RunReport head = sample_report();
  set_step_times(base, kFast);
  set_step_times(head, kFast);
  // One variant 2.5x slower in head, while the machine probe after each of its steps was 1.8x
  // slower: the machine's, not the code's (the scenario's other variants did not move).
  std::vector<double> probe(12, 0.0);
  for (size_t i = 0; i < probe.size(); ++i) probe[i] = 20000 + 100 * static_cast<double>(i % 5);
  sample_variant(base, "fresh/foreach").samples["machine_probe"] = probe;
  for (double& x : probe) x *= 1.8;
  sample_variant(head, "fresh/foreach").samples["machine_probe"] = probe;
  for (double& x : sample_variant(head, "fresh/foreach").samples["step_time"]) x *= 2.5;
  TimeTestOptions options = kOneProcessEnough;
  options.max_ratio = 2.0;
  RunComparison c = compare_reports(base, head, options);
  const ComparedMetric& moved = row(c, "fresh/foreach", "samples.step_time");
  EXPECT_EQ(moved.change, Change::Inconclusive);
  EXPECT_NE(moved.note.find("the machine itself was slower in head's run"), std::string::npos)
      << moved.note;
  EXPECT_FALSE(c.failed(false));
  // The probe is a diagnostic series: no row of its own by default.
  EXPECT_EQ(find_row(c, "fresh/foreach", "samples.machine_probe"), nullptr);
  // 4.5x where the machine moved 1.8x: 2.5x beyond it, a regression.
  for (double& x : sample_variant(head, "fresh/foreach").samples["step_time"]) x *= 1.8;
  c = compare_reports(base, head, options);
  EXPECT_EQ(row(c, "fresh/foreach", "samples.step_time").change, Change::Regression);
}

TEST(RunCompare, FailuresNewAndMissingVariants) {
  RunReport base = sample_report();
  RunReport head = sample_report();
  VariantResult& broken = sample_variant(head, "fresh/forloop");
  broken.ran = false;
  broken.error = "CUDA error: out of memory";
  sample_variant(head, "resume_keep_step/foreach").correctness.passed = false;
  // resume_rebuild/foreach failed in the sample; in head it is renamed: one missing, one new.
  sample_variant(head, "resume_rebuild/foreach").name = "resume_rebuild2/foreach";
  const RunComparison c = compare_reports(base, head, kOneProcessEnough);
  const ComparedMetric& status = row(c, "fresh/forloop", "status.ok");
  EXPECT_EQ(status.change, Change::Regression);
  EXPECT_EQ(status.note, "head failed: CUDA error: out of memory");
  EXPECT_EQ(find_row(c, "fresh/forloop", "per_step.d2h.count"), nullptr);  // not compared
  EXPECT_EQ(row(c, "resume_keep_step/foreach", "correctness.passed").change, Change::Regression);
  EXPECT_EQ(row(c, "resume_rebuild2/foreach", "(variant)").change, Change::New);
  EXPECT_EQ(row(c, "resume_rebuild/foreach", "(variant)").change, Change::Missing);
}

TEST(RunCompare, EnvironmentAndWindowDifferencesAreNoted) {
  RunReport base = sample_report();
  RunReport head = sample_report();
  head.provenance.build_type = "Release";
  head.provenance.device = "cuda";
  head.scenarios[0].config["steps"] = "50";
  for (VariantResult& v : head.scenarios[0].variants) v.measured_steps = 50;
  const RunComparison c = compare_reports(base, head, kOneProcessEnough);
  ASSERT_EQ(c.environment.size(), 2u);
  EXPECT_EQ(c.environment[0].field, "device");
  EXPECT_EQ(c.environment[1].field, "build type");
  ASSERT_EQ(c.notes.size(), 2u);
  EXPECT_CONTAINS(c.notes[0], "ran with another configuration: steps 5 -> 50");
  EXPECT_CONTAINS(c.notes[1], "measured another number of steps: their phase counts");
  EXPECT_EQ(find_row(c, "fresh/foreach", "phase[optimizer.step].d2h.count"), nullptr);
  EXPECT_NE(find_row(c, "fresh/foreach", "per_step.d2h.count"), nullptr);
}

TEST(RunCompare, OldReportsWithoutSamplesAreInconclusiveOnTime) {
  RunReport base = sample_report();
  for (VariantResult& v : base.scenarios[0].variants) v.samples.clear();
  RunReport head = base;
  const RunComparison c = compare_reports(base, head, kOneProcessEnough);
  const ComparedMetric& t = row(c, "fresh/foreach", "timing.step_time.median");
  EXPECT_EQ(t.change, Change::Inconclusive);
  EXPECT_CONTAINS(t.note, "no per-step samples");
}

TEST(RunCompareFormat, TextShowsChangedRowsAndTheTally) {
  const RunReport base = sample_report();
  RunReport head = sample_report();
  set_per_step(sample_variant(head, "fresh/foreach"), "d2h.count", 6);
  const RunComparison c = compare_reports(base, head, kOneProcessEnough);
  const std::string text = comparison_text(c, /*all=*/false, /*strict=*/false);
  EXPECT_CONTAINS(text, "REGRESSION");
  EXPECT_CONTAINS(text, "per_step.d2h.count");
  EXPECT_CONTAINS(text, "+50.0%");
  EXPECT_CONTAINS(text, "unchanged rows not shown; --all shows them");
  EXPECT_CONTAINS(text, "compare: 1 regression, 0 improvements, ");
  EXPECT_EQ(text.find("per_step.launch.count"), std::string::npos);
  EXPECT_CONTAINS(comparison_text(c, /*all=*/true, false), "per_step.launch.count");
}

TEST(RunCompareFormat, MarkdownPutsChangesFirstFoldsTheRestAndStaysUnderTheLimit) {
  RunReport base = sample_report();
  RunReport head = sample_report();
  head.provenance.hostname = "runner-2";
  set_per_step(sample_variant(head, "fresh/foreach"), "d2h.count", 6);
  // Many ops: many unchanged rows.
  for (int i = 0; i < 3000; ++i) {
    for (RunReport* r : {&base, &head}) {
      sample_variant(*r, "fresh/foreach").launches_by_op["aten::op_" + std::to_string(i)] = 5;
    }
  }
  RunComparison c = compare_reports(base, head, kOneProcessEnough);
  const GateFile gate = parse_gate_json(
      {{"gate_version", 1},
       {"rules", nlohmann::json::array({{{"scenario", "resume_adam"},
                                         {"variant", "*"},
                                         {"metric", "per_step.d2h.count"},
                                         {"baseline", true}}})}},
      "gates/ci.json");
  c.gates.push_back(evaluate_gate(gate, head, &base));
  const std::string md = comparison_markdown(c, false);
  EXPECT_LE(md.size(), kMarkdownLimit);
  EXPECT_EQ(md.rfind("## bench compare: 1 regression, 0 improvements, ", 0), 0u);
  EXPECT_CONTAINS(md, "> [!WARNING]");
  EXPECT_CONTAINS(md, "host `ci-host` → `runner-2`");
  const size_t changed = md.find("### Changed");
  const size_t details = md.find("<details><summary>");
  ASSERT_NE(changed, std::string::npos);
  ASSERT_NE(details, std::string::npos);
  EXPECT_LT(changed, details);
  EXPECT_LT(md.find("🔴"), details);
  EXPECT_CONTAINS(md, "rows left out to stay under the size limit");
  // The summary rows survive the cut; the gate section comes last, failing rule first.
  EXPECT_LT(md.find("per_step.launch.count"), md.find("launches_by_op[aten::op_"));
  const size_t gate_at = md.find("### Gate `gates/ci.json`: **FAILED**");
  ASSERT_NE(gate_at, std::string::npos);
  EXPECT_LT(md.find("| FAIL |", gate_at), md.find("| PASS |", gate_at));
  EXPECT_TRUE(c.failed(false));
}

// The limit never drops a regression, even when the gate section alone fills it.
TEST(RunCompareFormat, MarkdownKeepsRegressionsWhenTheGatesFillTheLimit) {
  RunReport base = sample_report(), head = sample_report();
  set_per_step(sample_variant(head, "fresh/foreach"), "d2h.count", 9);
  RunComparison c = compare_reports(base, head, kOneProcessEnough);
  ASSERT_EQ(c.count(Change::Regression), 1u);
  const GateFile gate = parse_gate_json(
      {{"gate_version", 1},
       {"rules", nlohmann::json::array({{{"scenario", "resume_adam"},
                                         {"variant", "*"},
                                         {"metric", "per_step.launch.count"},
                                         {"max", 1000000}}})}},
      "gates/ci.json");
  c.gates.push_back(evaluate_gate(gate, head, &base));
  const std::string md = comparison_markdown(c, false, /*max_bytes=*/200);  // below the gates
  const size_t changed = md.find("### Changed");
  ASSERT_NE(changed, std::string::npos);
  EXPECT_NE(md.find("per_step.d2h.count", changed), std::string::npos) << md;
  EXPECT_LT(md.find("per_step.d2h.count", changed), md.find("### Gate"));
}

TEST(RunCompareFormat, JsonHasEveryRowAndNoNonFiniteNumber) {
  RunReport base = sample_report();
  RunReport head = sample_report();
  set_per_step(sample_variant(base, "fresh/foreach"), "d2h.count", 0);  // delta% undefined
  set_per_step(sample_variant(head, "fresh/foreach"), "d2h.count", 3);
  const RunComparison c = compare_reports(base, head, kOneProcessEnough);
  const ReportJson j = comparison_json(c, false);
  const std::string text = j.dump();
  EXPECT_EQ(text.find("NaN"), std::string::npos);
  EXPECT_EQ(text.find("Infinity"), std::string::npos);
  EXPECT_EQ(j["rows"].size(), c.rows.size());
  EXPECT_EQ(j["tally"]["regression"], 1);
  EXPECT_EQ(j["failed"], true);
  bool found = false;
  for (const auto& r : j["rows"]) {
    if (r["variant"] == "fresh/foreach" && r["metric"] == "per_step.d2h.count") {
      found = true;
      EXPECT_EQ(r["change"], "regression");
      EXPECT_EQ(r["delta"], 3);
      EXPECT_TRUE(r["delta_percent"].is_null());
    }
  }
  EXPECT_TRUE(found);
}

TEST(RunCompare, ATimeBetweenRunsNeedsProcessesApart) {
  RunReport base = sample_report();
  RunReport head = sample_report();
  sample_variant(base, "fresh/foreach").samples["step_time"] = kFast;
  sample_variant(head, "fresh/foreach").samples["step_time"] = kSlow;
  // One process a side (reports without `processes`): no verdict by default.
  ComparedMetric time = row(compare_reports(base, head, {}), "fresh/foreach", "samples.step_time");
  EXPECT_EQ(time.change, Change::Inconclusive);
  EXPECT_NE(time.note.find("1 vs 1 process(es), fewer than min_processes 3"), std::string::npos)
      << time.note;
  // Three processes a side, every head process beyond every base process: a regression.
  auto three = [](const std::vector<double>& steps, double spread) {
    std::vector<double> out;
    for (double k : {1.0, 1 + spread, 1 - spread}) {
      for (double x : steps) out.push_back(x * k);
    }
    return out;
  };
  VariantResult& b = sample_variant(base, "fresh/foreach");
  VariantResult& h = sample_variant(head, "fresh/foreach");
  b.processes = h.processes = 3;
  b.samples["step_time"] = three(kFast, 0.01);
  h.samples["step_time"] = three(kFast, 0.01);
  for (double& x : h.samples["step_time"]) x *= 1.3;
  time = row(compare_reports(base, head, {}), "fresh/foreach", "samples.step_time");
  EXPECT_EQ(time.change, Change::Regression) << time.note;
  // The same rise where the processes of a side are 30 % apart: within the variation between runs.
  b.samples["step_time"] = three(kFast, 0.3);
  time = row(compare_reports(base, head, {}), "fresh/foreach", "samples.step_time");
  EXPECT_EQ(time.change, Change::Inconclusive) << time.note;
  EXPECT_NE(time.note.find("overlap within 1.10x"), std::string::npos) << time.note;
}

}  // namespace
}  // namespace harness

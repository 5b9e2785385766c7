// The JSON report: round trip, value encoding, atomic files, and errors on bad input.
#include "harness/report/io/json_report.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>

#include "harness/report/gates/gate.h"
#include "test_support.h"

namespace harness {
namespace {

TEST(JsonReport, RoundTripPreservesEverything) {
  const RunReport report = sample_report();
  const std::string text = to_json(report).dump(2);
  const RunReport back = report_from_json(ReportJson::parse(text), "memory");
  EXPECT_TRUE(back == report);
  EXPECT_EQ(to_json(back).dump(2), text);
}

TEST(JsonReport, RoundTripThroughUnorderedJsonKeepsContents) {
  const RunReport report = sample_report();
  const nlohmann::json sorted = to_json(report);
  const RunReport back = report_from_json(sorted, "memory");
  EXPECT_EQ(back.scenarios.at(0).variants.size(), report.scenarios.at(0).variants.size());
  EXPECT_EQ(back.provenance.git_sha, "abc1234");
}

TEST(JsonReport, AnExpectedFailureRoundTripsWithItsStatus) {
  RunReport report = sample_report();
  VariantResult& v = report.scenarios.at(0).variants.at(3);
  v.expected_failure = "a known crash";
  const ReportJson j = to_json(report);
  EXPECT_EQ(j["scenarios"][0]["variants"][3]["status"], "expected_failure");
  EXPECT_EQ(j["scenarios"][0]["variants"][3]["expected_failure"], "a known crash");
  const RunReport back = report_from_json(j, "memory");
  EXPECT_TRUE(back.scenarios.at(0).variants.at(3).failed_as_expected());
  ReportJson bad = j;
  bad["scenarios"][0]["variants"][3].erase("expected_failure");
  EXPECT_THROW(report_from_json(bad, "memory"), InputError);
}

TEST(JsonReport, AReportWithoutScenarioWorldSizeTakesTheRunsOne) {
  ReportJson j = to_json(sample_report());
  j["schema_version"] = "1.0.0";  // before scenarios[].world_size
  j["provenance"]["world_size"] = 4;
  j["scenarios"][0].erase("world_size");
  EXPECT_EQ(report_from_json(j, "memory").scenarios.at(0).world_size, 4);
}

TEST(JsonReport, UnitsAndDescriptionsAreWrittenOnceInTheMeasurementsDictionary) {
  const ReportJson j = to_json(sample_report());
  EXPECT_EQ(j["schema_version"], kReportSchemaVersion);
  EXPECT_EQ(j["measurements"]["d2h.bytes"]["unit"], "bytes");
  EXPECT_EQ(j["measurements"]["step_time.median"]["unit"], "ns");
  EXPECT_EQ(j["measurements"]["step_time.median"]["description"], "median step time");
  const ReportJson& fresh = j["scenarios"][0]["variants"][0];
  EXPECT_EQ(fresh["per_step"]["d2h.count"], 4);
  EXPECT_EQ(fresh["status"], "ok");
  EXPECT_FALSE(fresh.contains("error"));
  EXPECT_EQ(j["scenarios"][0]["variants"][3]["status"], "failed");
  EXPECT_EQ(j["scenarios"][0]["variants"][3]["error"], "checkpoint not found");
}

TEST(JsonReport, DifferingUnitIsWrittenInlineAndSurvivesRoundTrip) {
  RunReport report = sample_report();
  sample_variant(report, "fresh/forloop").timing[1] = {"step_time.median", 99, "us", "other"};
  const ReportJson j = to_json(report);
  EXPECT_EQ(j["measurements"]["step_time.median"]["unit"], "ns");
  const ReportJson& inline_value = j["scenarios"][0]["variants"][4]["timing"]["step_time.median"];
  EXPECT_EQ(inline_value["value"], 99);
  EXPECT_EQ(inline_value["unit"], "us");
  EXPECT_EQ(inline_value["description"], "other");
  EXPECT_TRUE(report_from_json(j, "memory") == report);
}

TEST(JsonReport, MissingAndNonFiniteValuesAreNull) {
  RunReport report = sample_report();
  VariantResult& v = sample_variant(report, "fresh/foreach");
  v.per_step = {{"a", std::nullopt, "count", ""},
                {"b", std::numeric_limits<double>::quiet_NaN(), "count", ""},
                {"c", std::numeric_limits<double>::infinity(), "count", ""}};
  const ReportJson j = to_json(report);
  EXPECT_EQ(j["scenarios"][0]["variants"][0]["per_step"].dump(), R"({"a":null,"b":null,"c":null})");
  const std::string text = j.dump();
  const RunReport back = report_from_json(ReportJson::parse(text), "memory");
  for (const auto& m : back.scenarios[0].variants[0].per_step) EXPECT_FALSE(m.value) << m.name;
}

TEST(JsonReport, IntegralValuesAreIntegersOthersDoubles) {
  RunReport report = sample_report();
  sample_variant(report, "fresh/foreach").per_step = {{"int", 42.0, "count", ""},
                                                      {"neg", -3.0, "count", ""},
                                                      {"frac", 2.5, "count", ""},
                                                      {"big", 9007199254740992.0, "count", ""},
                                                      {"below", 9007199254740991.0, "count", ""}};
  const ReportJson j = to_json(report)["scenarios"][0]["variants"][0]["per_step"];
  EXPECT_TRUE(j["int"].is_number_integer());
  EXPECT_EQ(j["int"].dump(), "42");
  EXPECT_EQ(j["neg"].dump(), "-3");
  EXPECT_TRUE(j["frac"].is_number_float());
  EXPECT_EQ(j["frac"].dump(), "2.5");
  EXPECT_TRUE(j["big"].is_number_float());
  EXPECT_EQ(j["below"].dump(), "9007199254740991");
}

// Memory levels (schema 1.1.0): in `total` and each phase; null (not measured, e.g. device
// memory on cpu) stays null; gates address them by metric path after a round trip.
TEST(JsonReport, MemoryMeasurementsRoundTripAndGatesAddressThem) {
  RunReport report = sample_report();
  VariantResult& v = sample_variant(report, "fresh/foreach");
  const auto memory = [](std::optional<double> peak, std::optional<double> level,
                         std::optional<double> host_peak, std::optional<double> host_level) {
    return std::vector<Measurement>{
        {"memory.peak_bytes", peak, "bytes", "peak device memory"},
        {"memory.allocated_bytes", level, "bytes", "device memory at the end"},
        {"host_memory.peak_bytes", host_peak, "bytes", "peak host memory"},
        {"host_memory.allocated_bytes", host_level, "bytes", "host memory at the end"}};
  };
  for (Measurement& m : memory(194116, 143168, 9256, 40)) v.total.push_back(m);
  v.phases["setup"] = memory(35792, 35792, 40, 40);
  v.phases["cpu"] = memory(std::nullopt, std::nullopt, 64, 0);
  const ReportJson j = to_json(report);
  const ReportJson& written = j["scenarios"][0]["variants"][0];
  EXPECT_EQ(written["total"]["memory.peak_bytes"], 194116);
  EXPECT_TRUE(written["phases"]["cpu"]["memory.peak_bytes"].is_null());
  EXPECT_FALSE(written["per_step"].contains("memory.peak_bytes"));
  EXPECT_EQ(j["measurements"]["host_memory.allocated_bytes"]["unit"], "bytes");

  const RunReport back = report_from_json(ReportJson::parse(j.dump()), "memory");
  EXPECT_TRUE(back == report);
  const VariantResult& b = *find_variant(back.scenarios.at(0), "fresh/foreach");
  EXPECT_EQ(find_metric(b, "total.memory.peak_bytes")->value, 194116);
  EXPECT_EQ(find_metric(b, "total.host_memory.allocated_bytes")->value, 40);
  EXPECT_EQ(find_metric(b, "phase[setup].memory.allocated_bytes")->value, 35792);
  EXPECT_FALSE(find_metric(b, "phase[cpu].memory.peak_bytes")->value.has_value());

  const GateFile gate = parse_gate_json(
      {{"gate_version", 1},
       {"rules", {{{"scenario", "resume_adam"}, {"variant", "fresh/foreach"},
                   {"metric", "phase[setup].memory.peak_bytes"}, {"max", 40000}},
                  {{"scenario", "resume_adam"}, {"variant", "fresh/foreach"},
                   {"metric", "total.memory.peak_bytes"}, {"max", 150000}}}}},
      "gates/memory.json");
  const GateOutcome outcome = evaluate_gate(gate, back, nullptr);
  ASSERT_EQ(outcome.outcomes.size(), 2u);
  EXPECT_EQ(outcome.outcomes[0].status, RuleStatus::Pass);
  EXPECT_EQ(outcome.outcomes[0].actual, 35792.0);
  EXPECT_EQ(outcome.outcomes[1].status, RuleStatus::Fail);
  EXPECT_EQ(outcome.outcomes[1].actual, 194116.0);
}

TEST(JsonReport, UnknownFieldsAreIgnored) {
  ReportJson j = to_json(sample_report());
  j["schema_version"] = "1.7.0";
  j["future"] = {{"x", 1}};
  j["scenarios"][0]["variants"][0]["future"] = "y";
  EXPECT_TRUE(report_from_json(j, "memory") == sample_report());
}

TEST(JsonReport, MalformedFieldIsNamed) {
  ReportJson j = to_json(sample_report());
  j["scenarios"][0]["variants"][1]["measured_steps"] = "five";
  const std::string message = input_error([&] { report_from_json(j, "base.json"); });
  EXPECT_CONTAINS(message, "base.json");
  EXPECT_CONTAINS(message, "scenarios[0].variants[1].measured_steps");
  EXPECT_CONTAINS(message, "expected an integer");

  j = to_json(sample_report());
  j["scenarios"][0]["variants"][0]["per_step"]["d2h.count"] = "4";
  EXPECT_CONTAINS(input_error([&] { report_from_json(j, "base.json"); }),
                  "per_step[\"d2h.count\"]: expected a number or null");

  j = to_json(sample_report());
  j["scenarios"][0].erase("name");
  EXPECT_CONTAINS(input_error([&] { report_from_json(j, "base.json"); }),
                  "scenarios[0]: missing required field 'name'");

  j = to_json(sample_report());
  j["scenarios"][0]["variants"][0]["status"] = "maybe";
  EXPECT_CONTAINS(input_error([&] { report_from_json(j, "base.json"); }),
                  "expected \"ok\", \"failed\" or \"expected_failure\"");
}

// Samples (schema 1.2.0): every timed value, in step order; a bad one is named by its path.
TEST(JsonReport, SamplesRoundTripAndBadOnesAreNamed) {
  const RunReport report = sample_report();
  ReportJson j = to_json(report);
  const ReportJson& written = j["scenarios"][0]["variants"][0]["samples"];
  EXPECT_EQ(written["step_time"][0], 1250000);       // integral: an integer
  EXPECT_EQ(written["step_time"][3], 1234567.5);     // else a double
  const RunReport back = report_from_json(j, "r.json");
  const VariantResult& v = back.scenarios[0].variants[0];
  EXPECT_EQ(v.samples.at("step_time"), report.scenarios[0].variants[0].samples.at("step_time"));
  ASSERT_NE(find_samples(v, "samples.phase[optimizer.step].time"), nullptr);
  EXPECT_EQ(find_samples(v, "samples.phase[optimizer.step].time")->size(), 5u);
  EXPECT_EQ(find_samples(v, "samples.nothing"), nullptr);
  EXPECT_EQ(find_samples(v, "timing.step_time"), nullptr);
  for (const ReportJson& bad : {ReportJson("slow"), ReportJson(-1), ReportJson(nullptr)}) {
    j["scenarios"][0]["variants"][0]["samples"]["step_time"][2] = bad;
    EXPECT_CONTAINS(input_error([&] { report_from_json(j, "r.json"); }),
                    "scenarios[0].variants[0].samples[\"step_time\"][2]: expected a time in ns");
  }
  j["scenarios"][0]["variants"][0]["samples"]["step_time"] = 5;
  EXPECT_CONTAINS(input_error([&] { report_from_json(j, "r.json"); }), "expected an array");
}

// Sync sites' wait (schema 1.3.0): an integer in ns, null where not measured; a report written
// before 1.3.0 has none and reads as not measured.
TEST(JsonReport, SyncSiteWaitRoundTripsAndOlderReportsHaveNone) {
  const RunReport report = sample_report();
  ReportJson j = to_json(report);
  const ReportJson& sites = j["scenarios"][0]["variants"][1]["sync_sites"];
  EXPECT_EQ(sites[0]["wait_ns"], 123456);
  EXPECT_TRUE(sites[1]["wait_ns"].is_null());
  EXPECT_TRUE(sites[1].contains("wait_ns"));
  const RunReport back = report_from_json(j, "r.json");
  const VariantResult& v = back.scenarios[0].variants[1];
  EXPECT_EQ(v.sync_sites[0].wait_ns, 123456);
  EXPECT_EQ(v.sync_sites[1].wait_ns, std::nullopt);
  EXPECT_EQ(*find_metric(v, "total.sync.wait_time")->value, 123456);
  EXPECT_EQ(find_metric(v, "phase[optimizer.step].gpu_time")->value, std::nullopt);
  EXPECT_EQ(find_samples(v, "samples.sync.wait_time")->size(), 5u);

  ReportJson old = j;
  old["schema_version"] = "1.2.0";
  old["scenarios"][0]["variants"][1]["sync_sites"][0].erase("wait_ns");
  EXPECT_EQ(report_from_json(old, "old.json").scenarios[0].variants[1].sync_sites[0].wait_ns,
            std::nullopt);

  for (const ReportJson& bad : {ReportJson("slow"), ReportJson(-5), ReportJson(1.5)}) {
    j["scenarios"][0]["variants"][1]["sync_sites"][0]["wait_ns"] = bad;
    EXPECT_CONTAINS(input_error([&] { report_from_json(j, "r.json"); }),
                    "scenarios[0].variants[1].sync_sites[0].wait_ns");
  }
}

TEST(JsonReport, SchemaVersionIsChecked) {
  ReportJson j = to_json(sample_report());
  j["schema_version"] = "2.0.0";
  EXPECT_CONTAINS(input_error([&] { report_from_json(j, "base.json"); }),
                  "schema version 2.0.0 is not supported");
  j["schema_version"] = "one";
  EXPECT_CONTAINS(input_error([&] { report_from_json(j, "base.json"); }), "not a semantic version");
  j.erase("schema_version");
  EXPECT_CONTAINS(input_error([&] { report_from_json(j, "base.json"); }),
                  "missing required field 'schema_version'");
  EXPECT_CONTAINS(input_error([&] { report_from_json(ReportJson::array(), "base.json"); }),
                  "expected an object");
}

TEST(JsonReportFile, WriteThenReadBack) {
  TempDir dir;
  const std::string path = dir.path("report.json");
  write_report_file(path, sample_report());
  EXPECT_TRUE(read_report_file(path) == sample_report());
  EXPECT_EQ(read_text(path).back(), '\n');
}

TEST(JsonReportFile, MissingFile) {
  TempDir dir;
  const std::string message = input_error([&] { read_report_file(dir.path("absent.json")); });
  EXPECT_CONTAINS(message, "cannot read report");
  EXPECT_CONTAINS(message, "absent.json");
}

TEST(JsonReportFile, NotJsonNamesTheParsePosition) {
  TempDir dir;
  write_text(dir.path("bad.json"), "{\n  \"schema_version\": \"1.0.0\",\n  oops\n}\n");
  const std::string message = input_error([&] { read_report_file(dir.path("bad.json")); });
  EXPECT_CONTAINS(message, "bad.json' is not valid JSON");
  EXPECT_CONTAINS(message, "line 3");
}

TEST(JsonReportFile, ANumberOutOfRangeIsBadInput) {
  TempDir dir;
  write_text(dir.path("huge.json"), "{\"schema_version\": \"1.1.0\", \"scenarios\": [], \"x\": 1e400}");
  EXPECT_CONTAINS(input_error([&] { read_report_file(dir.path("huge.json")); }),
                  "huge.json' is not valid JSON: [json.exception.out_of_range.406]");
}

TEST(JsonReportFile, WrongSchemaMajor) {
  TempDir dir;
  ReportJson j = to_json(sample_report());
  j["schema_version"] = "3.1.0";
  write_text(dir.path("old.json"), j.dump());
  const std::string message = input_error([&] { read_report_file(dir.path("old.json")); });
  EXPECT_CONTAINS(message, "old.json");
  EXPECT_CONTAINS(message, "3.1.0");
}

TEST(AtomicWrite, ReplacesExistingAndLeavesNoTemporaryFile) {
  TempDir dir;
  const std::string path = dir.path("out.txt");
  write_file_atomically(path, "first");
  write_file_atomically(path, "second");
  EXPECT_EQ(read_text(path), "second");
  size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.dir())) {
    ++files;
    EXPECT_EQ(entry.path().filename(), "out.txt");
  }
  EXPECT_EQ(files, 1u);
}

TEST(AtomicWrite, FailureNamesThePathAndLeavesNothing) {
  TempDir dir;
  const std::string path = dir.path("missing_dir/out.txt");
  const std::string message = input_error([&] { write_file_atomically(path, "x"); });
  EXPECT_CONTAINS(message, path);
  EXPECT_CONTAINS(message, "No such file or directory");

  std::filesystem::create_directory(dir.path("target_is_dir"));
  EXPECT_CONTAINS(input_error([&] { write_file_atomically(dir.path("target_is_dir"), "x"); }),
                  "target_is_dir");
  size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.dir())) {
    ++files;
    EXPECT_EQ(entry.path().filename(), "target_is_dir");
  }
  EXPECT_EQ(files, 1u);
}

}  // namespace
}  // namespace harness

#include "test_support.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>

namespace harness {
namespace {

Measurement count(const std::string& name, double value) {
  return {name, value, "count", name + " description"};
}

std::vector<Measurement> counts(double launches, double d2h, double syncs) {
  return {count("launch.count", launches),
          count("h2d.count", 1),
          count("d2h.count", d2h),
          {"d2h.bytes", d2h * 4, "bytes", "bytes copied device-to-host"},
          count("d2d.count", 0),
          count("sync.count", syncs)};
}

std::vector<Measurement> timing(double median_ns) {
  return {count("step_time.count", 5),
          {"step_time.median", median_ns, "ns", "median step time"},
          {"step_time.mean", median_ns * 1.01, "ns", "mean step time"}};
}

VariantResult variant(const std::string& name, double launches, double d2h, double syncs) {
  VariantResult v;
  v.name = name;
  v.axes = {{"policy", name.substr(0, name.find('/'))}, {"impl", name.substr(name.find('/') + 1)}};
  v.ran = true;
  v.measured_steps = 5;
  v.per_step = counts(launches, d2h, syncs);
  v.total = counts(launches * 5, d2h * 5, syncs * 5);
  v.phases["optimizer.step"] = counts(launches * 4, d2h * 5, syncs * 5);
  v.phases["train.forward"] = counts(launches, 0, 0);
  v.launches_by_op = {{"aten::mm", 10}, {"aten::_foreach_add_", 5}};
  v.timing = timing(1234567);
  v.samples["step_time"] = {1250000, 1234567, 1200000, 1234567.5, 1300000};
  v.samples["phase[optimizer.step].time"] = {400000, 410000, 405000, 399000, 420000};
  v.correctness = {true, true, "parameters equal the uninterrupted run bit for bit"};
  return v;
}

}  // namespace

RunReport sample_report() {
  RunReport r;
  r.provenance = {"0.1.0",
                  "abc1234",
                  true,
                  {"bench", "--scenario", "resume_adam"},
                  "Debug",
                  "2.11.0",
                  "",
                  "",
                  "sim",
                  "sim (simulated accelerator, host memory)",
                  "dispatcher",
                  "ok",
                  "ci-host",
                  "2025-01-01T00:00:00Z",
                  1};
  r.warnings = {"debug build: times are not representative"};

  ScenarioResult s;
  s.name = "resume_adam";
  s.description = "Adam's step tensor after resuming from a checkpoint";
  s.measured_window = "the 5 steps after resume";
  s.world_size = 2;
  s.config = {{"params", "4"}, {"steps", "5"}};
  s.variants.push_back(variant("fresh/foreach", 42, 4, 0));
  VariantResult move_all = variant("resume_move_all/foreach", 42, 12, 8);
  move_all.sync_sites = {{"optimizer.step", "aten::_local_scalar_dense", "item", 40, 123456,
                          "harness/runtime/optim/adam_foreach.cpp:145 in multi_tensor_adam"},
                         {"checkpoint.load", "aten::_copy_from", "blocking copy D2H", 2}};
  move_all.copy_sites = {{"checkpoint.load", "D2H", "blocking", "train.py:7 in load",
                          "torch/serialization.py:1 in load", 2, 4096}};
  move_all.event_sites = {{kGraphBreak, "optimizer.step", "Tensor.item()", "train.py:9 in step",
                           "", 5}};
  move_all.per_step.push_back({"sync.wait_time", 24691.2, "ns", "host time waited in syncs"});
  move_all.total.push_back({"sync.wait_time", 123456, "ns", "host time waited in syncs"});
  move_all.phases["optimizer.step"].push_back(
      {"gpu_time", std::nullopt, "ns", "summed durations of the device's work"});
  move_all.samples["sync.wait_time"] = {24000, 25000, 24691, 24765, 25000};
  move_all.warnings = {"step tensors live on the device"};
  s.variants.push_back(move_all);
  s.variants.push_back(variant("resume_keep_step/foreach", 42, 4, 0));
  VariantResult failed;
  failed.name = "resume_rebuild/foreach";
  failed.axes = {{"policy", "resume_rebuild"}, {"impl", "foreach"}};
  failed.error = "checkpoint not found";
  s.variants.push_back(failed);
  VariantResult forloop = variant("fresh/forloop", 2.4, 4, 0);
  forloop.correctness = {};
  s.variants.push_back(forloop);
  s.tables.push_back(
      {"syncs by parameter count", {"params", "syncs"}, {{"4", "8"}, {"64", "128"}}});
  r.scenarios.push_back(s);
  return r;
}

VariantResult& sample_variant(RunReport& report, const std::string& name) {
  for (auto& s : report.scenarios) {
    for (auto& v : s.variants) {
      if (v.name == name) return v;
    }
  }
  ADD_FAILURE() << "no variant " << name;
  return report.scenarios.at(0).variants.at(0);
}

bool operator==(const Measurement& a, const Measurement& b) {
  return std::tie(a.name, a.value, a.unit, a.description) ==
         std::tie(b.name, b.value, b.unit, b.description);
}
bool operator==(const SyncSite& a, const SyncSite& b) {
  return std::tie(a.phase, a.op, a.reason, a.count, a.wait_ns) ==
         std::tie(b.phase, b.op, b.reason, b.count, b.wait_ns);
}
bool operator==(const VariantResult& a, const VariantResult& b) {
  return std::tie(a.name, a.axes, a.ran, a.error, a.expected_failure, a.measured_steps, a.per_step,
                  a.total, a.phases, a.launches_by_op, a.sync_sites, a.timing, a.samples, a.warnings) ==
             std::tie(b.name, b.axes, b.ran, b.error, b.expected_failure, b.measured_steps,
                      b.per_step, b.total, b.phases, b.launches_by_op, b.sync_sites, b.timing,
                      b.samples, b.warnings) &&
         std::tie(a.correctness.checked, a.correctness.passed, a.correctness.detail) ==
             std::tie(b.correctness.checked, b.correctness.passed, b.correctness.detail);
}
bool operator==(const ResultTable& a, const ResultTable& b) {
  return std::tie(a.title, a.columns, a.rows) == std::tie(b.title, b.columns, b.rows);
}
bool operator==(const ScenarioResult& a, const ScenarioResult& b) {
  return std::tie(a.name, a.description, a.measured_window, a.config, a.world_size, a.variants,
                  a.tables) == std::tie(b.name, b.description, b.measured_window, b.config,
                                        b.world_size, b.variants, b.tables);
}
bool operator==(const Provenance& a, const Provenance& b) {
  return std::tie(a.tool_version, a.git_sha, a.git_dirty, a.argv, a.build_type, a.libtorch_version,
                  a.cuda_version, a.cupti_version, a.device, a.device_name, a.instrument,
                  a.instrument_status, a.hostname, a.started_at, a.world_size, a.ranks_per_host,
                  a.cpu_count) ==
         std::tie(b.tool_version, b.git_sha, b.git_dirty, b.argv, b.build_type, b.libtorch_version,
                  b.cuda_version, b.cupti_version, b.device, b.device_name, b.instrument,
                  b.instrument_status, b.hostname, b.started_at, b.world_size, b.ranks_per_host,
                  b.cpu_count);
}
bool operator==(const RunReport& a, const RunReport& b) {
  return std::tie(a.provenance, a.warnings, a.scenarios) ==
         std::tie(b.provenance, b.warnings, b.scenarios);
}

TempDir::TempDir() {
  static std::atomic<int> counter{0};
  dir_ = ::testing::TempDir() + "report_tests." + std::to_string(::getpid()) + "." +
         std::to_string(counter++);
  std::filesystem::remove_all(dir_);
  std::filesystem::create_directories(dir_);
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

std::string source_path(const std::string& relative) {
  const char* root = std::getenv("HARNESS_SOURCE_DIR");
  if (root == nullptr || *root == '\0') {
    ADD_FAILURE() << "HARNESS_SOURCE_DIR is not set: run report_tests through ctest, or set it to "
                     "the repository's root";
    return relative;
  }
  return std::string(root) + "/" + relative;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

::testing::AssertionResult assert_contains(const char* text_expr, const char* part_expr,
                                           const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << text_expr << " does not contain " << part_expr
                                       << "\n  text: " << text << "\n  part: " << part;
}

}  // namespace harness

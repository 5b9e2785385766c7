// Trainer: resuming from a checkpoint reproduces an uninterrupted run exactly, whatever the
// restore policy; the policies differ only in where `step` ends up.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "harness/instrument/sim/sim_device.h"
#include "harness/measure.h"
#include "harness/runtime/compare.h"
#include "harness/runtime/mlp.h"
#include "harness/runtime/trainer.h"

namespace harness::runtime {
namespace {

namespace fs = std::filesystem;

class TrainerResume : public ::testing::TestWithParam<AdamImpl> {
 protected:
  static void SetUpTestSuite() { sim::initialize(); }
  void SetUp() override { fs::create_directories(dir_); }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_ = (fs::temp_directory_path() / ("trainer_test_" + std::to_string(::getpid())))
                         .string();
  MlpConfig model{{8, 16, 4}, 3};
  SyntheticRegressionData data{{16, 8, 4, 5, true}};
};

TEST_P(TrainerResume, ResumedRunsMatchTheUninterruptedRun) {
  AdamOptions adam{.lr = 0.01, .impl = GetParam()};
  MlpRegression fresh(model, adam);
  SingleDeviceStrategy s0(sim::device(0), RestorePolicy::Rebuild);
  Trainer t0(s0, data, {6, 2});
  CheckpointCallback save(dir_, 3);
  t0.add_callback(&save);
  t0.fit(fresh);
  ASSERT_EQ(t0.global_step(), 6);

  for (RestorePolicy policy : {RestorePolicy::MoveAll, RestorePolicy::KeepStep,
                               RestorePolicy::Rebuild}) {
    MlpRegression resumed({{8, 16, 4}, 99}, adam);  // different init: the checkpoint decides
    SingleDeviceStrategy s1(sim::device(0), policy);
    Trainer t1(s1, data, {6, 2});
    t1.fit(resumed, save.path_for(3));
    EXPECT_EQ(t1.global_step(), 6);
    const auto cmp = compare_parameters(resumed.parameters(), fresh.parameters());
    EXPECT_TRUE(cmp.identical) << to_string(policy) << ": " << cmp.detail;
    bool step_on_device = false;
    t1.optimizer()->for_each_state_tensor([&](const std::string& key, at::Tensor& t) {
      if (key == "step") step_on_device = sim::is_sim(t);
    });
    EXPECT_EQ(step_on_device, policy == RestorePolicy::MoveAll) << to_string(policy);
  }
}

INSTANTIATE_TEST_SUITE_P(Impl, TrainerResume,
                         ::testing::Values(AdamImpl::Foreach, AdamImpl::ForLoop),
                         [](const auto& info) { return std::string(to_string(info.param)); });

TEST(Trainer, ValidateAndTestReturnFiniteLosses) {
  sim::initialize();
  MlpRegression m({{8, 4}, 1}, {});
  SyntheticRegressionData data({16, 8, 4, 5, true});
  SingleDeviceStrategy s(sim::device(0), RestorePolicy::Rebuild);
  Trainer t(s, data, {1, 2});
  const double v = t.validate(m);
  EXPECT_TRUE(std::isfinite(v));
  EXPECT_GT(v, 0.0);
  t.fit(m);
  EXPECT_TRUE(std::isfinite(t.test(m)));
}

}  // namespace
}  // namespace harness::runtime

namespace harness {
namespace {

TEST(StepWindow, CountsOnlyStepsAfterTheResumePointAndSwitchesOffWhenAStepThrows) {
  sim::initialize();
  auto instrument = make_instrument(DeviceKind::Sim);
  runtime::MlpRegression m({{8, 4}, 1}, {});
  runtime::SyntheticRegressionData data({16, 8, 4, 5, true});
  runtime::SingleDeviceStrategy s(sim::device(0), runtime::RestorePolicy::Rebuild);
  runtime::Trainer t(s, data, {3, 2});
  {
    StepWindow window(*instrument, 1);
    t.add_callback(&window);
    t.fit(m);
    EXPECT_EQ(window.steps(), 2);
    VariantResult r;
    window.finish(r);
    EXPECT_EQ(r.measured_steps, 2);
    EXPECT_EQ(find_metric(r, "per_step.h2d.count")->value, 2.0);  // input and target
  }
  {
    StepWindow window(*instrument, 0);
    window.on_train_step_start(t, 1);  // ... and the step throws before it ends
    EXPECT_TRUE(events::collecting());
  }
  EXPECT_FALSE(events::collecting());
}

TEST(StepWindow, TimesEachPhaseOfEachMeasuredStep) {
  sim::initialize();
  auto instrument = make_instrument(DeviceKind::Sim);
  runtime::MlpRegression m({{8, 16, 4}, 1}, {});
  runtime::SyntheticRegressionData data({16, 8, 4, 5, true});
  runtime::SingleDeviceStrategy s(sim::device(0), runtime::RestorePolicy::Rebuild);
  runtime::Trainer t(s, data, {4, 2});
  StepWindow window(*instrument, 1);
  t.add_callback(&window);
  t.fit(m);
  VariantResult r;
  window.finish(r);
  auto time = [&](const std::string& phase, const char* stat) {
    const Measurement* ms = find_metric(r, "phase[" + phase + "].time." + stat);
    EXPECT_NE(ms, nullptr) << phase << " " << stat;
    return ms && ms->value ? *ms->value : -1.0;
  };
  for (const char* phase : {"train.step", "train.forward", "train.backward", "optimizer.step"}) {
    EXPECT_GT(time(phase, "min"), 0) << phase;
    EXPECT_LE(time(phase, "min"), time(phase, "median")) << phase;
    EXPECT_LE(time(phase, "median"), time(phase, "max")) << phase;
    EXPECT_EQ(find_metric(r, "phase[" + std::string(phase) + "].time.median")->unit, "ns");
  }
  // Nested phases are inside train.step, which is inside the measured step.
  EXPECT_LT(time("optimizer.step", "max"), time("train.step", "max"));
  EXPECT_LE(time("train.step", "max"), find_metric(r, "timing.step_time.max")->value.value());
  // Not a count: never per step; the setup phase (before the window) has no time.
  EXPECT_EQ(find_metric(r, "per_step.time.median"), nullptr);
  EXPECT_EQ(find_metric(r, "phase[setup].time.median"), nullptr);
}

TEST(StepWindow, TimesTheMachineProbeAfterEachMeasuredStepOutsideItsCounts) {
  sim::initialize();
  auto instrument = make_instrument(DeviceKind::Sim);
  runtime::MlpRegression m({{8, 4}, 1}, {});
  runtime::SyntheticRegressionData data({16, 8, 4, 5, true});
  runtime::SingleDeviceStrategy s(sim::device(0), runtime::RestorePolicy::Rebuild);
  runtime::Trainer t(s, data, {5, 2});
  StepWindow window(*instrument, 1);
  t.add_callback(&window);
  t.fit(m);
  VariantResult r;
  window.finish(r);
  const std::vector<double>* probe = find_samples(r, "samples.machine_probe");
  ASSERT_NE(probe, nullptr);
  EXPECT_EQ(probe->size(), 4u);  // one per measured step
  for (double ns : *probe) EXPECT_GT(ns, 1000.0);  // real work: at least a microsecond
  EXPECT_NE(find_metric(r, "timing.machine_probe.median"), nullptr);
  // Host work only: the step's counts are what they are without it.
  EXPECT_EQ(find_metric(r, "per_step.h2d.count")->value, 2.0);
  EXPECT_EQ(find_metric(r, "per_step.sync.count")->value, 0.0);
}

TEST(StepWindow, InstrumentOverheadModeCountsEverySecondStepAndTimesTheOthers) {
  sim::initialize();
  auto instrument = make_instrument(DeviceKind::Sim);
  runtime::MlpRegression m({{8, 4}, 1}, {});
  runtime::SyntheticRegressionData data({16, 8, 4, 5, true});
  runtime::SingleDeviceStrategy s(sim::device(0), runtime::RestorePolicy::Rebuild);
  runtime::Trainer t(s, data, {6, 2});
  StepWindow window(*instrument, 1, /*interleave_uninstrumented=*/true);
  t.add_callback(&window);
  t.fit(m);
  EXPECT_EQ(window.steps(), 3);  // steps 2, 4, 6 counted; 3 and 5 timed only
  VariantResult r;
  window.finish(r);
  EXPECT_EQ(r.measured_steps, 3);
  EXPECT_EQ(find_metric(r, "per_step.h2d.count")->value, 2.0);  // the same per step as always
  EXPECT_EQ(find_metric(r, "total.h2d.count")->value, 6.0);
  auto timing = [&](const std::string& name) -> std::optional<double> {
    for (const Measurement& mm : r.timing) {
      if (mm.name == name) return mm.value;
    }
    ADD_FAILURE() << "no timing " << name;
    return std::nullopt;
  };
  EXPECT_EQ(timing("step_time.count"), 3.0);
  EXPECT_EQ(timing("step_time_uninstrumented.count"), 2.0);
  const std::optional<double> ratio = timing("instrument_overhead.median_ratio");
  ASSERT_TRUE(ratio.has_value());
  EXPECT_GT(*ratio, 0.0);
  // The Hodges-Lehmann estimate is there; 3 against 2 steps are too few for a 95% interval.
  const std::optional<double> hl = timing("instrument_overhead.ratio");
  ASSERT_TRUE(hl.has_value());
  EXPECT_GT(*hl, 0.0);
  EXPECT_FALSE(timing("instrument_overhead.ratio_low").has_value());
  EXPECT_FALSE(timing("instrument_overhead.ratio_high").has_value());
  EXPECT_FALSE(events::collecting());
}

// Memory levels of a real measured window: in total and in every phase, never per step.
TEST(StepWindow, MemoryIsInTotalAndPhasesAndNotDividedPerStep) {
  sim::initialize();
  auto instrument = make_instrument(DeviceKind::Sim);
  runtime::MlpRegression m({{8, 16, 4}, 1}, {});
  runtime::SyntheticRegressionData data({16, 8, 4, 5, true});
  runtime::SingleDeviceStrategy s(sim::device(0), runtime::RestorePolicy::Rebuild);
  runtime::Trainer t(s, data, {4, 2});
  int64_t parameter_bytes = 0;  // as the device holds them: each in a block of 512-byte units
  for (const at::Tensor& p : m.parameters()) {
    parameter_bytes += memory::held_bytes(0, static_cast<int64_t>(p.nbytes()));
  }
  const int64_t before = sim::memory_stats(0).allocated_bytes;
  StepWindow window(*instrument, 1);
  t.add_callback(&window);
  t.fit(m);
  VariantResult r;
  window.finish(r);
  ASSERT_EQ(r.measured_steps, 3);
  auto value = [&](const std::string& path) {
    const Measurement* mm = find_metric(r, path);
    EXPECT_NE(mm, nullptr) << path;
    EXPECT_TRUE(mm && mm->value) << path;
    return mm && mm->value ? *mm->value : -1.0;
  };
  for (const char* name : {"memory.peak_bytes", "memory.allocated_bytes",
                           "host_memory.peak_bytes", "host_memory.allocated_bytes"}) {
    EXPECT_EQ(find_metric(r, std::string("per_step.") + name), nullptr) << name;
    EXPECT_EQ(find_metric(r, std::string("total.") + name)->unit, "bytes");
    for (const auto& [phase, _] : r.phases) value("phase[" + phase + "]." + name);
  }
  // After a step the device holds parameters, gradients and Adam's two moments (its `step`
  // tensors are on the host), whatever the number of steps.
  EXPECT_EQ(value("total.memory.allocated_bytes"),
            static_cast<double>(before + 4 * parameter_bytes));
  // ... and at the end of optimizer.step the batch on the device is still alive too.
  const double batch_bytes = 16 * (8 + 4) * 4;
  EXPECT_GE(value("phase[optimizer.step].memory.allocated_bytes"),
            value("total.memory.allocated_bytes") + batch_bytes);
  // Activations and the batch come and go inside the step: the step's peak is the window's.
  EXPECT_GT(value("total.memory.peak_bytes"), value("total.memory.allocated_bytes"));
  EXPECT_EQ(value("phase[train.step].memory.peak_bytes"), value("total.memory.peak_bytes"));
  EXPECT_GE(value("phase[train.step].memory.peak_bytes"),
            value("phase[train.forward].memory.peak_bytes"));
  // The batch is made in pageable host memory (then pinned, which is not counted): host memory
  // in train.data.
  EXPECT_GE(value("phase[train.data].host_memory.peak_bytes"),
            value("phase[train.data].host_memory.allocated_bytes") + batch_bytes);
}

}  // namespace
}  // namespace harness

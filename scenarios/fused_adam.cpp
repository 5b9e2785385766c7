// fused_adam (Lightning #19955 thread; PyTorch's "fused > foreach > for-loop"): what each Adam
// implementation costs per step, fresh and after a resume that moved all optimizer state to the
// device (`move_all`), and how launches and step time grow with the number and size of parameter
// tensors.
//
// Variants:
//   fresh/<impl>, resumed_move_all/<impl>  the MLP of the preset, measured steps N+1..2N; a resumed
//                                          run must reproduce its fresh run bitwise
//   scale/<impl>/tensors=<n>/numel=<s>     optimizer.step alone over n tensors of s elements
// with <impl> one of forloop, foreach, fused, capturable (foreach with capturable=True); the
// training variants also run AdamW (weight_decay 0.01) as adamw_forloop, adamw_foreach and
// adamw_fused, the optimizers python/tests/test_fidelity.py checks against torch.optim.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/randn.h>

#include <chrono>
#include <string>
#include <vector>

#include "harness/instrument/phase.h"
#include "harness/interrupt.h"
#include "harness/measure.h"
#include "harness/report/text/format.h"
#include "harness/runtime/compare.h"
#include "harness/variant_runner.h"
#include "scenarios/presets.h"
#include "scenarios/training.h"

namespace harness::scenarios {
namespace {

using runtime::AdamImpl;
using runtime::AdamOptions;

struct Implementation {
  const char* name;
  AdamOptions options;
};

std::vector<Implementation> implementations() {
  AdamOptions forloop, foreach, fused, capturable;
  forloop.impl = AdamImpl::ForLoop;
  foreach.impl = AdamImpl::Foreach;
  fused.impl = AdamImpl::Fused;
  capturable.impl = AdamImpl::Foreach;
  capturable.capturable = true;
  return {{"forloop", forloop}, {"foreach", foreach}, {"fused", fused}, {"capturable", capturable}};
}

// The training variants' optimizers: the implementations above, and AdamW.
std::vector<Implementation> training_implementations() {
  std::vector<Implementation> all = implementations();
  for (const auto& [name, impl] : {std::pair{"adamw_forloop", AdamImpl::ForLoop},
                                   std::pair{"adamw_foreach", AdamImpl::Foreach},
                                   std::pair{"adamw_fused", AdamImpl::Fused}}) {
    AdamOptions adamw;
    adamw.impl = impl;
    adamw.decoupled_weight_decay = true;
    adamw.weight_decay = 0.01;
    all.push_back({name, adamw});
  }
  return all;
}

struct ScalingAxis {
  std::vector<int64_t> tensors;
  std::vector<int64_t> numel;
  int64_t steps;
};

ScalingAxis scaling_axis(const std::string& preset) {
  if (preset == "seed") return {{10, 100, 1000}, {1024, 1 << 20}, 10};
  return {{10, 100, 1000}, {256, 16384}, 10};
}

std::string scale_name(const char* impl, int64_t tensors, int64_t numel) {
  return std::string("scale/") + impl + "/tensors=" + std::to_string(tensors) +
         "/numel=" + std::to_string(numel);
}

// optimizer.step alone: `tensors` parameters of `numel` elements with fixed gradients; one step to
// initialise state, then `steps` measured steps.
void measure_optimizer_step(RunContext& ctx, const AdamOptions& options, int64_t tensors,
                            int64_t numel, int64_t steps, VariantResult& r) {
  const c10::Device device = ctx.device.device(0);
  at::Generator gen = at::detail::createCPUGenerator(11);
  std::vector<at::Tensor> params;
  for (int64_t i = 0; i < tensors; ++i) {
    at::Tensor p = at::randn({numel}, gen).to(device);
    p.set_requires_grad(true);
    p.mutable_grad() = at::randn({numel}, gen).to(device);
    params.push_back(p);
  }
  runtime::Adam adam(params, options);
  adam.step();
  (void)ctx.instrument.take();
  std::vector<int64_t> step_ns, cpu_ns, probe_ns;
  for (int64_t s = 0; s < steps; ++s) {
    throw_if_stopped();
    ctx.instrument.drain();  // timed from a drained device to a drained device (see StepWindow)
    Counting counting(ctx.instrument);
    const int64_t cpu0 = process_cpu_ns();
    const auto t0 = std::chrono::steady_clock::now();
    trace_step_begin(s + 1);
    {
      Phase phase("optimizer.step");
      adam.step();
    }
    ctx.instrument.drain();
    trace_step_end();
    step_ns.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now() - t0)
                          .count());
    cpu_ns.push_back(process_cpu_ns() - cpu0);
    probe_ns.push_back(time_machine_probe());  // after the step, outside its time
  }
  fill_counts(r, ctx.instrument.take(), steps, ctx.instrument.measures_launches(),
              ctx.instrument.available());
  set_step_times(r, step_ns, cpu_ns);
  add_machine_probe(r, probe_ns);
}

std::string metric_text(const VariantResult& v, const char* path) {
  const Measurement* m = find_metric(v, path);
  return m && m->value ? format_number(*m->value) : std::string("-");
}

class FusedAdam final : public Scenario {
 public:
  std::vector<std::string> variant_names(const RunOptions& options) const override {
    std::vector<std::string> names;
    for (const auto& impl : training_implementations()) {
      names.push_back(std::string("fresh/") + impl.name);
      names.push_back(std::string("resumed_move_all/") + impl.name);
    }
    const ScalingAxis axis = scaling_axis(options.preset);
    for (const auto& impl : implementations()) {
      for (int64_t n : axis.tensors) {
        for (int64_t s : axis.numel) names.push_back(scale_name(impl.name, n, s));
      }
    }
    return names;
  }

  ScenarioResult run(RunContext& ctx) override {
    const TrainingPreset preset = training_preset(ctx.options);
    const ScalingAxis axis = scaling_axis(ctx.options.preset);
    ScenarioResult result;
    result.name = "fused_adam";
    result.description = "Adam implementations side by side, fresh and resumed, and how they scale";
    result.measured_window = "training variants: steps " + std::to_string(preset.steps_before + 1) +
                             ".." + std::to_string(2 * preset.steps_before) +
                             "; scale variants: " + std::to_string(axis.steps) +
                             " optimizer steps after the first";
    result.config = preset.describe();
    VariantRunner runner(ctx, result.name, variant_names(ctx.options));

    for (const auto& impl : training_implementations()) {
      const std::string fresh_name = std::string("fresh/") + impl.name;
      const std::string ckpt_dir = ctx.scratch_dir + "/fused_adam_" + impl.name;
      std::vector<at::Tensor> reference;
      const VariantResult fresh = runner.run(fresh_name, [&](VariantResult& r) {
        r.axes = {{"impl", impl.name}, {"restore", "none"}};
        reference = train_and_measure(ctx, preset, impl.options, runtime::RestorePolicy::Rebuild,
                                      std::nullopt, ckpt_dir, r);
      });
      if (ctx.wants_variant(fresh_name)) result.variants.push_back(fresh);
      const std::string resumed_name = std::string("resumed_move_all/") + impl.name;
      if (!ctx.wants_variant(resumed_name)) continue;
      result.variants.push_back(runner.run(resumed_name, [&](VariantResult& r) {
        r.axes = {{"impl", impl.name}, {"restore", "move_all"}};
        require_fresh_run(fresh);
        const auto params =
            train_and_measure(ctx, preset, impl.options, runtime::RestorePolicy::MoveAll,
                              checkpoint_at_step_n(ckpt_dir, preset), std::nullopt, r);
        const auto cmp = runtime::compare_parameters(params, reference);
        r.correctness = {true, cmp.identical, "vs " + fresh_name + ": " + cmp.detail};
      }));
    }

    ResultTable scaling;
    scaling.title = "optimizer.step alone: per step, by number and size of parameter tensors";
    scaling.columns = {"impl", "tensors", "numel", "launch/step", "d2h/step", "sync/step",
                       "step time"};
    for (const auto& impl : implementations()) {
      for (int64_t n : axis.tensors) {
        for (int64_t s : axis.numel) {
          const std::string name = scale_name(impl.name, n, s);
          if (!ctx.wants_variant(name)) continue;
          VariantResult v = runner.run(name, [&](VariantResult& r) {
            r.axes = {{"impl", impl.name}, {"tensors", std::to_string(n)},
                      {"numel", std::to_string(s)}};
            measure_optimizer_step(ctx, impl.options, n, s, axis.steps, r);
          });
          const Measurement* median = find_metric(v, "timing.step_time.median");
          scaling.rows.push_back({impl.name, std::to_string(n), std::to_string(s),
                                  metric_text(v, "per_step.launch.count"),
                                  metric_text(v, "per_step.d2h.count"),
                                  metric_text(v, "per_step.sync.count"),
                                  median && median->value ? format_duration_ns(*median->value)
                                                          : std::string("-")});
          result.variants.push_back(std::move(v));
        }
      }
    }
    if (!scaling.rows.empty()) result.tables.push_back(std::move(scaling));
    return result;
  }
};

}  // namespace
}  // namespace harness::scenarios

HARNESS_REGISTER_SCENARIO("fused_adam",
                          "Adam for-loop vs foreach vs fused vs capturable: launches, copies and "
                          "syncs per step, fresh and resumed, and how they scale",
                          harness::scenarios::FusedAdam);

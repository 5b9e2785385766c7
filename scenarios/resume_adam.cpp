// resume_adam (Lightning #19955): after a resume, moving Adam's `step` to the device makes the
// non-fused, non-capturable Adam read it back with `.item()` -- a D2H copy and a sync each time,
// once per parameter per step for the for-loop, twice with foreach.
//
// Per Adam implementation: `fresh` trains 2N steps uninterrupted (saving a checkpoint at step N);
// each `resume_<policy>` variant restores that checkpoint into a new model, optimizer and trainer
// with its restore policy and trains steps N+1..2N. The measured window is steps N+1..2N in every
// variant, so counts compare like for like; a resumed run must end with parameters bitwise
// identical to the fresh run's.
#include <optional>
#include <string>
#include <vector>

#include "harness/runtime/compare.h"
#include "harness/report/text/format.h"
#include "harness/scenario.h"
#include "harness/variant_runner.h"
#include "scenarios/presets.h"
#include "scenarios/training.h"

namespace harness::scenarios {
namespace {

using runtime::AdamImpl;
using runtime::RestorePolicy;

constexpr AdamImpl kImpls[] = {AdamImpl::Foreach, AdamImpl::ForLoop};
constexpr RestorePolicy kRestorePolicies[] = {RestorePolicy::MoveAll, RestorePolicy::KeepStep,
                                       RestorePolicy::Rebuild};

std::string fresh_name(AdamImpl impl) { return std::string("fresh/") + to_string(impl); }
std::string resume_name(RestorePolicy policy, AdamImpl impl) {
  return std::string("resume_") + to_string(policy) + "/" + to_string(impl);
}

class ResumeAdam final : public Scenario {
 public:
  std::vector<std::string> variant_names(const RunOptions&) const override {
    std::vector<std::string> names;
    for (AdamImpl impl : kImpls) {
      names.push_back(fresh_name(impl));
      for (RestorePolicy p : kRestorePolicies) names.push_back(resume_name(p, impl));
    }
    return names;
  }

  ScenarioResult run(RunContext& ctx) override {
    const TrainingPreset preset = training_preset(ctx.options);
    ScenarioResult result;
    result.name = "resume_adam";
    result.description = "Adam after resuming from a checkpoint, by restore policy of its state";
    result.measured_window = "steps " + std::to_string(preset.steps_before + 1) + ".." +
                             std::to_string(2 * preset.steps_before) +
                             " (the steps after the resume)";
    result.config = preset.describe();

    VariantRunner runner(ctx, result.name, variant_names(ctx.options));
    for (AdamImpl impl : kImpls) {
      // The fresh run is the reference and writes the checkpoint: it runs whenever a variant of
      // this implementation is wanted.
      bool wanted = ctx.wants_variant(fresh_name(impl));
      for (RestorePolicy p : kRestorePolicies) wanted = wanted || ctx.wants_variant(resume_name(p, impl));
      if (!wanted) continue;
      const std::string ckpt_dir = ctx.scratch_dir + "/resume_adam_" + to_string(impl);
      const std::string ckpt = checkpoint_at_step_n(ckpt_dir, preset);
      runtime::AdamOptions adam;
      adam.impl = impl;
      std::vector<at::Tensor> reference;
      const VariantResult fresh = runner.run(fresh_name(impl), [&](VariantResult& r) {
        r.axes = {{"impl", to_string(impl)}, {"restore", "none"}};
        reference = train_and_measure(ctx, preset, adam, RestorePolicy::Rebuild, std::nullopt,
                                      ckpt_dir, r);
        r.correctness = {false, false, "reference: 2N steps without interruption"};
      });
      if (ctx.wants_variant(fresh.name)) result.variants.push_back(fresh);

      for (RestorePolicy policy : kRestorePolicies) {
        const std::string name = resume_name(policy, impl);
        if (!ctx.wants_variant(name)) continue;
        result.variants.push_back(runner.run(name, [&](VariantResult& r) {
          r.axes = {{"impl", to_string(impl)}, {"restore", to_string(policy)}};
          require_fresh_run(fresh);
          const auto params = train_and_measure(ctx, preset, adam, policy, ckpt, std::nullopt, r);
          const auto cmp = runtime::compare_parameters(params, reference);
          r.correctness = {true, cmp.identical,
                           "vs " + fresh.name + " after step " +
                               std::to_string(2 * preset.steps_before) + ": " + cmp.detail};
        }));
      }
    }
    result.tables.push_back(extra_reads_table(result, preset));
    return result;
  }

 private:
  // The pathology in one table: D2H copies and syncs per step, and how many more than fresh.
  static ResultTable extra_reads_table(const ScenarioResult& result, const TrainingPreset& preset) {
    ResultTable t;
    t.title = "D2H copies and syncs per measured step, vs fresh (" +
              std::to_string(preset.parameter_tensors()) + " parameter tensors)";
    t.columns = {"variant", "d2h/step", "sync/step", "extra d2h/step", "extra per param tensor"};
    for (const VariantResult& v : result.variants) {
      if (!v.ran) continue;
      const VariantResult* fresh = find_variant(result, "fresh/" + v.axes.at("impl"));
      const Measurement* d2h = find_metric(v, "per_step.d2h.count");
      const Measurement* sync = find_metric(v, "per_step.sync.count");
      const Measurement* base = fresh && fresh->ran ? find_metric(*fresh, "per_step.d2h.count")
                                                    : nullptr;
      auto num = [](const Measurement* m) {
        return m && m->value ? format_number(*m->value) : std::string("-");
      };
      std::string extra = "-", per_param = "-";
      if (d2h && d2h->value && base && base->value) {
        const double diff = *d2h->value - *base->value;
        extra = format_number(diff);
        per_param = format_number(diff / static_cast<double>(preset.parameter_tensors()));
      }
      t.rows.push_back({v.name, num(d2h), num(sync), extra, per_param});
    }
    return t;
  }
};

}  // namespace
}  // namespace harness::scenarios

HARNESS_REGISTER_SCENARIO("resume_adam",
                          "Adam after a resume: where `step` lives decides the syncs per step "
                          "(Lightning #19955)",
                          harness::scenarios::ResumeAdam);

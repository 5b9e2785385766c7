// A consumer's own scenario, run by the harness's own command line.
#include <ATen/ops/ones.h>

#include "bench/cli.h"
#include "harness/instrument/phase.h"
#include "harness/measure.h"
#include "harness/scenario.h"

namespace {

class ItemPerStep final : public harness::Scenario {
 public:
  std::vector<std::string> variant_names(const harness::RunOptions&) const override {
    return {"item_per_step"};
  }
  harness::ScenarioResult run(harness::RunContext& ctx) override {
    harness::ScenarioResult result;
    result.name = "consumer_item";
    result.measured_window = "3 steps";
    harness::VariantResult v;
    v.name = "item_per_step";
    at::Tensor t = at::ones({4}).to(ctx.device.device(0));
    {
      harness::Counting counting(ctx.instrument);
      for (int i = 0; i < 3; ++i) {
        harness::Phase phase("consumer.step");
        t.add_(1);
        (void)t.sum().item<float>();
      }
    }
    harness::fill_counts(v, ctx.instrument.take(), 3, ctx.instrument.measures_launches(),
                         ctx.instrument.available());
    v.ran = true;
    result.variants.push_back(v);
    return result;
  }
};

}  // namespace

HARNESS_REGISTER_SCENARIO("consumer_item", "a consumer's scenario: one .item() per step",
                          ItemPerStep);

int main(int argc, char** argv) { return harness::bench_main(argc, argv); }

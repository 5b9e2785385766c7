// Adam: the ops each implementation issues per step (pinned as a multiset, as PyTorch 2.11 issues
// them), where `step` lives, and that the implementations agree numerically.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "harness/errors.h"
#include "harness/instrument/collector.h"
#include "harness/instrument/sim/sim_device.h"
#include "harness/runtime/optim/adam.h"

namespace harness::runtime {
namespace {

std::vector<at::Tensor> make_params(c10::Device device, int n) {
  std::vector<at::Tensor> params;
  for (int i = 0; i < n; ++i) {
    at::Tensor p = at::linspace(-1.0, 1.0, 6 + i).reshape({-1}).to(device);
    p.set_requires_grad(true);
    params.push_back(p);
  }
  return params;
}

void set_grads(std::vector<at::Tensor>& params, int step) {
  for (size_t i = 0; i < params.size(); ++i) {
    at::Tensor g = at::sin(at::arange(params[i].numel(), at::kFloat) * (step + 1) + i);
    params[i].mutable_grad() = g.to(params[i].device());
  }
}

Counts count_step(Adam& adam) {
  EventCollector collector;
  {
    ScopedCollection scope(collector);
    adam.step();
  }
  return collector.snapshot();
}

class AdamOnSim : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { sim::initialize(); }
  c10::Device dev = sim::device(0);
};

TEST_F(AdamOnSim, ForeachIssuesPyTorchsOpsOncePerStep) {
  auto params = make_params(dev, 3);
  Adam adam(params, {.impl = AdamImpl::Foreach});
  set_grads(params, 0);
  adam.step();  // the first step also initialises state
  set_grads(params, 1);
  const PhaseCounts c = count_step(adam).total();
  const std::map<std::string, int64_t> expected = {
      {"aten::_foreach_lerp_", 1}, {"aten::_foreach_mul_", 1}, {"aten::_foreach_addcmul_", 1},
      {"aten::_foreach_sqrt", 1},  {"aten::_foreach_div_", 1}, {"aten::_foreach_add_", 1},
      {"aten::_foreach_addcdiv_", 1}};
  EXPECT_EQ(c.launches_by_op, expected);
  EXPECT_EQ(c.syncs, 0);  // step lives on the CPU: its .item() is free
  EXPECT_TRUE(adam.state(0)->step.device().is_cpu());
}

TEST_F(AdamOnSim, ForLoopIssuesPyTorchsOpsOncePerParameter) {
  auto params = make_params(dev, 3);
  Adam adam(params, {.impl = AdamImpl::ForLoop});
  set_grads(params, 0);
  adam.step();
  set_grads(params, 1);
  const PhaseCounts c = count_step(adam).total();
  const std::map<std::string, int64_t> expected = {
      {"aten::lerp_", 3}, {"aten::mul_", 3}, {"aten::addcmul_", 3}, {"aten::sqrt", 3},
      {"aten::div", 3},   {"aten::add_", 3},  {"aten::addcdiv_", 3}};
  EXPECT_EQ(c.launches_by_op, expected);
  EXPECT_EQ(c.syncs, 0);
}

// The multiset of ops of one step after the first (which also initialises state).
std::map<std::string, int64_t> ops_of_second_step(c10::Device dev, AdamOptions o, int n) {
  auto params = make_params(dev, n);
  Adam adam(params, o);
  set_grads(params, 0);
  adam.step();
  set_grads(params, 1);
  const PhaseCounts c = count_step(adam).total();
  EXPECT_EQ(c.syncs, 0) << implementation_name(o);
  EXPECT_EQ(c.d2h.count + c.h2d.count, 0) << implementation_name(o);
  EXPECT_TRUE(sim::is_sim(adam.state(0)->step)) << implementation_name(o);
  return c.launches_by_op;
}

TEST_F(AdamOnSim, FusedIssuesOneFusedKernelAndOneStepIncrement) {
  const std::map<std::string, int64_t> expected = {{"aten::_foreach_add_", 1},
                                                    {"aten::_fused_adam_", 1}};
  EXPECT_EQ(ops_of_second_step(dev, {.impl = AdamImpl::Fused}, 3), expected);
  const std::map<std::string, int64_t> adamw = {{"aten::_foreach_add_", 1},
                                                {"aten::_fused_adamw_", 1}};
  EXPECT_EQ(ops_of_second_step(dev, {.weight_decay = 0.01, .decoupled_weight_decay = true,
                                     .impl = AdamImpl::Fused}, 3),
            adamw);
}

TEST_F(AdamOnSim, CapturableForeachComputesBiasCorrectionsOnTheDevice) {
  const std::map<std::string, int64_t> expected = {
      {"aten::_foreach_add_", 2},  {"aten::_foreach_lerp_", 1},     {"aten::_foreach_mul_", 1},
      {"aten::_foreach_addcmul_", 1}, {"aten::_foreach_pow", 2},    {"aten::_foreach_sub_", 2},
      {"aten::_foreach_neg_", 1},  {"aten::_foreach_div_", 3},      {"aten::_foreach_reciprocal_", 1},
      {"aten::_foreach_sqrt_", 1}, {"aten::_foreach_sqrt", 1},      {"aten::_foreach_addcdiv_", 1}};
  EXPECT_EQ(ops_of_second_step(dev, {.impl = AdamImpl::Foreach, .capturable = true}, 3), expected);
}

TEST_F(AdamOnSim, CapturableForLoopComputesBiasCorrectionsOnTheDevice) {
  // Per parameter: step_t += 1; lerp_; mul_ + addcmul_; 1 - beta**step twice (pow, rsub);
  // lr / bc1 (reciprocal, mul); neg; sqrt; sqrt / (bc2_sqrt * neg) (mul, div);
  // eps / neg (reciprocal, mul); add_; addcdiv_. (rsub reaches the device as sub.) `mul_` by a
  // Python float is `aten::mul_` (a wrapped number), as from torch.optim (see python_number).
  const std::map<std::string, int64_t> expected = {
      {"aten::add_", 6},  {"aten::lerp_", 3}, {"aten::mul", 9},        {"aten::mul_", 3},
      {"aten::addcmul_", 3},
      {"aten::pow", 6},   {"aten::sub", 6},  {"aten::reciprocal", 6}, {"aten::neg", 3},
      {"aten::sqrt", 6},  {"aten::div", 3},   {"aten::addcdiv_", 3}};
  EXPECT_EQ(ops_of_second_step(dev, {.impl = AdamImpl::ForLoop, .capturable = true}, 3), expected);
}

TEST_F(AdamOnSim, CapturableNeedsADeviceThatSupportsIt) {
  auto params = make_params(c10::Device(c10::kCPU), 1);
  Adam adam(params, {.impl = AdamImpl::Foreach, .capturable = true});
  set_grads(params, 0);
  EXPECT_THROW(adam.step(), c10::Error);
}

TEST_F(AdamOnSim, EveryImplementationMatchesTheForLoop) {
  for (bool amsgrad : {false, true}) {
    for (bool adamw : {false, true}) {
      AdamOptions base{.lr = 0.01, .weight_decay = 0.05, .amsgrad = amsgrad,
                       .decoupled_weight_decay = adamw, .impl = AdamImpl::ForLoop};
      auto reference = make_params(c10::Device(c10::kCPU), 3);
      Adam ref(reference, base);
      std::vector<std::pair<AdamOptions, std::vector<at::Tensor>>> others;
      for (auto [impl, capturable] : {std::pair{AdamImpl::Foreach, false},
                                      std::pair{AdamImpl::Fused, false},
                                      std::pair{AdamImpl::ForLoop, true},
                                      std::pair{AdamImpl::Foreach, true}}) {
        AdamOptions o = base;
        o.impl = impl;
        o.capturable = capturable;
        others.emplace_back(o, make_params(dev, 3));
      }
      std::vector<std::unique_ptr<Adam>> optimizers;
      for (auto& [o, p] : others) optimizers.push_back(std::make_unique<Adam>(p, o));
      for (int step = 0; step < 6; ++step) {
        set_grads(reference, step);
        ref.step();
        for (size_t k = 0; k < others.size(); ++k) {
          set_grads(others[k].second, step);
          optimizers[k]->step();
        }
      }
      for (auto& [o, p] : others) {
        for (size_t i = 0; i < p.size(); ++i) {
          // PyTorch's own float32 tolerances (rtol 1.3e-6, atol 1e-5).
          EXPECT_TRUE(at::allclose(p[i].cpu(), reference[i].detach(), 1.3e-6, 1e-5))
              << implementation_name(o) << " amsgrad=" << amsgrad << " adamw=" << adamw
              << " param " << i;
        }
      }
    }
  }
}

TEST_F(AdamOnSim, FusedLoadStateDictPutsStepOnTheDevice) {
  auto params = make_params(dev, 2);
  Adam adam(params, {.impl = AdamImpl::Fused});
  set_grads(params, 0);
  adam.step();
  OptimizerStateDict sd = adam.state_dict();
  for (auto& [_, entries] : sd.state) {
    for (auto& [__, t] : entries) t = t.cpu();
  }
  EXPECT_TRUE(sd.param_groups[0].options.at("fused").toBool());
  Adam restored(params, {.impl = AdamImpl::ForLoop});
  restored.load_state_dict(sd);  // the saved group decides: fused
  EXPECT_EQ(restored.options().impl, AdamImpl::Fused);
  EXPECT_EQ(restored.state(0)->step.device(), dev);
  EXPECT_EQ(restored.state(0)->step.scalar_type(), at::kFloat);
}

TEST_F(AdamOnSim, TensorLrMatchesANumberLrAndIsRefusedByPlainForeach) {
  auto cpu_lr = at::scalar_tensor(0.01, at::kFloat);
  EXPECT_THROW(Adam(make_params(dev, 1), {.lr_tensor = cpu_lr, .impl = AdamImpl::Foreach}),
               c10::Error);
  for (auto [impl, capturable] : {std::pair{AdamImpl::ForLoop, false},
                                  std::pair{AdamImpl::Foreach, true},
                                  std::pair{AdamImpl::Fused, false}}) {
    for (bool lr_on_device : {false, true}) {
      AdamOptions number{.lr = 0.01, .weight_decay = 0.1, .decoupled_weight_decay = true,
                         .impl = impl, .capturable = capturable};
      AdamOptions tensor = number;
      tensor.lr_tensor = lr_on_device ? cpu_lr.to(dev) : cpu_lr;
      auto a = make_params(dev, 2), b = make_params(dev, 2);
      Adam with_number(a, number), with_tensor(b, tensor);
      for (int step = 0; step < 3; ++step) {
        set_grads(a, step);
        set_grads(b, step);
        with_number.step();
        with_tensor.step();
      }
      for (size_t i = 0; i < a.size(); ++i) {
        EXPECT_TRUE(at::allclose(a[i].cpu(), b[i].cpu(), 1.3e-6, 1e-5))
            << implementation_name(number) << " lr on device " << lr_on_device;
      }
      EXPECT_TRUE(with_tensor.state_dict().param_groups[0].options.at("lr").isTensor());
    }
  }
}

TEST_F(AdamOnSim, ForLoopReadsADeviceTensorLrOnTheHostEveryStep) {
  auto params = make_params(dev, 3);
  Adam adam(params, {.lr_tensor = at::scalar_tensor(0.01, at::kFloat).to(dev),
                     .impl = AdamImpl::ForLoop});
  set_grads(params, 0);
  adam.step();
  set_grads(params, 1);
  const Counts c = count_step(adam);
  EXPECT_EQ(c.total().syncs, 3);  // addcdiv_(value=-step_size) wants a number: one per parameter
  EXPECT_EQ(c.total().d2h.count, 3);
}

TEST_F(AdamOnSim, StepOnTheDeviceCostsItemsPerParameter) {
  for (AdamImpl impl : {AdamImpl::Foreach, AdamImpl::ForLoop}) {
    auto params = make_params(dev, 4);
    Adam adam(params, {.impl = impl});
    set_grads(params, 0);
    adam.step();
    adam.for_each_state_tensor([&](const std::string& key, at::Tensor& t) {
      if (key == "step") t = t.to(dev);  // what Lightning < 2.4 did on resume
    });
    set_grads(params, 1);
    const Counts counts = count_step(adam);
    const int64_t per_param = impl == AdamImpl::Foreach ? 2 : 1;
    EXPECT_EQ(counts.total().d2h.count, per_param * 4) << to_string(impl);
    EXPECT_EQ(counts.total().syncs, per_param * 4) << to_string(impl);
    // One site per line that reads a step: foreach's two bias corrections, for-loop's one.
    ASSERT_EQ(counts.sync_sites.size(), static_cast<size_t>(per_param)) << to_string(impl);
    for (const auto& [site, tally] : counts.sync_sites) {
      EXPECT_EQ(site.reason, "item");
      EXPECT_EQ(tally.count, 4);
      EXPECT_EQ(site.frame.rfind("harness/runtime/optim/adam", 0), 0u) << site.frame;
    }
  }
}

TEST_F(AdamOnSim, ImplementationsAgreeAndMatchTheCpu) {
  auto cpu = make_params(c10::Device(c10::kCPU), 3);
  auto loop = make_params(dev, 3);
  auto each = make_params(dev, 3);
  AdamOptions o{.lr = 0.01, .weight_decay = 0.1, .amsgrad = true};
  Adam a_cpu(cpu, o), a_loop(loop, o), a_each(each, o);
  a_cpu.options();
  for (int step = 0; step < 5; ++step) {
    set_grads(cpu, step);
    set_grads(loop, step);
    set_grads(each, step);
    a_cpu.step();
    a_loop.step();
    a_each.step();
  }
  for (size_t i = 0; i < cpu.size(); ++i) {
    EXPECT_TRUE(at::equal(loop[i].cpu(), cpu[i].detach()));  // same kernels, same order
    EXPECT_TRUE(at::allclose(each[i].cpu(), cpu[i].detach(), 1e-6, 1e-7));
  }
}

TEST_F(AdamOnSim, LoadStateDictPlacesStateAsPyTorch) {
  auto params = make_params(dev, 2);
  Adam adam(params, {.impl = AdamImpl::Foreach});
  set_grads(params, 0);
  adam.step();
  OptimizerStateDict sd = adam.state_dict();
  for (auto& [_, entries] : sd.state) {
    for (auto& [__, t] : entries) t = t.cpu();  // as loaded with map_location="cpu"
  }
  Adam restored(params, {.impl = AdamImpl::Foreach});
  restored.load_state_dict(sd);
  EXPECT_TRUE(restored.state(0)->step.device().is_cpu());  // step: kept as loaded
  EXPECT_EQ(restored.state(0)->exp_avg.device(), dev);      // the rest: to the param's device
  EXPECT_EQ(restored.state(0)->step.item<float>(), 1.0f);
}

TEST_F(AdamOnSim, LoadStateDictRejectsAMismatch) {
  auto params = make_params(dev, 2);
  Adam adam(params, {});
  set_grads(params, 0);
  adam.step();
  OptimizerStateDict sd = adam.state_dict();
  Adam other(make_params(dev, 3), {});
  EXPECT_THROW(other.load_state_dict(sd), InputError);
}

}  // namespace
}  // namespace harness::runtime

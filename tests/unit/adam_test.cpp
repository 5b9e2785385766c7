// Adam: the ops each implementation issues per step (pinned as a multiset, as PyTorch 2.11 issues
// them), where `step` lives, and that the implementations agree numerically.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "harness/errors.h"
#include "harness/instrument/collector.h"
#include "harness/instrument/sim/sim_device.h"
#include "harness/runtime/adam.h"

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
      {"aten::lerp_", 3}, {"aten::mul", 3}, {"aten::addcmul_", 3}, {"aten::sqrt", 3},
      {"aten::div", 3},   {"aten::add_", 3}, {"aten::addcdiv_", 3}};
  EXPECT_EQ(c.launches_by_op, expected);
  EXPECT_EQ(c.syncs, 0);
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
    ASSERT_EQ(counts.sync_sites.size(), 1u);
    EXPECT_EQ(counts.sync_sites.begin()->first.reason, "item");
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

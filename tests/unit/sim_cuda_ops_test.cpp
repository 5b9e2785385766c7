// Sim runs the op CUDA runs (issue 36), from C++: the kernels of cuda_*.cpp on small cases,
// forward and backward, with values against the CPU's (the Python tests pin every module; these
// keep the C++ path, and the sanitizer build, on the same kernels).
#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "harness/instrument/collector.h"
#include "harness/instrument/memory_ledger.h"
#include "harness/instrument/sim/sim_device.h"

namespace harness {
namespace {

using OpCounts = std::map<std::string, int64_t>;

class SimCudaOps : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { sim::initialize(); }

  // Launches by op of `body`, run on sim.
  static OpCounts launches(const std::function<void()>& body) {
    EventCollector collector;
    {
      ScopedCollection scope(collector);
      body();
    }
    return collector.snapshot().total().launches_by_op;
  }

  static at::Tensor on_sim(const at::Tensor& t, bool grad = false) {
    return t.to(sim::device(0)).detach().requires_grad_(grad);
  }
};

TEST_F(SimCudaOps, ConvolutionIsCudnnWithTheBiasAddedThenConvolutionBackward) {
  const at::Tensor x = at::randn({2, 3, 8, 8}), w = at::randn({4, 3, 3, 3}), b = at::randn({4});
  const at::Tensor xs = on_sim(x, true), ws = on_sim(w, true), bs = on_sim(b, true);
  at::Tensor out;
  const OpCounts ops = launches([&] {
    out = at::conv2d(xs, ws, bs, 1, 1);
    out.backward(at::ones_like(out));
  });
  EXPECT_EQ(ops, (OpCounts{{"aten::cudnn_convolution", 1},
                           {"aten::add_", 1},
                           {"aten::fill_", 1},
                           {"aten::convolution_backward", 1}}));
  const at::Tensor xc = x.clone().requires_grad_(), wc = w.clone().requires_grad_();
  const at::Tensor ref = at::conv2d(xc, wc, b, 1, 1);
  ref.backward(at::ones_like(ref));
  EXPECT_TRUE(at::allclose(out.cpu(), ref, 1e-5, 1e-5));
  EXPECT_TRUE(at::allclose(ws.grad().cpu(), wc.grad(), 1e-4, 1e-4));
}

TEST_F(SimCudaOps, LayerNormIsNativeLayerNormNotItsComposite) {
  const at::Tensor xs = on_sim(at::randn({3, 8}), true);
  const OpCounts ops = launches([&] { at::layer_norm(xs, {8}).sum().backward(); });
  EXPECT_EQ(ops, (OpCounts{{"aten::native_layer_norm", 1},
                           {"aten::sum", 1},
                           {"aten::fill_", 1},
                           {"aten::native_layer_norm_backward", 1}}));
}

TEST_F(SimCudaOps, LstmIsOneCudnnRnnForwardAndBackwardWithCpuValues) {
  const at::Tensor x = at::randn({5, 2, 3});
  std::vector<at::Tensor> params = {at::randn({16, 3}), at::randn({16, 4}), at::randn({16}),
                                    at::randn({16})};
  std::vector<at::Tensor> sim_params;
  for (const at::Tensor& p : params) sim_params.push_back(on_sim(p, true));
  const at::Tensor h = at::zeros({1, 2, 4}), c = at::zeros({1, 2, 4});
  at::Tensor out;
  const OpCounts ops = launches([&] {
    out = std::get<0>(
        at::lstm(on_sim(x), {on_sim(h), on_sim(c)}, sim_params, true, 1, 0.0, true, false, false));
    out.sum().backward();
  });
  EXPECT_EQ(ops, (OpCounts{{"aten::_cudnn_rnn", 1},
                           {"aten::sum", 1},
                           {"aten::fill_", 1},
                           {"aten::_cudnn_rnn_backward", 1}}));
  std::vector<at::Tensor> cpu_params;
  for (const at::Tensor& p : params) cpu_params.push_back(p.clone().requires_grad_());
  const at::Tensor ref =
      std::get<0>(at::lstm(x, {h, c}, cpu_params, true, 1, 0.0, true, false, false));
  ref.sum().backward();
  EXPECT_TRUE(at::allclose(out.cpu(), ref, 1e-5, 1e-5));
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_TRUE(at::allclose(sim_params[i].grad().cpu(), cpu_params[i].grad(), 1e-4, 1e-4)) << i;
  }
}

// The forward keeps its host graph in the reserve (as cuDNN's reserve space keeps activations)
// and its backward runs it; a graph retained for a second backward makes autograd save a copy of
// the reserve, and that backward recomputes the forward, drawing the forward's dropout masks
// again. Both give the CPU's gradients without dropout, and the same ones with it. The kept
// graph's memory is the device's until the autograd graph dies, backward or not.
TEST_F(SimCudaOps, LstmBackwardRunsTheKeptGraphOrRecomputesWithTheSameResult) {
  const at::Tensor x = at::randn({6, 3, 4});
  std::vector<at::Tensor> params;
  for (int layer = 0; layer < 2; ++layer) {
    params.insert(params.end(), {at::randn({20, layer == 0 ? 4 : 5}), at::randn({20, 5}),
                                 at::randn({20}), at::randn({20})});
  }
  const at::Tensor h = at::zeros({2, 3, 5}), c = at::zeros({2, 3, 5});
  // The output and the parameters' gradients after `backwards` backward passes, on x's device.
  const auto run = [&](const at::Tensor& input, double dropout, int backwards) {
    std::vector<at::Tensor> p;
    for (const at::Tensor& t : params) {
      p.push_back(input.is_cpu() ? t.clone().requires_grad_() : on_sim(t, true));
    }
    at::manual_seed(7);
    const at::Tensor out = std::get<0>(
        at::lstm(input, {input.is_cpu() ? h : on_sim(h), input.is_cpu() ? c : on_sim(c)}, p,
                 true, 2, dropout, true, false, false));
    for (int i = 0; i < backwards; ++i) out.sum().backward({}, /*retain_graph=*/i + 1 < backwards);
    std::vector<at::Tensor> results = {out.cpu()};
    for (const at::Tensor& t : p) results.push_back(t.grad().cpu() / backwards);
    return results;
  };
  const auto expect_close = [](const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b,
                               const std::string& what) {
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_TRUE(at::allclose(a[i], b[i], 1e-4, 1e-4)) << what << ", result " << i;
    }
  };
  const std::vector<at::Tensor> cpu = run(x, 0.0, 1);
  expect_close(run(on_sim(x), 0.0, 1), cpu, "kept graph");
  expect_close(run(on_sim(x), 0.0, 2), cpu, "recomputed");
  // The first dropout on a device makes its dropout state, drawing its seed from the CPU
  // generator (RNN.cpp's get_dropout_state, as on CUDA): made before the two runs compared.
  (void)run(on_sim(x), 0.5, 1);
  const std::vector<at::Tensor> kept = run(on_sim(x), 0.5, 1);
  expect_close(run(on_sim(x), 0.5, 2), kept, "dropout, recomputed vs kept");

  std::vector<at::Tensor> sim_params;
  for (const at::Tensor& p : params) sim_params.push_back(on_sim(p, true));
  const at::Tensor xs = on_sim(x), hs = on_sim(h), cs = on_sim(c);
  const int64_t before = memory::stats(0).allocated_bytes;
  {
    const at::Tensor out =  // a forward whose backward never comes
        std::get<0>(at::lstm(xs, {hs, cs}, sim_params, true, 2, 0.0, true, false, false));
    EXPECT_GT(memory::stats(0).allocated_bytes, before + 4 * out.nbytes());  // the graph, held
  }
  EXPECT_EQ(memory::stats(0).allocated_bytes, before);
}

TEST_F(SimCudaOps, AttentionTakesTheBackendAnH100Takes) {
  const at::Tensor q = at::randn({2, 2, 5, 16});
  const auto ops_for = [&](at::ScalarType dtype) {
    const at::Tensor qs = on_sim(q.to(dtype), true);
    return launches([&] { at::scaled_dot_product_attention(qs, qs, qs).sum().backward(); });
  };
  const OpCounts fp32 = ops_for(at::kFloat);
  EXPECT_EQ(fp32.at("aten::_scaled_dot_product_efficient_attention"), 1);
  EXPECT_EQ(fp32.at("aten::_scaled_dot_product_efficient_attention_backward"), 1);
  const OpCounts bf16 = ops_for(at::kBFloat16);
  EXPECT_EQ(bf16.at("aten::_scaled_dot_product_cudnn_attention"), 1);
  EXPECT_EQ(bf16.at("aten::_scaled_dot_product_cudnn_attention_backward"), 1);
  const at::Tensor qs = on_sim(q);
  EXPECT_TRUE(at::allclose(at::scaled_dot_product_attention(qs, qs, qs).cpu(),
                           at::scaled_dot_product_attention(q, q, q), 1e-5, 1e-5));
}

TEST_F(SimCudaOps, AutocastCastsAsCudaAndLetsEveryOtherOpThrough) {
  const at::Tensor a = on_sim(at::randn({4, 8})), b = on_sim(at::randn({8, 8}));
  at::autocast::set_autocast_enabled(c10::DeviceType::PrivateUse1, true);
  at::autocast::set_autocast_dtype(c10::DeviceType::PrivateUse1, at::kBFloat16);
  at::Tensor product, norm, range;
  const OpCounts ops = launches([&] {
    product = at::mm(a, b);               // lower precision: both inputs cast (copy_)
    norm = at::layer_norm(product, {8});  // fp32: its input cast back
    range = at::arange(4, a.options());   // no rule: falls through
  });
  at::autocast::set_autocast_enabled(c10::DeviceType::PrivateUse1, false);
  at::autocast::clear_cache();
  EXPECT_EQ(product.scalar_type(), at::kBFloat16);
  EXPECT_EQ(norm.scalar_type(), at::kFloat);
  EXPECT_EQ(ops.at("aten::copy_"), 3);
  EXPECT_EQ(ops.at("aten::mm"), 1);
  EXPECT_EQ(ops.at("aten::native_layer_norm"), 1);
  EXPECT_EQ(range.numel(), 4);
}

}  // namespace
}  // namespace harness

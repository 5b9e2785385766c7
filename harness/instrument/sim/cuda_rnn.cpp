// Recurrent networks on sim as CUDA runs them (aten/src/ATen/native/RNN.cpp and
// native/cudnn/RNN.cpp, torch 2.11).
//
// `lstm`, `gru`, `rnn_tanh` and `rnn_relu` are composite: on CUDA they hand the whole sequence to
// cuDNN when `use_cudnn(input)` holds (below): one `_cudnn_rnn` forward and one
// `_cudnn_rnn_backward`. Otherwise (cuDNN disabled, say) they unroll the sequence with CUDA's
// fused cells, `_thnn_fused_lstm_cell` / `_thnn_fused_gru_cell` per layer and time step (RNN.cpp
// takes that path for CUDA and PrivateUse1 alike; CPU has no kernel for them, which is why an LSTM
// failed on sim before). Sim registers its own kernels for those composites (at the autograd and
// the backend key, so that autograd records the `_cudnn_rnn` node as on CUDA) and for the CUDA-only
// ops they call. Each CUDA-only op is one launch, computed on the host: `_cudnn_rnn` by CPU's RNN,
// under CPU autograd when a backward will come, its reserve keeping that graph (as cuDNN's reserve
// space keeps the forward's activations); its backward runs the kept graph, or recomputes the
// forward when there is none (the reserve also holds the RNG state, so that dropout between layers
// draws the same mask); the fused cells by the cells' own arithmetic.
#include <ATen/Context.h>
#include <ATen/TensorOperators.h>
#include <ATen/autocast_mode.h>
#include <ATen/ops/_cudnn_init_dropout_state.h>
#include <ATen/ops/_cudnn_rnn.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/gru.h>
#include <ATen/ops/gru_native.h>
#include <ATen/ops/lstm.h>
#include <ATen/ops/lstm_native.h>
#include <ATen/ops/rnn_relu.h>
#include <ATen/ops/rnn_relu_native.h>
#include <ATen/ops/rnn_tanh.h>
#include <ATen/ops/rnn_tanh_native.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/tanh.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/library.h>

#include <map>
#include <memory>
#include <optional>
#include <mutex>
#include <tuple>
#include <vector>

#include "harness/instrument/sim/host_compute.h"

namespace harness::sim {
namespace {

// cudnnRNNMode_t, as `_cudnn_rnn`'s `mode` argument carries it.
enum RnnMode : int64_t { kRnnRelu = 0, kRnnTanh = 1, kLstm = 2, kGru = 3 };

// RNN.cpp's use_cudnn: cudnn_is_acceptable(input) (cuDNN enabled, not empty) and a dtype cuDNN
// runs: float64, float32, float16, and bfloat16 where cuDNN >= 9.13 runs on sm >= 8.0
// (CUDAHooks::supportsBFloat16RNNWithCuDNN; the torch 2.11 wheel's cuDNN is 9.19, an H100 is 9.0).
bool cudnn_acceptable(const at::Tensor& input) {
  const c10::ScalarType t = input.scalar_type();
  return at::globalContext().userEnabledCuDNN() && input.numel() > 0 &&
         (t == at::kDouble || t == at::kFloat || t == at::kHalf || t == at::kBFloat16);
}

// nn.RNNBase.flatten_parameters() puts the weights of a CUDA module in one buffer only for the
// dtypes torch.backends.cudnn.is_acceptable takes (float16, float32, float64): a bfloat16 module's
// weights stay apart, and `_cudnn_rnn` copies them into a buffer of its own at every call (with
// cuDNN's warning). A sim module is flattened only under `run --as-cuda` (where its tensors are
// `is_cuda`, see cudnn_rnn_flatten_weight); sim counts the per-call copies by dtype, where CUDA
// makes them, flattened or not.
bool cuda_copies_weights(const at::Tensor& weight) { return weight.scalar_type() == at::kBFloat16; }

constexpr const char* kWeightFormatWarning =
    "RNN module weights are not part of single contiguous chunk of memory. This means they need "
    "to be compacted at every call, possibly greatly increasing memory usage. To compact weights "
    "again call flatten_parameters().";

// ----- the CUDA-only ops ---------------------------------------------------------------------

struct RnnShape {
  int64_t mode;
  bool has_biases;
  int64_t num_layers;
  double dropout;
  bool train;
  bool bidirectional;
  bool batch_first;
};

// The whole RNN on the host: (output, hy, cy) for CPU tensors; cy undefined unless LSTM.
std::tuple<at::Tensor, at::Tensor, at::Tensor> host_rnn(const RnnShape& s, const at::Tensor& input,
                                                        const at::Tensor& batch_sizes,
                                                        const at::Tensor& hx, const at::Tensor& cx,
                                                        at::TensorList params) {
  const bool packed = batch_sizes.defined();
  if (s.mode == kLstm) {
    const std::vector<at::Tensor> hidden = {hx, cx};
    return packed ? at::lstm(input, batch_sizes, hidden, params, s.has_biases, s.num_layers,
                             s.dropout, s.train, s.bidirectional)
                  : at::lstm(input, hidden, params, s.has_biases, s.num_layers, s.dropout, s.train,
                             s.bidirectional, s.batch_first);
  }
  std::tuple<at::Tensor, at::Tensor> out;
  if (s.mode == kGru) {
    out = packed ? at::gru(input, batch_sizes, hx, params, s.has_biases, s.num_layers, s.dropout,
                           s.train, s.bidirectional)
                 : at::gru(input, hx, params, s.has_biases, s.num_layers, s.dropout, s.train,
                           s.bidirectional, s.batch_first);
  } else if (s.mode == kRnnTanh) {
    out = packed ? at::rnn_tanh(input, batch_sizes, hx, params, s.has_biases, s.num_layers,
                                s.dropout, s.train, s.bidirectional)
                 : at::rnn_tanh(input, hx, params, s.has_biases, s.num_layers, s.dropout, s.train,
                                s.bidirectional, s.batch_first);
  } else {
    TORCH_CHECK(s.mode == kRnnRelu, "sim: _cudnn_rnn mode ", s.mode, " is not an RNN mode");
    out = packed ? at::rnn_relu(input, batch_sizes, hx, params, s.has_biases, s.num_layers,
                                s.dropout, s.train, s.bidirectional)
                 : at::rnn_relu(input, hx, params, s.has_biases, s.num_layers, s.dropout, s.train,
                                s.bidirectional, s.batch_first);
  }
  return {std::get<0>(out), std::get<1>(out), at::Tensor()};
}

RnnShape rnn_shape(int64_t mode, int64_t weight_stride0, c10::SymInt proj_size, int64_t num_layers,
                   bool batch_first, double dropout, bool train, bool bidirectional) {
  const int64_t per_layer = weight_stride0 - (proj_size.expect_int() != 0 ? 1 : 0);
  return {mode, per_layer == 4, num_layers, dropout, train, bidirectional, batch_first};
}

at::Tensor batch_sizes_tensor(c10::SymIntArrayRef batch_sizes) {
  if (batch_sizes.empty()) return {};
  at::Tensor sizes = at::empty({static_cast<int64_t>(batch_sizes.size())}, at::kLong);
  for (size_t i = 0; i < batch_sizes.size(); ++i) {
    sizes.data_ptr<int64_t>()[i] = batch_sizes[i].expect_int();
  }
  return sizes;
}

// cuDNN works on (T, B, features): a batch-first result is that memory, transposed (as
// `_cudnn_rnn` returns its output and `_cudnn_rnn_backward` its input gradient).
at::Tensor sequence_layout(const at::Tensor& t, const RnnShape& s,
                           c10::SymIntArrayRef batch_sizes) {
  if (!t.defined()) return t;
  return s.batch_first && batch_sizes.empty() ? with_memory_order(t, {1, 0, 2}) : t.contiguous();
}

// A run of the host RNN: its inputs (input, hx, cx if any, the weights: under autograd, the
// leaves a backward differentiates with respect to) and its results.
struct HostRnnGraph {
  std::vector<at::Tensor> inputs;
  bool has_cx = false;
  at::Tensor out, hy, cy;
};

// What the host RNN takes for an argument's host tensor: the tensor itself (no graph), a leaf
// over its memory (the forward's graph), or a leaf over a copy (a recomputed forward).
at::Tensor as_is(const at::Tensor& t) { return t; }
at::Tensor leaf_over(const at::Tensor& t) {
  return t.defined() ? t.detach().requires_grad_(true) : t;
}
at::Tensor leaf_copy(const at::Tensor& t) {
  return t.defined() ? t.detach().clone().requires_grad_(true) : t;
}

// Runs the host RNN on the arguments' host tensors as `leaf` makes them (under autograd, the
// graph a backward differentiates).
HostRnnGraph host_rnn_graph(const RnnShape& shape, const at::Tensor& input,
                            const at::Tensor& batch_sizes, const at::Tensor& hx,
                            const std::optional<at::Tensor>& cx, at::TensorList weight,
                            at::Tensor (*leaf)(const at::Tensor&)) {
  HostRnnGraph graph;
  graph.has_cx = cx.has_value() && cx->defined();
  graph.inputs.push_back(leaf(on_host(input)));
  graph.inputs.push_back(leaf(on_host(hx)));
  if (graph.has_cx) graph.inputs.push_back(leaf(on_host(*cx)));
  std::vector<at::Tensor> w;
  for (const at::Tensor& t : weight) w.push_back(leaf(on_host(t)));
  graph.inputs.insert(graph.inputs.end(), w.begin(), w.end());
  std::tie(graph.out, graph.hy, graph.cy) =
      host_rnn(shape, graph.inputs[0], batch_sizes, graph.inputs[1],
               graph.has_cx ? graph.inputs[2] : at::Tensor(), w);
  return graph;
}

// `_cudnn_rnn`'s reserve on sim, as cuDNN's reserve space keeps what its backward needs: the CPU
// generator's state before the forward (for a backward that recomputes it, to draw the same
// dropout masks) and, when a backward will come, the forward's host graph, which that backward
// runs instead of recomputing the forward. What the graph holds was allocated as the launch's
// device memory and stays so until the reserve dies with the autograd node that saved it.
struct RnnReserve {
  at::Tensor rng_state;
  std::optional<HostRnnGraph> graph;
};

void release_rnn_reserve(void* ctx) { delete static_cast<RnnReserve*>(ctx); }

at::Tensor reserve_on(c10::Device device, std::unique_ptr<RnnReserve> reserve) {
  const at::Tensor state = reserve->rng_state;
  c10::Storage storage(c10::Storage::use_byte_size_t(), state.nbytes(),
                       c10::DataPtr(state.data_ptr(), reserve.release(), &release_rnn_reserve,
                                    device),
                       device_allocator(device.type()), /*resizable=*/false);
  return make_tensor_on(std::move(storage), keys_of(device.type()), state);
}

// The forward's graph that `reserve` keeps, or nullptr (none kept; or a copy of the reserve,
// which autograd saves when the graph is retained for a second backward).
const HostRnnGraph* kept_graph(const at::Tensor& reserve) {
  const c10::DataPtr& bytes = reserve.storage().data_ptr();
  if (bytes.get_deleter() != &release_rnn_reserve) return nullptr;
  const auto* kept = static_cast<const RnnReserve*>(bytes.get_context());
  return kept->graph ? &*kept->graph : nullptr;
}

// Whether autograd will want `_cudnn_rnn`'s backward: grad mode on and an argument that needs a
// gradient (the kernel runs below autograd, which has recorded the node then).
bool backward_will_come(const at::Tensor& input, const at::Tensor& hx,
                        const std::optional<at::Tensor>& cx, at::TensorList weight) {
  if (!at::GradMode::is_enabled()) return false;
  bool needed = input.requires_grad() || hx.requires_grad() ||
                (cx.has_value() && cx->defined() && cx->requires_grad());
  for (const at::Tensor& w : weight) needed = needed || w.requires_grad();
  return needed;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> cudnn_rnn(
    const at::Tensor& input, at::TensorList weight, int64_t weight_stride0,
    const std::optional<at::Tensor>& weight_buf, const at::Tensor& hx,
    const std::optional<at::Tensor>& cx, int64_t mode, c10::SymInt /*hidden_size*/,
    c10::SymInt proj_size, int64_t num_layers, bool batch_first, double dropout, bool train,
    bool bidirectional, c10::SymIntArrayRef batch_sizes,
    const std::optional<at::Tensor>& /*dropout_state*/) {
  const RnnShape shape = rnn_shape(mode, weight_stride0, proj_size, num_layers, batch_first,
                                   dropout, train, bidirectional);
  const bool keep_graph = backward_will_come(input, hx, cx, weight);
  return launch_on_host("aten::_cudnn_rnn", input, [&] {
    const c10::Device device = input.device();
    const bool no_buffer = !weight_buf.has_value() || !weight_buf->defined();
    if (no_buffer && !weight.empty() && cuda_copies_weights(weight[0])) {
      TORCH_WARN(kWeightFormatWarning);
      for (const at::Tensor& w : weight) {  // _copyParams: one device-to-device copy each
        events::record_copy(CopyKind::DeviceToDevice,
                            w.numel() * static_cast<int64_t>(w.element_size()), false);
      }
    }
    auto reserve = std::make_unique<RnnReserve>();
    reserve->rng_state = save_host_rng_state();
    HostRnnGraph run;
    {
      std::optional<HostAutogradScope> autograd;  // a graph only for a backward to come
      if (keep_graph) autograd.emplace();
      run = host_rnn_graph(shape, input, batch_sizes_tensor(batch_sizes), hx, cx, weight,
                           keep_graph ? &leaf_over : &as_is);
    }
    const at::Tensor out = run.out, hy = run.hy, cy = run.cy;
    if (keep_graph) reserve->graph = std::move(run);
    at::Tensor buf = weight_buf.has_value() && weight_buf->defined()
                         ? *weight_buf
                         : to_device(at::empty({0}, input.options().device(at::kCPU)), device);
    return std::make_tuple(to_device(sequence_layout(out.detach(), shape, batch_sizes), device),
                           to_device(hy.detach().contiguous(), device),
                           to_device(cy.defined() ? cy.detach() : cy, device),
                           reserve_on(device, std::move(reserve)), buf);
  });
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, std::vector<at::Tensor>> cudnn_rnn_backward(
    const at::Tensor& input, at::TensorList weight, int64_t weight_stride0,
    const at::Tensor& /*weight_buf*/, const at::Tensor& hx, const std::optional<at::Tensor>& cx,
    const at::Tensor& /*output*/, const std::optional<at::Tensor>& grad_output,
    const std::optional<at::Tensor>& grad_hy, const std::optional<at::Tensor>& grad_cy,
    int64_t mode, c10::SymInt /*hidden_size*/, c10::SymInt proj_size, int64_t num_layers,
    bool batch_first, double dropout, bool train, bool bidirectional,
    c10::SymIntArrayRef batch_sizes, const std::optional<at::Tensor>& /*dropout_state*/,
    const at::Tensor& reserve, std::array<bool, 4> /*output_mask*/) {
  const RnnShape shape = rnn_shape(mode, weight_stride0, proj_size, num_layers, batch_first,
                                   dropout, train, bidirectional);
  return launch_on_host("aten::_cudnn_rnn_backward", input, [&] {
    const c10::Device device = input.device();
    const HostAutogradScope autograd;
    // The forward's graph when its reserve kept one; else the forward again, drawing the
    // dropout masks it drew.
    const HostRnnGraph* kept = kept_graph(reserve);
    HostRnnGraph recomputed;
    if (kept == nullptr) {
      const HostRngRestore rng(on_host(reserve));
      recomputed = host_rnn_graph(shape, input, batch_sizes_tensor(batch_sizes), hx, cx, weight,
                                  leaf_copy);
    }
    const HostRnnGraph& graph = kept != nullptr ? *kept : recomputed;
    torch::autograd::variable_list outputs, grads;
    const auto add = [&](const at::Tensor& result, const std::optional<at::Tensor>& grad) {
      if (result.defined() && grad.has_value() && grad->defined()) {
        outputs.push_back(result);
        grads.push_back(on_host(*grad));
      }
    };
    add(graph.out, grad_output);
    add(graph.hy, grad_hy);
    add(graph.cy, grad_cy);
    const torch::autograd::variable_list& inputs = graph.inputs;
    torch::autograd::variable_list result(inputs.size());
    if (!outputs.empty()) {
      result = torch::autograd::grad(outputs, inputs, grads, /*retain_graph=*/false,
                                     /*create_graph=*/false, /*allow_unused=*/true);
    }
    const auto grad_of = [&](size_t i) {
      return result[i].defined() ? to_device(result[i].contiguous(), device)
                                 : to_device(at::zeros_like(inputs[i].detach()), device);
    };
    std::vector<at::Tensor> dweight;
    const size_t first_weight = graph.has_cx ? 3 : 2;
    for (size_t i = first_weight; i < inputs.size(); ++i) dweight.push_back(grad_of(i));
    at::Tensor dx = to_device(
        sequence_layout(result[0].defined() ? result[0] : at::zeros_like(inputs[0].detach()),
                        shape, batch_sizes),
        device);
    return std::make_tuple(dx, grad_of(1), graph.has_cx ? grad_of(2) : at::Tensor(),
                           std::move(dweight));
  });
}

// CUDA's fused cells (native/cuda/RNN.cu): gates summed with the biases, activated; the
// workspace keeps what the backward needs, in CUDA's shapes.
std::tuple<at::Tensor, at::Tensor, at::Tensor> fused_lstm_cell(
    const at::Tensor& input_gates, const at::Tensor& hidden_gates, const at::Tensor& cx,
    const std::optional<at::Tensor>& input_bias, const std::optional<at::Tensor>& hidden_bias) {
  return launch_on_host("aten::_thnn_fused_lstm_cell", input_gates, [&] {
    const c10::Device device = input_gates.device();
    at::Tensor gates = on_host(input_gates) + on_host(hidden_gates);
    if (input_bias.has_value() && input_bias->defined()) {
      gates = gates + on_host(*input_bias) + on_host(*hidden_bias);
    }
    auto chunks = gates.chunk(4, 1);
    const at::Tensor i = chunks[0].sigmoid(), f = chunks[1].sigmoid(), g = chunks[2].tanh(),
                     o = chunks[3].sigmoid();
    at::Tensor cy = f * on_host(cx) + i * g;
    at::Tensor hy = o * cy.tanh();
    at::Tensor workspace = at::cat({i, f, g, o}, 1);
    return std::make_tuple(to_device(hy, device), to_device(cy, device),
                           to_device(workspace, device));
  });
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> fused_lstm_cell_backward_impl(
    const std::optional<at::Tensor>& grad_hy, const std::optional<at::Tensor>& grad_cy,
    const at::Tensor& cx, const at::Tensor& cy, const at::Tensor& workspace, bool has_bias) {
  return launch_on_host("aten::_thnn_fused_lstm_cell_backward_impl", workspace, [&] {
    const c10::Device device = workspace.device();
    auto w = on_host(workspace).chunk(4, 1);
    const at::Tensor &i = w[0], &f = w[1], &g = w[2], &o = w[3];
    const at::Tensor tanh_cy = on_host(cy).tanh();
    at::Tensor ghy =
        grad_hy.has_value() && grad_hy->defined() ? on_host(*grad_hy) : at::zeros_like(tanh_cy);
    at::Tensor gcx = ghy * o * (1 - tanh_cy * tanh_cy);
    if (grad_cy.has_value() && grad_cy->defined()) gcx = gcx + on_host(*grad_cy);
    at::Tensor gates = at::cat({gcx * g * i * (1 - i), gcx * on_host(cx) * f * (1 - f),
                                gcx * i * (1 - g * g), ghy * tanh_cy * o * (1 - o)},
                               1);
    at::Tensor grad_cx = gcx * f;
    at::Tensor grad_bias = has_bias ? gates.sum(0) : at::Tensor();
    return std::make_tuple(to_device(gates, device), to_device(grad_cx, device),
                           to_device(grad_bias, device));
  });
}

std::tuple<at::Tensor, at::Tensor> fused_gru_cell(const at::Tensor& input_gates,
                                                  const at::Tensor& hidden_gates,
                                                  const at::Tensor& hx,
                                                  const std::optional<at::Tensor>& input_bias,
                                                  const std::optional<at::Tensor>& hidden_bias) {
  return launch_on_host("aten::_thnn_fused_gru_cell", input_gates, [&] {
    const c10::Device device = input_gates.device();
    at::Tensor ig = on_host(input_gates), hg = on_host(hidden_gates);
    if (input_bias.has_value() && input_bias->defined()) {
      ig = ig + on_host(*input_bias);
      hg = hg + on_host(*hidden_bias);
    }
    auto in = ig.chunk(3, 1);
    auto hn = hg.chunk(3, 1);
    const at::Tensor h = on_host(hx);
    const at::Tensor r = (in[0] + hn[0]).sigmoid();
    const at::Tensor z = (in[1] + hn[1]).sigmoid();
    const at::Tensor n = (in[2] + r * hn[2]).tanh();
    at::Tensor hy = n + z * (h - n);
    at::Tensor workspace = at::cat({r, z, n, hn[2], h}, 1);
    return std::make_tuple(to_device(hy, device), to_device(workspace, device));
  });
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> fused_gru_cell_backward(
    const at::Tensor& grad_hy, const at::Tensor& workspace, bool has_bias) {
  return launch_on_host("aten::_thnn_fused_gru_cell_backward", workspace, [&] {
    const c10::Device device = workspace.device();
    auto w = on_host(workspace).chunk(5, 1);
    const at::Tensor &r = w[0], &z = w[1], &n = w[2], &hn = w[3], &h = w[4];
    const at::Tensor g = on_host(grad_hy);
    const at::Tensor gz = g * (h - n) * z * (1 - z);
    const at::Tensor gn = g * (1 - z) * (1 - n * n);
    const at::Tensor gr = gn * hn * r * (1 - r);
    at::Tensor grad_input_gates = at::cat({gr, gz, gn}, 1);
    at::Tensor grad_hidden_gates = at::cat({gr, gz, gn * r}, 1);
    at::Tensor grad_hx = g * z;
    at::Tensor grad_input_bias = has_bias ? grad_input_gates.sum(0) : at::Tensor();
    at::Tensor grad_hidden_bias = has_bias ? grad_hidden_gates.sum(0) : at::Tensor();
    return std::make_tuple(to_device(grad_input_gates, device),
                           to_device(grad_hidden_gates, device), to_device(grad_hx, device),
                           to_device(grad_input_bias, device), to_device(grad_hidden_bias, device));
  });
}

at::Tensor cudnn_init_dropout_state(double /*dropout*/, bool /*train*/, int64_t /*dropout_seed*/,
                                    std::optional<c10::ScalarType> /*dtype*/,
                                    std::optional<c10::Layout> /*layout*/,
                                    std::optional<c10::Device> device,
                                    std::optional<bool> /*pin_memory*/) {
  TORCH_CHECK(device.has_value(), "sim: _cudnn_init_dropout_state needs a device");
  const at::Tensor like = at::empty({0}, at::TensorOptions().dtype(at::kByte).device(*device));
  return launch_on_host("aten::_cudnn_init_dropout_state", like, [&] { return like; });
}

// aten/src/ATen/cudnn/AutocastRNN.cpp's _cudnn_rnn_cast_reflatten, CUDA's autocast kernel for
c10::DispatchKey autocast_key_of(c10::DeviceType type) {
  return type == c10::DeviceType::CUDA ? c10::DispatchKey::AutocastCUDA
                                       : c10::DispatchKey::AutocastPrivateUse1;
}

// `_cudnn_rnn`: float16 whatever the region's dtype (it names kHalf), the weights cast into views
// of one new flat buffer (zeros, then a copy per weight, seen by autograd) unless they are
// float16 already, the input and hidden states cast as any autocast op's arguments are.
// (Per torch 2.11's sources read for this, not run on a GPU.)
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> cudnn_rnn_autocast(
    const at::Tensor& input, at::TensorList weight, int64_t weight_stride0,
    const std::optional<at::Tensor>& weight_buf, const at::Tensor& hx,
    const std::optional<at::Tensor>& cx, int64_t mode, c10::SymInt hidden_size,
    c10::SymInt proj_size, int64_t num_layers, bool batch_first, double dropout, bool train,
    bool bidirectional, c10::SymIntArrayRef batch_sizes,
    const std::optional<at::Tensor>& dropout_state) {
  const c10::DeviceType kSim = input.device().type();  // sim's, or CUDA served by sim
  const c10::impl::ExcludeDispatchKeyGuard no_autocast(autocast_key_of(kSim));
  at::Tensor buf = weight_buf.value_or(at::Tensor());
  const at::Tensor& probe = buf.defined() ? buf : weight[0];
  const bool cast =
      at::autocast::is_autocast_eligible(probe, kSim) && probe.scalar_type() != at::kHalf;
  std::vector<at::Tensor> weights(weight.begin(), weight.end());
  if (cast) {
    int64_t total = 0;
    for (const at::Tensor& w : weight) total += w.numel();
    at::Tensor flat = at::zeros({total}, weight[0].options().dtype(at::kHalf));
    int64_t offset = 0;
    for (size_t i = 0; i < weights.size(); ++i) {
      const int64_t n = weight[i].numel();
      // views of the buffer made with set_, as cuDNN's _viewOrCopyParams makes them: autograd
      // sees each copy on its own (CopyBackwards, a cast back per weight), not the buffer
      weights[i] = at::empty({0}, flat.options()).set_(flat.storage(), offset, weight[i].sizes());
      weights[i].copy_(weight[i]);
      offset += n;
    }
    buf = flat.detach();
  }
  const auto half = [&](const at::Tensor& t) {
    return at::autocast::cached_cast(at::kHalf, t, kSim);
  };
  return at::_cudnn_rnn_symint(
      half(input), weights, weight_stride0,
      buf.defined() ? std::optional<at::Tensor>(buf) : std::nullopt, half(hx),
      cx.has_value() ? std::optional<at::Tensor>(half(*cx)) : std::nullopt, mode,
      std::move(hidden_size), std::move(proj_size), num_layers, batch_first, dropout, train,
      bidirectional, batch_sizes, dropout_state);
}

// ----- the composites, with CUDA's choice ------------------------------------------------------

// cudnn/RNN.cpp's get_dropout_state: cuDNN's dropout state, made once per device (its seed drawn
// from a host tensor) the first time a training call drops out, then kept.
std::optional<at::Tensor> dropout_state(double dropout, bool train, const at::Tensor& input) {
  if (!train || dropout <= 0.0) return std::nullopt;
  static std::mutex mu;
  static std::map<c10::DeviceIndex, at::Tensor> states;
  const std::lock_guard<std::mutex> lock(mu);
  at::Tensor& state = states[input.device().index()];
  if (!state.defined()) {
    const int64_t seed = at::empty({}, at::kLong).random_().item<int64_t>();
    state = at::_cudnn_init_dropout_state(dropout, train, seed, input.options().dtype(at::kByte));
  }
  return state;
}

// cudnn/RNN.cpp's _cudnn_impl: the weights as one list (no flattened buffer on sim: nn.RNNBase
// flattens only CUDA tensors), the sequence in one `_cudnn_rnn`.
std::tuple<at::Tensor, at::Tensor, at::Tensor> cudnn_impl(
    const at::Tensor& input, const at::Tensor& batch_sizes, const at::Tensor& hx,
    const at::Tensor& cx, at::TensorList params, bool has_biases, RnnMode mode, int64_t num_layers,
    double dropout, bool train, bool bidirectional, bool batch_first) {
  c10::SymInt hidden_size = hx.sym_size(2);
  c10::SymInt proj_size = 0;
  if (cx.defined() && cx.sym_size(2) != hx.sym_size(2)) {  // an LSTM with projections
    hidden_size = cx.sym_size(2);
    proj_size = hx.sym_size(2);
  }
  const int64_t num_params = (has_biases ? 4 : 2) + (proj_size != 0 ? 1 : 0);
  std::vector<c10::SymInt> sizes;
  if (batch_sizes.defined()) {
    const at::Tensor host_sizes = batch_sizes.contiguous();  // a CPU tensor: no device read
    const int64_t* b = host_sizes.data_ptr<int64_t>();
    for (int64_t i = 0; i < host_sizes.numel(); ++i) sizes.emplace_back(b[i]);
  }
  auto out = at::_cudnn_rnn_symint(input, params, num_params, std::nullopt, hx,
                                   cx.defined() ? std::optional<at::Tensor>(cx) : std::nullopt,
                                   mode, hidden_size, proj_size, num_layers,
                                   batch_sizes.defined() ? false : batch_first, dropout, train,
                                   bidirectional, sizes, dropout_state(dropout, train, input));
  return {std::get<0>(out), std::get<1>(out), std::get<2>(out)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> lstm_input(const at::Tensor& input,
                                                          at::TensorList hx, at::TensorList params,
                                                          bool has_biases, int64_t num_layers,
                                                          double dropout, bool train,
                                                          bool bidirectional, bool batch_first) {
  if (!cudnn_acceptable(input)) {
    return at::native::lstm(input, hx, params, has_biases, num_layers, dropout, train,
                            bidirectional, batch_first);
  }
  TORCH_CHECK(hx.size() == 2, "lstm expects two hidden states");
  return cudnn_impl(input, at::Tensor(), hx[0], hx[1], params, has_biases, kLstm, num_layers,
                    dropout, train, bidirectional, batch_first);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> lstm_data(
    const at::Tensor& data, const at::Tensor& batch_sizes, at::TensorList hx, at::TensorList params,
    bool has_biases, int64_t num_layers, double dropout, bool train, bool bidirectional) {
  if (!cudnn_acceptable(data)) {
    return at::native::lstm(data, batch_sizes, hx, params, has_biases, num_layers, dropout, train,
                            bidirectional);
  }
  TORCH_CHECK(hx.size() == 2, "lstm expects two hidden states");
  return cudnn_impl(data, batch_sizes, hx[0], hx[1], params, has_biases, kLstm, num_layers, dropout,
                    train, bidirectional, false);
}

// gru, rnn_tanh and rnn_relu share their signatures; `Native` is the composite CUDA does not
// take when cuDNN is acceptable.
using RnnInputFn = std::tuple<at::Tensor, at::Tensor> (*)(const at::Tensor&, const at::Tensor&,
                                                          at::TensorList, bool, int64_t, double,
                                                          bool, bool, bool);
using RnnDataFn = std::tuple<at::Tensor, at::Tensor> (*)(const at::Tensor&, const at::Tensor&,
                                                         const at::Tensor&, at::TensorList, bool,
                                                         int64_t, double, bool, bool);

template <RnnMode Mode, RnnInputFn Native>
std::tuple<at::Tensor, at::Tensor> rnn_input(const at::Tensor& input, const at::Tensor& hx,
                                             at::TensorList params, bool has_biases,
                                             int64_t num_layers, double dropout, bool train,
                                             bool bidirectional, bool batch_first) {
  if (!cudnn_acceptable(input)) {
    return Native(input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
                  batch_first);
  }
  auto out = cudnn_impl(input, at::Tensor(), hx, at::Tensor(), params, has_biases, Mode, num_layers,
                        dropout, train, bidirectional, batch_first);
  return {std::get<0>(out), std::get<1>(out)};
}

template <RnnMode Mode, RnnDataFn Native>
std::tuple<at::Tensor, at::Tensor> rnn_data(const at::Tensor& data, const at::Tensor& batch_sizes,
                                            const at::Tensor& hx, at::TensorList params,
                                            bool has_biases, int64_t num_layers, double dropout,
                                            bool train, bool bidirectional) {
  if (!cudnn_acceptable(data)) {
    return Native(data, batch_sizes, hx, params, has_biases, num_layers, dropout, train,
                  bidirectional);
  }
  auto out = cudnn_impl(data, batch_sizes, hx, at::Tensor(), params, has_biases, Mode, num_layers,
                        dropout, train, bidirectional, false);
  return {std::get<0>(out), std::get<1>(out)};
}

// cudnn/RNN.cpp's _cudnn_rnn_flatten_weight (nn.RNNBase.flatten_parameters on a CUDA module):
// one buffer of the weights' total size, zeroed (a launch), each weight copied into its place (a
// device-to-device copy each, _copyParams) and then made a view of it (set_), so that every
// `_cudnn_rnn` finds them in one chunk. cuDNN orders a layer's matrices before its biases, as
// PyTorch's weight list does.
at::Tensor cudnn_rnn_flatten_weight(at::TensorList weight_arr, int64_t /*weight_stride0*/,
                                    c10::SymInt /*input_size*/, int64_t /*mode*/,
                                    c10::SymInt /*hidden_size*/, c10::SymInt /*proj_size*/,
                                    int64_t /*num_layers*/, bool /*batch_first*/,
                                    bool /*bidirectional*/) {
  TORCH_CHECK(!weight_arr.empty(), "_cudnn_rnn_flatten_weight_: cannot flatten empty weight list");
  int64_t total = 0;
  for (const at::Tensor& w : weight_arr) total += w.numel();
  at::Tensor buffer = at::zeros({total}, weight_arr[0].options());
  int64_t offset = 0;
  for (const at::Tensor& w : weight_arr) {
    at::Tensor slot = buffer.narrow(0, offset, w.numel()).view(w.sizes());
    slot.copy_(w);
    w.set_(slot);
    offset += w.numel();
  }
  return buffer;
}

void register_composites(torch::Library& m) {
  m.impl("lstm.input", TORCH_FN(lstm_input));
  m.impl("lstm.data", TORCH_FN(lstm_data));
  m.impl("gru.input", TORCH_FN((rnn_input<kGru, &at::native::gru>)));
  m.impl("gru.data", TORCH_FN((rnn_data<kGru, &at::native::gru>)));
  m.impl("rnn_tanh.input", TORCH_FN((rnn_input<kRnnTanh, &at::native::rnn_tanh>)));
  m.impl("rnn_tanh.data", TORCH_FN((rnn_data<kRnnTanh, &at::native::rnn_tanh>)));
  m.impl("rnn_relu.input", TORCH_FN((rnn_input<kRnnRelu, &at::native::rnn_relu>)));
  m.impl("rnn_relu.data", TORCH_FN((rnn_data<kRnnRelu, &at::native::rnn_relu>)));
}

}  // namespace

void register_cuda_rnn(c10::DispatchKey backend) {
  auto* impls = keep(new torch::Library(torch::Library::IMPL, "aten", backend, __FILE__, __LINE__));
  impls->impl("_cudnn_rnn", TORCH_FN(cudnn_rnn));
  impls->impl("_cudnn_rnn_backward", TORCH_FN(cudnn_rnn_backward));
  impls->impl("_cudnn_init_dropout_state", TORCH_FN(cudnn_init_dropout_state));
  impls->impl("_cudnn_rnn_flatten_weight", TORCH_FN(cudnn_rnn_flatten_weight));
  impls->impl("_thnn_fused_lstm_cell", TORCH_FN(fused_lstm_cell));
  impls->impl("_thnn_fused_lstm_cell_backward_impl", TORCH_FN(fused_lstm_cell_backward_impl));
  impls->impl("_thnn_fused_gru_cell", TORCH_FN(fused_gru_cell));
  impls->impl("_thnn_fused_gru_cell_backward", TORCH_FN(fused_gru_cell_backward));
  register_composites(*impls);
  // A composite's kernel at the autograd key too: autograd then records the ops it calls
  // (`_cudnn_rnn`), as it does for CUDA's composite.
  auto* autograd = keep(new torch::Library(torch::Library::IMPL, "aten",
                                           autograd_key_of(backend), __FILE__, __LINE__));
  register_composites(*autograd);
  // AutocastCUDA's own `_cudnn_rnn` (cudnn/RNN.cpp's _cudnn_rnn_cast_reflatten) calls cuDNN
  // directly: sim's, as for sim's autocast key.
  const c10::DeviceType type = backend == c10::DispatchKey::CUDA ? c10::DeviceType::CUDA
                                                                 : c10::DeviceType::PrivateUse1;
  auto* autocast = keep(new torch::Library(torch::Library::IMPL, "aten",
                                           autocast_key_of(type), __FILE__, __LINE__));
  autocast->impl("_cudnn_rnn", TORCH_FN(cudnn_rnn_autocast));
}

}  // namespace harness::sim

#include "harness/runtime/llama.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/cross_entropy_loss.h>
#include <ATen/ops/embedding.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/outer.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/rms_norm.h>
#include <ATen/ops/scaled_dot_product_attention.h>
#include <ATen/ops/silu.h>
#include <c10/core/GradMode.h>
#include <torch/nn/cloneable.h>

#include <cmath>
#include <string>

#include "harness/errors.h"
#include "harness/instrument/sim/sim_device.h"
#include "harness/runtime/mlp.h"

namespace harness::runtime {
namespace {

// A parameter as the config wants it: float32 on the host with bytes, on the host without
// (counted, never backed), or on meta.
at::Tensor new_parameter(const LlamaConfig& config, at::IntArrayRef sizes) {
  if (!config.materialize) return at::empty(sizes, at::TensorOptions().device(at::kMeta));
  if (!config.compute_values) return sim::host_tensor_without_bytes(sizes, at::kFloat);
  return at::empty(sizes);
}

bool initialises_on_host(const LlamaConfig& config) {
  return config.materialize && config.compute_values;
}

void normal_init(const at::Tensor& t, double std) {
  c10::AutoGradMode no_grad(false);
  at::Tensor(t).normal_(0.0, std);
}

void ones_init(const at::Tensor& t) {
  c10::AutoGradMode no_grad(false);
  at::Tensor(t).fill_(1.0);
}

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  return at::rms_norm(x, {x.size(-1)}, weight, eps);
}

// x * cos + rotate_half(x) * sin, rotate_half(x) = (-x2, x1) (Llama's rotary embedding in the
// half-split form Hugging Face's Llama uses).
at::Tensor apply_rotary(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const int64_t half = x.size(-1) / 2;
  const at::Tensor rotated = at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
  return x * cos + rotated * sin;
}

class TokenEmbeddingImpl : public torch::nn::Cloneable<TokenEmbeddingImpl>,
                           public FunctionalLayer {
 public:
  explicit TokenEmbeddingImpl(const LlamaConfig& config) : config_(config) { reset(); }
  void reset() override {
    weight = register_parameter("weight", new_parameter(config_, {config_.vocab_size, config_.dim}));
    if (initialises_on_host(config_)) init_parameters({weight});
  }
  at::Tensor forward(const at::Tensor& tokens) { return forward_with(tokens, {weight}); }
  at::Tensor forward_with(const at::Tensor& tokens,
                          const std::vector<at::Tensor>& params) const override {
    return at::embedding(params[0], tokens);
  }
  void init_parameters(const std::vector<at::Tensor>& params) const override {
    normal_init(params[0], 1.0);  // torchtitan: nn.init.normal_(tok_embeddings.weight)
  }
  at::Tensor weight;

 private:
  LlamaConfig config_;
};
TORCH_MODULE(TokenEmbedding);

// Parameters, in order: attention_norm, wq, wk, wv, wo, ffn_norm, w1, w2, w3.
class DecoderBlockImpl : public torch::nn::Cloneable<DecoderBlockImpl>, public FunctionalLayer {
 public:
  DecoderBlockImpl(const LlamaConfig& config, std::shared_ptr<RotaryTables> rotary)
      : config_(config), rotary_(std::move(rotary)) {
    reset();
  }
  void reset() override {
    const int64_t d = config_.dim, hd = config_.head_dim(), f = config_.ffn_dim;
    const std::pair<const char*, std::vector<int64_t>> shapes[] = {
        {"attention_norm", {d}},           {"wq", {config_.heads * hd, d}},
        {"wk", {config_.kv_heads * hd, d}}, {"wv", {config_.kv_heads * hd, d}},
        {"wo", {d, config_.heads * hd}},   {"ffn_norm", {d}},
        {"w1", {f, d}},                    {"w2", {d, f}},
        {"w3", {f, d}}};
    params_.clear();
    for (const auto& [name, sizes] : shapes) {
      params_.push_back(register_parameter(name, new_parameter(config_, sizes)));
    }
    if (initialises_on_host(config_)) init_parameters(params_);
  }
  at::Tensor forward(const at::Tensor& x) { return forward_with(x, params_); }

  at::Tensor forward_with(const at::Tensor& x,
                          const std::vector<at::Tensor>& p) const override {
    const int64_t batch = x.size(0), seq = x.size(1), hd = config_.head_dim();
    const at::Tensor h = rms_norm(x, p[0], config_.norm_eps);
    at::Tensor q = at::linear(h, p[1]).view({batch, seq, config_.heads, hd}).transpose(1, 2);
    at::Tensor k = at::linear(h, p[2]).view({batch, seq, config_.kv_heads, hd}).transpose(1, 2);
    const at::Tensor v =
        at::linear(h, p[3]).view({batch, seq, config_.kv_heads, hd}).transpose(1, 2);
    const auto [cos, sin] = rotary_->get(q, seq);
    q = apply_rotary(q, cos, sin);
    k = apply_rotary(k, cos, sin);
    const at::Tensor attention = at::scaled_dot_product_attention(
        q, k, v, /*attn_mask=*/{}, /*dropout_p=*/0.0, /*is_causal=*/true, /*scale=*/std::nullopt,
        /*enable_gqa=*/config_.kv_heads != config_.heads);
    const at::Tensor x1 =
        x + at::linear(attention.transpose(1, 2).reshape({batch, seq, config_.heads * hd}), p[4]);
    const at::Tensor h2 = rms_norm(x1, p[5], config_.norm_eps);
    return x1 + at::linear(at::silu(at::linear(h2, p[6])) * at::linear(h2, p[8]), p[7]);
  }

  void init_parameters(const std::vector<at::Tensor>& p) const override {
    for (size_t i = 0; i < p.size(); ++i) {
      if (i == 0 || i == 5) {
        ones_init(p[i]);
      } else {
        normal_init(p[i], 0.02);
      }
    }
  }

 private:
  LlamaConfig config_;
  std::shared_ptr<RotaryTables> rotary_;
  std::vector<at::Tensor> params_;
};
TORCH_MODULE(DecoderBlock);

// The final RMSNorm and the output projection: norm, output.
class LlamaHeadImpl : public torch::nn::Cloneable<LlamaHeadImpl>, public FunctionalLayer {
 public:
  explicit LlamaHeadImpl(const LlamaConfig& config) : config_(config) { reset(); }
  void reset() override {
    norm = register_parameter("norm", new_parameter(config_, {config_.dim}));
    output = register_parameter("output",
                                new_parameter(config_, {config_.vocab_size, config_.dim}));
    if (initialises_on_host(config_)) init_parameters({norm, output});
  }
  at::Tensor forward(const at::Tensor& x) { return forward_with(x, {norm, output}); }
  at::Tensor forward_with(const at::Tensor& x,
                          const std::vector<at::Tensor>& p) const override {
    return at::linear(rms_norm(x, p[0], config_.norm_eps), p[1]);
  }
  void init_parameters(const std::vector<at::Tensor>& p) const override {
    ones_init(p[0]);
    normal_init(p[1], 1.0 / std::sqrt(static_cast<double>(config_.dim)));
  }
  at::Tensor norm, output;

 private:
  LlamaConfig config_;
};
TORCH_MODULE(LlamaHead);

}  // namespace

int64_t LlamaConfig::parameter_count() const {
  const int64_t hd = head_dim();
  const int64_t block = 2 * dim + heads * hd * dim * 2 + kv_heads * hd * dim * 2 + 3 * ffn_dim * dim;
  return 2 * vocab_size * dim + layers * block + dim;
}

void LlamaConfig::validate() const {
  auto require = [](bool ok, const std::string& what) {
    if (!ok) throw InputError("Llama config: " + what);
  };
  require(vocab_size > 0 && dim > 0 && layers > 0 && ffn_dim > 0 && seq_len > 0,
          "sizes must be positive");
  require(heads > 0 && dim % heads == 0, "heads must divide dim");
  require(head_dim() % 2 == 0, "the head dimension must be even (rotary embedding)");
  require(kv_heads > 0 && heads % kv_heads == 0, "kv_heads must divide heads");
}

std::pair<at::Tensor, at::Tensor> RotaryTables::get(const at::Tensor& like, int64_t seq) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (cos_.defined() && cos_.device() == like.device() && cos_.scalar_type() == like.scalar_type() &&
      cos_.size(0) >= seq) {
    return {cos_.narrow(0, 0, seq), sin_.narrow(0, 0, seq)};
  }
  c10::AutoGradMode no_grad(false);
  const int64_t hd = config_.dim / config_.heads;
  const auto options = at::TensorOptions().device(like.device()).dtype(at::kFloat);
  const at::Tensor exponents = at::arange(0, hd, 2, options) / static_cast<double>(hd);
  const at::Tensor inv_freq = at::pow(config_.rope_theta, exponents).reciprocal();
  const at::Tensor freqs = at::outer(at::arange(config_.seq_len, options), inv_freq);
  const at::Tensor angles = at::cat({freqs, freqs}, -1);
  cos_ = angles.cos().to(like.scalar_type());
  sin_ = angles.sin().to(like.scalar_type());
  TORCH_CHECK(seq <= cos_.size(0), "a sequence of ", seq, " tokens is longer than seq_len (",
              cos_.size(0), ")");
  return {cos_.narrow(0, 0, seq), sin_.narrow(0, 0, seq)};
}

LlamaLM::LlamaLM(const LlamaConfig& config, AdamOptions adam)
    : config_(config), rotary_(std::make_shared<RotaryTables>(config)), adam_(adam) {
  config_.validate();
  seed_default_generator(c10::Device(c10::kCPU), config_.seed);
  layers_->push_back(TokenEmbedding(config_));
  for (int64_t i = 0; i < config_.layers; ++i) layers_->push_back(DecoderBlock(config_, rotary_));
  layers_->push_back(LlamaHead(config_));
}

at::Tensor LlamaLM::training_step(const Batch& batch) {
  const at::Tensor logits = run_layers(batch.input);
  return at::cross_entropy_loss(logits.to(at::kFloat).view({-1, config_.vocab_size}),
                                batch.target.reshape({-1}));
}

std::unique_ptr<Optimizer> LlamaLM::configure_optimizers() {
  return std::make_unique<Adam>(parameters(), adam_);
}

Batch SyntheticTokenData::batch(int64_t index) const {
  at::Generator gen =
      at::detail::createCPUGenerator(seed_ * 1000003ULL + static_cast<uint64_t>(index));
  const at::Tensor tokens = at::randint(0, vocab_size_, {batch_size_, seq_len_ + 1}, gen);
  Batch b{tokens.narrow(1, 0, seq_len_).contiguous(), tokens.narrow(1, 1, seq_len_).contiguous()};
  if (pin_memory_) {
    b.input = b.input.pin_memory();
    b.target = b.target.pin_memory();
  }
  return b;
}

}  // namespace harness::runtime

#pragma once
// LlamaLM: a Llama-shaped decoder-only language model (Llama 3's layout, as torchtitan's and
// Meta's reference code build it): token embedding, `layers` decoder blocks -- RMSNorm, grouped-
// query causal attention with rotary embeddings, RMSNorm, SwiGLU feed-forward, each with its
// residual --, a final RMSNorm and an untied output projection; cross-entropy on the next token.
// Its layers are FunctionalLayers, so that a sharding strategy can run each with parameters it
// gathered (one unit per layer: the embedding, each block, the head).
//
// Parameters are float32 (what the optimizer keeps); `compute_dtype` is what a sharding strategy
// gathers them in for the forward and backward (FSDP2's MixedPrecisionPolicy param_dtype).
#include <ATen/core/Tensor.h>
#include <torch/nn/modules/container/sequential.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "harness/runtime/data.h"
#include "harness/runtime/module.h"
#include "harness/runtime/optim/adam.h"

namespace harness::runtime {

struct LlamaConfig {
  int64_t vocab_size = 256;
  int64_t dim = 64;
  int64_t layers = 2;
  int64_t heads = 4;
  int64_t kv_heads = 2;
  int64_t ffn_dim = 128;
  int64_t seq_len = 16;
  double norm_eps = 1e-5;
  double rope_theta = 500000.0;
  uint64_t seed = 42;
  // false: parameters on the meta device (shapes, no values, no memory); a sharding strategy
  // materialises them.
  bool materialize = true;
  // false: parameters on the host without values (sizes and host memory counted, no bytes behind
  // them, no init run): the host side of `--compute shapes`, for models the host cannot hold.
  bool compute_values = true;

  int64_t head_dim() const { return dim / heads; }
  int64_t parameter_count() const;
  // Throws InputError naming the field that does not fit (heads dividing dim, ...).
  void validate() const;
};

// The rotary tables (cos and sin, [seq_len, head_dim]) every block shares, made on the first
// forward's device and kept there (torchtitan's freqs_cis buffer).
class RotaryTables {
 public:
  explicit RotaryTables(const LlamaConfig& config) : config_(config) {}
  // cos and sin for `seq` positions on `like`'s device, in its dtype.
  std::pair<at::Tensor, at::Tensor> get(const at::Tensor& like, int64_t seq);

 private:
  LlamaConfig config_;
  std::mutex mutex_;
  at::Tensor cos_, sin_;
};

class LlamaLM final : public TrainModule {
 public:
  LlamaLM(const LlamaConfig& config, AdamOptions adam);

  torch::nn::Module& module() override { return *layers_; }
  torch::nn::Sequential* layers() override { return &layers_; }
  // Batch: input tokens [batch, seq] (int64), target tokens [batch, seq].
  at::Tensor training_step(const Batch& batch) override;
  std::unique_ptr<Optimizer> configure_optimizers() override;
  const LlamaConfig& config() const { return config_; }

 private:
  LlamaConfig config_;
  std::shared_ptr<RotaryTables> rotary_;
  torch::nn::Sequential layers_;
  AdamOptions adam_;
};

// Deterministic random token sequences: batch i is `batch_size` rows of seq_len + 1 tokens drawn
// from its own generator; input the first seq_len, target the last seq_len.
class SyntheticTokenData final : public DataSource {
 public:
  SyntheticTokenData(int64_t batch_size, int64_t seq_len, int64_t vocab_size, uint64_t seed,
                     bool pin_memory)
      : batch_size_(batch_size), seq_len_(seq_len), vocab_size_(vocab_size), seed_(seed),
        pin_memory_(pin_memory) {}
  Batch batch(int64_t index) const override;

 private:
  int64_t batch_size_, seq_len_, vocab_size_;
  uint64_t seed_;
  bool pin_memory_;
};

}  // namespace harness::runtime

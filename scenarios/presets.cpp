#include "scenarios/presets.h"

#include <algorithm>

#include "harness/errors.h"
#include "harness/runtime/dist/communicator.h"

namespace harness::scenarios {

std::unique_ptr<runtime::TrainModule> TrainingPreset::make_module(
    bool on_host, bool values, runtime::AdamOptions adam) const {
  if (!llama) {
    runtime::MlpConfig config = model();
    config.materialize = on_host;
    return std::make_unique<runtime::MlpRegression>(config, adam);
  }
  runtime::LlamaConfig config = *llama;
  config.materialize = on_host;
  config.compute_values = values;
  return std::make_unique<runtime::LlamaLM>(config, adam);
}

std::unique_ptr<runtime::DataSource> TrainingPreset::make_data(runtime::DeviceKind device) const {
  if (!llama) return std::make_unique<runtime::SyntheticRegressionData>(data(device));
  return std::make_unique<runtime::SyntheticTokenData>(batch_size, llama->seq_len,
                                                       llama->vocab_size, /*seed=*/7,
                                                       device != runtime::DeviceKind::Cpu);
}

int64_t TrainingPreset::parameter_tensors() const {
  if (llama) return 1 + 9 * llama->layers + 2;  // embedding, 9 a block, norm and output
  return 2 * (static_cast<int64_t>(widths.size()) - 1);
}

int64_t TrainingPreset::parameter_count() const {
  if (llama) return llama->parameter_count();
  int64_t elements = 0;
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    elements += widths[i] * widths[i + 1] + widths[i + 1];
  }
  return elements;
}

std::map<std::string, std::string> TrainingPreset::describe() const {
  std::map<std::string, std::string> out = {
      {"preset", name},
      {"parameter_tensors", std::to_string(parameter_tensors())},
      {"batch_size", std::to_string(batch_size)},
      {"steps_before_checkpoint", std::to_string(steps_before)},
      {"measured_steps", std::to_string(steps_before)}};
  if (llama) {
    const runtime::LlamaConfig& c = *llama;
    out["model"] = "Llama-shaped decoder";
    out["llama"] = "vocab " + std::to_string(c.vocab_size) + ", dim " + std::to_string(c.dim) +
                   ", layers " + std::to_string(c.layers) + ", heads " + std::to_string(c.heads) +
                   ", kv_heads " + std::to_string(c.kv_heads) + ", ffn " +
                   std::to_string(c.ffn_dim) + ", seq_len " + std::to_string(c.seq_len);
    out["parameters"] = std::to_string(parameter_count());
    out["compute_dtype"] = c10::toString(compute_dtype);
    return out;
  }
  std::string w;
  for (size_t i = 0; i < widths.size(); ++i) w += (i ? "-" : "") + std::to_string(widths[i]);
  out["mlp_widths"] = w;
  return out;
}

void require_ranks(const RunContext& ctx, const std::string& scenario) {
  if (ctx.comm == nullptr) {
    throw InputError(scenario + " needs ranks: run it with --nproc N (N >= 2) or under torchrun");
  }
}

void describe_ranks(ScenarioResult& result, const RunContext& ctx) {
  result.config["world_size"] = std::to_string(ctx.comm->world_size());
  result.config["backend"] = ctx.comm->backend_name();
}

namespace {

// Llama 3 8B's shape (Meta's params.json: dim 4096, 32 layers, 32 heads, 8 KV heads, FFN 14336,
// vocab 128256, rope theta 500000), 2048-token sequences, 8 of them a step over all ranks.
runtime::LlamaConfig llama3_8b() {
  runtime::LlamaConfig c;
  c.vocab_size = 128256;
  c.dim = 4096;
  c.layers = 32;
  c.heads = 32;
  c.kv_heads = 8;
  c.ffn_dim = 14336;
  c.seq_len = 2048;
  return c;
}

}  // namespace

TrainingPreset training_preset(const RunOptions& options, Presets allowed) {
  TrainingPreset p;
  const bool large = allowed == Presets::WithLargeAndLlama;
  const bool llama = allowed != Presets::MlpOnly;
  if (options.preset == "small") {
    p = {"small", {32, 64, 64, 32, 16, 4}, 64, 10};
  } else if (options.preset == "seed") {
    p = {"seed", {6875, 2048, 1024, 512, 256, 7}, 32768, 100};
  } else if (options.preset == "large" && large) {
    // 16 x (4096 x 4096 + 4096) float32 parameters: 1.0 GiB, in units of 64 MiB.
    p = {"large", std::vector<int64_t>(17, 4096), 16, 1};
  } else if (options.preset == "llama_tiny" && llama) {
    // The same layers at a test's size, computed in float32 (checked against one device).
    p = {"llama_tiny", {}, 4, 3};
    p.llama = runtime::LlamaConfig{};
  } else if (options.preset == "llama3_8b" && llama) {
    p = {"llama3_8b", {}, 8, 1};
    p.llama = llama3_8b();
    p.compute_dtype = c10::ScalarType::BFloat16;
  } else {
    throw InputError("unknown preset '" + options.preset + "' (known: small, seed" +
                     std::string(large ? ", large" : "") +
                     (llama ? ", llama_tiny, llama3_8b" : "") +
                     (llama ? "" : "; llama_tiny and llama3_8b for sharded_setup and "
                                   "engine_reuse only") +
                     (large ? "" : "; large for sharded_setup only") + ")");
  }
  if (options.steps < 0) throw InputError("--steps must be positive");
  if (options.steps > 0) {
    p.steps_before = options.steps;
  } else if (options.instrument_overhead) {
    // Enough interleaved steps a side for the on/off ratio's interval (StepWindow::finish).
    p.steps_before = std::max(p.steps_before, kInstrumentOverheadSteps);
  }
  return p;
}

}  // namespace harness::scenarios

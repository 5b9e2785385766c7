#pragma once
// Sizes of the training scenarios: `small` fits a 2-core CI machine in seconds; `seed` has the
// sizes of the original report (Lightning #19955: MLP 6875-2048-1024-512-256-7, batch 32768,
// 200 steps) and is meant for a GPU.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "harness/runtime/data.h"
#include "harness/runtime/device.h"
#include "harness/runtime/llama.h"
#include "harness/runtime/mlp.h"
#include "harness/scenario.h"

namespace harness::scenarios {

struct TrainingPreset {
  std::string name;
  std::vector<int64_t> widths;  // the MLP's (empty for a Llama preset)
  int64_t batch_size = 0;
  int64_t steps_before = 0;  // steps before the checkpoint; as many are measured after it
  // A Llama-shaped transformer instead of the MLP, its units gathered in `compute_dtype`.
  std::optional<runtime::LlamaConfig> llama;
  c10::ScalarType compute_dtype = c10::ScalarType::Float;

  runtime::MlpConfig model() const { return {widths, /*seed=*/42}; }
  uint64_t seed() const { return llama ? llama->seed : model().seed; }
  runtime::DataConfig data(runtime::DeviceKind device) const {
    // Pinned host batches, as a DataLoader(pin_memory=True) gives an accelerator.
    return {batch_size, widths.front(), widths.back(), /*seed=*/7,
            /*pin_memory=*/device != runtime::DeviceKind::Cpu};
  }
  // The preset's module: built on the host (with values; or, `values` false, without bytes),
  // or on meta (`on_host` false).
  std::unique_ptr<runtime::TrainModule> make_module(bool on_host, bool values = true,
                                                   runtime::AdamOptions adam = {}) const;
  std::unique_ptr<runtime::DataSource> make_data(runtime::DeviceKind device) const;
  int64_t parameter_tensors() const;
  int64_t parameter_count() const;
  std::map<std::string, std::string> describe() const;
};

// Throws InputError unless the run has ranks (a process group; a group of one will do).
void require_ranks(const RunContext& ctx, const std::string& scenario);
// The ranks a scenario ran on, in its config: "world_size" and "backend".
void describe_ranks(ScenarioResult& result, const RunContext& ctx);

// Measured steps of a training preset under --instrument-overhead when --steps is not given:
// 30 with the instrument on and 30 off, so that the on/off ratio has a 95% interval.
inline constexpr int64_t kInstrumentOverheadSteps = 60;

// The preset named by options.preset, with options.steps overriding the measured steps (else,
// with options.instrument_overhead, at least kInstrumentOverheadSteps).
// The presets a scenario takes beyond small and seed: `large` (1 GiB of MLP parameters, for the
// sharded set-up on a big host) and the Llama-shaped ones (llama_tiny, llama3_8b).
enum class Presets { MlpOnly, WithLlama, WithLargeAndLlama };
// Throws InputError for an unknown preset (or one the scenario does not take) or a bad step count.
TrainingPreset training_preset(const RunOptions& options, Presets allowed = Presets::MlpOnly);

}  // namespace harness::scenarios

// What the sim device costs against the plain CPU, op by op and per training step (issue 26).
//
// One interleaved run: each round times every case once on the CPU and once on sim (the order
// alternating from round to round), so that a machine busy for a while slows both sides alike.
// Sim is timed while the instrument counts, as in a bench run. Per case it prints the median time
// on each device and the Hodges-Lehmann estimate of sim / cpu with its 95% distribution-free
// interval (the statistics `bench compare` uses). Cases:
//   add_        a.add_(1) on 4096 floats
//   mm          at::mm of two 128x128 matrices
//   foreach     _foreach_add_ over 100 tensors of 256 floats
//   item        .item() of a one-element tensor (on sim: a D2H copy and a sync)
//   layer_norm  forward and backward of layer_norm over (64, 256) (sim: native_layer_norm, the op
//               CUDA runs, where it ran batch norm's composite before issue 36)
//   conv2d      forward and backward of a 3x3 convolution, 8 -> 16 channels on 4x8x32x32
//               (sim: cudnn_convolution + add_, convolution_backward)
//   lstm        forward and backward of a one-layer LSTM, 32 -> 64, 16 steps of a batch of 8
//               (sim: _cudnn_rnn and _cudnn_rnn_backward, the backward recomputing on the host)
//   sdpa        forward and backward of attention, float32, (4, 4, 64, 32)
//               (sim: _scaled_dot_product_efficient_attention and its backward)
//   step        a training step of resume_adam fresh/foreach at the small preset: forward,
//               backward, foreach Adam, with the runtime's Trainer
// Run: ./build/benchmarks/sim_speed [--rounds N] [--json FILE] [--case NAME]... [--no-counting]
// [--as-cuda] [--side cpu|sim] (--side: time that device only, for a profile of one side, with
// no ratio; --no-counting: sim without a collector, what the sim costs apart from counting;
// --as-cuda: the op cases on CUDA tensors, sim serving CUDA as under `run --as-cuda`; the step
// case, whose runtime picks its own device, is not run then). Targets (issue
// 26): a step within 1.25x of the CPU, each op within 1.5x. Not a test: timings on a shared machine
// are noisy.
#include <ATen/ATen.h>
#include <c10/core/AutogradState.h>
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/instrument/collector.h"
#include "harness/instrument/memory_ledger.h"
#include "harness/instrument/sim/sim_device.h"
#include "harness/report/compare/statistics.h"
#include "harness/runtime/device.h"
#include "harness/runtime/optim/adam.h"
#include "harness/runtime/strategy.h"
#include "harness/runtime/trainer.h"
#include "scenarios/presets.h"

namespace {

using Clock = std::chrono::steady_clock;

double elapsed_ns(Clock::time_point since) {
  return static_cast<double>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - since).count());
}

// A case on one device: set up once, then time() gives one sample (ns per iteration).
class Case {
 public:
  virtual ~Case() = default;
  virtual std::vector<double> time() = 0;  // samples of this round
};

// An op repeated `iterations` times: one sample, the mean time of one call.
class OpCase final : public Case {
 public:
  OpCase(std::function<void()> op, int iterations) : op_(std::move(op)), iterations_(iterations) {
    for (int i = 0; i < 20; ++i) op_();  // warm-up: caches, allocator, first-call set-up
  }
  std::vector<double> time() override {
    const auto begin = Clock::now();
    for (int i = 0; i < iterations_; ++i) op_();
    return {elapsed_ns(begin) / iterations_};
  }

 private:
  std::function<void()> op_;
  int iterations_;
};

// Times each training step of a Trainer (a TrainerCallback).
class StepTimer final : public harness::runtime::TrainerCallback {
 public:
  void on_train_step_start(harness::runtime::Trainer&, int64_t) override { begin_ = Clock::now(); }
  void on_train_step_end(harness::runtime::Trainer&, int64_t step) override {
    if (step > kWarmupSteps) samples.push_back(elapsed_ns(begin_));
  }
  static constexpr int64_t kWarmupSteps = 5;
  std::vector<double> samples;

 private:
  Clock::time_point begin_;
};

// A training run of `steps` steps: each measured step is one sample.
class StepCase final : public Case {
 public:
  StepCase(const harness::runtime::DeviceSelection& device, int64_t steps)
      : device_(device), steps_(steps) {}
  std::vector<double> time() override {
    harness::RunOptions options;  // the small preset
    const harness::scenarios::TrainingPreset preset = harness::scenarios::training_preset(options);
    harness::runtime::AdamOptions adam;
    adam.impl = harness::runtime::AdamImpl::Foreach;
    harness::runtime::MlpRegression model(preset.model(), adam);
    harness::runtime::SyntheticRegressionData data(preset.data(device_.kind));
    harness::runtime::SingleDeviceStrategy strategy(device_.device(0),
                                                    harness::runtime::RestorePolicy::Rebuild);
    harness::runtime::Trainer trainer(strategy, data, {steps_ + StepTimer::kWarmupSteps, 2});
    StepTimer timer;
    trainer.add_callback(&timer);
    trainer.fit(model);
    return timer.samples;
  }

 private:
  harness::runtime::DeviceSelection device_;
  int64_t steps_;
};

struct Row {
  std::string name;
  std::unique_ptr<Case> cpu, sim;
  std::vector<double> cpu_ns, sim_ns;
};

std::unique_ptr<Case> op_case(const std::string& name, const c10::Device& device) {
  const auto options = at::TensorOptions().device(device);
  if (name == "add_") {
    at::Tensor a = at::ones({4096}, options);
    return std::make_unique<OpCase>([a]() mutable { a.add_(1); }, 2000);
  }
  if (name == "mm") {
    at::Tensor a = at::rand({128, 128}).to(device), b = at::rand({128, 128}).to(device);
    return std::make_unique<OpCase>([a, b] { (void)at::mm(a, b); }, 500);
  }
  if (name == "foreach") {
    std::vector<at::Tensor> list;
    for (int i = 0; i < 100; ++i) list.push_back(at::ones({256}, options));
    return std::make_unique<OpCase>([list]() mutable { at::_foreach_add_(list, 1.0); }, 200);
  }
  // Forward and backward of a layer: the sim's kernels for the ops CUDA runs (issue 36).
  if (name == "layer_norm") {
    at::Tensor x = at::randn({64, 256}).to(device).requires_grad_();
    return std::make_unique<OpCase>([x] { at::layer_norm(x, {256}).sum().backward(); }, 100);
  }
  if (name == "conv2d") {
    at::Tensor x = at::randn({4, 8, 32, 32}).to(device).requires_grad_();
    at::Tensor w = at::randn({16, 8, 3, 3}).to(device).requires_grad_();
    at::Tensor b = at::randn({16}).to(device).requires_grad_();
    return std::make_unique<OpCase>([x, w, b] { at::conv2d(x, w, b).sum().backward(); }, 50);
  }
  if (name == "lstm") {
    at::Tensor x = at::randn({16, 8, 32}).to(device).requires_grad_();
    std::vector<at::Tensor> params = {at::randn({256, 32}), at::randn({256, 64}),
                                      at::randn({256}), at::randn({256})};
    for (at::Tensor& p : params) p = p.to(device).requires_grad_();
    at::Tensor h = at::zeros({1, 8, 64}).to(device), c = at::zeros({1, 8, 64}).to(device);
    return std::make_unique<OpCase>([x, params, h, c] {
      std::get<0>(at::lstm(x, {h, c}, params, true, 1, 0.0, true, false, false)).sum().backward();
    }, 20);
  }
  if (name == "sdpa") {
    at::Tensor q = at::randn({4, 4, 64, 32}).to(device).requires_grad_();
    return std::make_unique<OpCase>([q] {
      at::scaled_dot_product_attention(q, q, q).sum().backward();
    }, 50);
  }
  // item
  at::Tensor a = at::ones({1}, options);
  return std::make_unique<OpCase>([a] { (void)a.item<float>(); }, 2000);
}

int usage(const char* why) {
  std::fprintf(stderr, "sim_speed: %s\nusage: sim_speed [--rounds N] [--steps N] [--json FILE] [--case NAME]... [--no-counting] [--as-cuda] [--side cpu|sim]\n",
               why);
  return 2;
}

// Both sides share this process's heap. glibc serves a large request with a new mapping until a
// mapped block of that size is freed, which raises its threshold (and the one at which it gives
// the heap's top back) for the rest of the process: so which side freed a large block first
// decided whether the other's buffers were mapped and faulted in afresh on every call. Measured
// (2026-12-07): the CPU side's conv2d took 700 or 1,140 us (18,000 or 172,000 page faults) by
// whether sim's device blocks went back to malloc. Fixed here, as a long-running program's heap
// settles: large requests from the heap, its top kept.
void settle_the_heap() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's largest dynamic threshold
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 15;
  int64_t steps = 30;
  std::optional<std::string> json_path;
  std::vector<std::string> only;  // --case: these cases only (for a profile of one)
  bool counting_on = true;        // --no-counting: the sim alone, what it costs apart from counting
  bool as_cuda = false;           // --as-cuda: the op cases on CUDA tensors sim serves
  std::optional<std::string> only_side;  // --side: this device only (a profile of one side)
  for (int i = 1; i < argc; ++i) {
    const bool has_value = i + 1 < argc;
    if (!std::strcmp(argv[i], "--rounds") && has_value) {
      rounds = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--steps") && has_value) {
      steps = std::atoll(argv[++i]);
    } else if (!std::strcmp(argv[i], "--json") && has_value) {
      json_path = argv[++i];
    } else if (!std::strcmp(argv[i], "--no-counting")) {
      counting_on = false;
    } else if (!std::strcmp(argv[i], "--as-cuda")) {
      as_cuda = true;
    } else if (!std::strcmp(argv[i], "--side") && has_value) {
      only_side = argv[++i];
      if (*only_side != "cpu" && *only_side != "sim") return usage("--side takes cpu or sim");
    } else if (!std::strcmp(argv[i], "--case") && has_value) {
      only.push_back(argv[++i]);
    } else {
      return usage((std::string("unknown or incomplete argument ") + argv[i]).c_str());
    }
  }
  if (rounds < 2 || steps < 1) return usage("--rounds must be at least 2, --steps at least 1");
  if (only_side && json_path) return usage("--side times one device: there is no ratio for --json");

  settle_the_heap();
  // As bench does: the counting allocator first, then the devices (sim: backward on this thread).
  harness::memory::install_host_counting();
  const harness::runtime::DeviceSelection cpu = harness::runtime::select_device("cpu");
  // --as-cuda: sim serves CUDA, PrivateUse1 left unnamed as under `run --as-cuda` (a named
  // PrivateUse1 would be torch's accelerator, and a CUDA tensor's backward would find no stream).
  if (as_cuda) {
    harness::sim::initialize(harness::sim::kDefaultDeviceCount, /*name_backend=*/false);
    harness::sim::serve_cuda();
    // Backward on this thread, as `run` has it (program.py): with CUDA's device thread each
    // backward would be handed over and back, and that thread's OpenMP team would spin beside
    // the CPU side's on the same cores -- a cost no `run --as-cuda` pays.
    c10::AutogradState::get_tls_state().set_multithreading_enabled(false);
  }
  const std::optional<harness::runtime::DeviceSelection> sim =
      as_cuda ? std::nullopt : std::optional(harness::runtime::select_device("sim"));
  const c10::Device sim_ops = as_cuda ? c10::Device(c10::DeviceType::CUDA, 0) : sim->device(0);

  const std::vector<std::string> names = {"add_",   "mm",   "foreach", "item", "layer_norm",
                                          "conv2d", "lstm", "sdpa",    "step"};
  for (const std::string& name : only) {
    if (std::find(names.begin(), names.end(), name) == names.end()) {
      return usage(("unknown case '" + name + "' (cases: add_, mm, foreach, item, layer_norm, conv2d, lstm, sdpa, step)").c_str());
    }
  }
  auto wanted = [&](const std::string& name) {
    return only.empty() || std::find(only.begin(), only.end(), name) != only.end();
  };
  std::vector<Row> rows;
  for (const char* name :
       {"add_", "mm", "foreach", "item", "layer_norm", "conv2d", "lstm", "sdpa"}) {
    if (!wanted(name)) continue;
    rows.push_back({name, op_case(name, cpu.device(0)), op_case(name, sim_ops), {}, {}});
  }
  if (wanted("step") && !as_cuda) {
    rows.push_back({"step", std::make_unique<StepCase>(cpu, steps),
                    std::make_unique<StepCase>(*sim, steps), {}, {}});
  }

  harness::EventCollector collector;  // sim counts as it does in bench; the CPU has nothing to count
  // On a terminal the progress line is rewritten in place; into a file or a pipe (a CI log) each
  // round is a line of its own.
  const bool terminal = ::isatty(STDERR_FILENO) != 0;
  for (int r = 0; r < rounds; ++r) {
    std::fprintf(stderr, terminal ? "\rround %d/%d" : "round %d/%d\n", r + 1, rounds);
    for (Row& row : rows) {
      for (int side = 0; side < 2; ++side) {
        const bool on_sim = (side + r) % 2 == 1;
        if (only_side && *only_side != (on_sim ? "sim" : "cpu")) continue;
        std::optional<harness::ScopedCollection> counting;
        if (on_sim && counting_on) counting.emplace(collector);
        std::vector<double> s = (on_sim ? row.sim : row.cpu)->time();
        std::vector<double>& into = on_sim ? row.sim_ns : row.cpu_ns;
        into.insert(into.end(), s.begin(), s.end());
      }
    }
  }
  if (terminal) std::fprintf(stderr, "\n");
  if (only_side) {  // one side: its medians, no ratio
    for (const Row& row : rows) {
      const std::vector<double>& ns = *only_side == "sim" ? row.sim_ns : row.cpu_ns;
      std::printf("%-8s %s median %10.2f us\n", row.name.c_str(), only_side->c_str(),
                  harness::median_of(ns) / 1e3);
    }
    return 0;
  }

  nlohmann::json out = nlohmann::json::array();
  std::printf("%-8s %12s %12s  %s\n", "case", "cpu median", "sim median",
              "sim/cpu (Hodges-Lehmann, 95% interval)");
  for (const Row& row : rows) {
    const harness::RatioEstimate ratio = harness::hodges_lehmann_ratio(row.sim_ns, row.cpu_ns);
    const double cpu_median = harness::median_of(row.cpu_ns);
    const double sim_median = harness::median_of(row.sim_ns);
    std::printf("%-8s %10.2f us %10.2f us  %s\n", row.name.c_str(), cpu_median / 1e3,
                sim_median / 1e3, harness::format_ratio_estimate(ratio).c_str());
    out.push_back({{"case", row.name},
                   {"cpu_median_ns", cpu_median},
                   {"sim_median_ns", sim_median},
                   {"samples", row.sim_ns.size()},
                   {"ratio", ratio.ratio ? nlohmann::json(*ratio.ratio) : nlohmann::json()},
                   {"ratio_low", ratio.low ? nlohmann::json(*ratio.low) : nlohmann::json()},
                   {"ratio_high", ratio.high ? nlohmann::json(*ratio.high) : nlohmann::json()}});
  }
  if (json_path) {
    std::ofstream f(*json_path);
    f << out.dump(2) << "\n";
    if (!f) return usage(("cannot write " + *json_path).c_str());
  }
  return 0;
}

#include "harness/measure.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>

#include <time.h>

#include <ATen/Parallel.h>

#include "harness/interrupt.h"
#include "harness/report/compare/statistics.h"
#include "harness/report/model/pattern.h"
#include "harness/errors.h"

namespace harness {
namespace {

struct Spread {
  double median, min, max;
};

// Median, least and most of `ns` (not empty).
Spread spread_of(std::vector<int64_t> ns) {
  std::sort(ns.begin(), ns.end());
  const size_t mid = ns.size() / 2;
  const double median = ns.size() % 2 ? static_cast<double>(ns[mid])
                                      : (static_cast<double>(ns[mid - 1]) + ns[mid]) / 2.0;
  return {median, static_cast<double>(ns.front()), static_cast<double>(ns.back())};
}

std::vector<double> as_samples(const std::vector<int64_t>& ns) {
  return std::vector<double>(ns.begin(), ns.end());
}

}  // namespace

namespace {

// The probe's work on one thread: 4096 words (16 KiB, its own per thread), four independent
// integer hash chains and a floating-point one, so that it fills the core's ports the way
// compiled kernels do and shares them with a hyperthread sibling.
void machine_probe_work() {
  constexpr size_t kWords = 4096;
  constexpr int kPasses = 6;
  thread_local std::vector<uint32_t> words = [] {
    std::vector<uint32_t> w(kWords);
    for (size_t i = 0; i < kWords; ++i) w[i] = static_cast<uint32_t>(i * 2654435761u);
    return w;
  }();
  uint32_t h0 = 2166136261u, h1 = 16777619u, h2 = 374761393u, h3 = 668265263u;
  double f = 1.0;
  for (int pass = 0; pass < kPasses; ++pass) {
    for (size_t i = 0; i < kWords; i += 4) {
      h0 = (h0 ^ words[i]) * 16777619u;
      h1 = (h1 ^ words[i + 1]) * 2246822519u;
      h2 = (h2 ^ words[i + 2]) * 3266489917u;
      h3 = (h3 ^ words[i + 3]) * 668265263u;
      f = f * 0.999999 + static_cast<double>(words[i] & 0xff) * 1e-9;
      words[i] = h0 ^ h3;
    }
  }
  static volatile uint64_t sink;  // the work's result is used: it cannot be optimised away
  sink = (uint64_t{h0 ^ h1} << 32 | (h2 ^ h3)) + static_cast<uint64_t>(f);
}

}  // namespace

int64_t time_machine_probe() {
  // On every thread of the intra-op pool at once, as a parallel kernel runs: the region ends
  // with its slowest thread, so a worker that shares its core with other work slows the probe
  // as it slows the steps' kernels.
  const int64_t threads = at::get_num_threads();
  const auto started = std::chrono::steady_clock::now();
  at::parallel_for(0, threads, 1, [](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) machine_probe_work();
  });
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() -
                                                              started)
      .count();
}

namespace {

std::string& running_variant() {
  static std::string name;  // "<scenario>:<variant>"
  return name;
}

// HARNESS_TEST_SLOW_STEPS, parsed once: the glob ("<scenario>:<variant glob>") and the factor.
const std::optional<std::pair<std::string, double>>& slow_steps_knob() {
  static const std::optional<std::pair<std::string, double>> knob =
      []() -> std::optional<std::pair<std::string, double>> {
    const char* value = std::getenv("HARNESS_TEST_SLOW_STEPS");
    if (value == nullptr || *value == 0) return std::nullopt;
    const std::string text = value;
    const size_t eq = text.rfind('=');
    char* end = nullptr;
    const double factor = eq == std::string::npos ? 0 : std::strtod(text.c_str() + eq + 1, &end);
    if (eq == std::string::npos || text.find(':') > eq || end == nullptr || *end != 0 ||
        !(factor >= 1 && factor <= 100)) {
      throw InputError("HARNESS_TEST_SLOW_STEPS='" + text +
                       "': expected <scenario>:<variant glob>=<factor from 1 to 100>");
    }
    return std::make_pair(text.substr(0, eq), factor);
  }();
  return knob;
}

// Busy-waits until the step begun at `started` has taken `factor` times what it took so far.
void stretch_step(std::chrono::steady_clock::time_point started, double factor) {
  if (factor <= 1) return;
  const auto now = std::chrono::steady_clock::now();
  const auto until = started + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                   (now - started) * factor);
  while (std::chrono::steady_clock::now() < until) {
  }
}

}  // namespace

void set_running_variant(const std::string& scenario, const std::string& variant) {
  running_variant() = scenario + ":" + variant;
}

double test_step_slowdown() {
  const auto& knob = slow_steps_knob();
  if (!knob || !glob_match(knob->first, running_variant())) return 1;
  return knob->second;
}

int64_t process_cpu_ns() {
  timespec t{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return int64_t{t.tv_sec} * 1000000000 + t.tv_nsec;
}

std::optional<int64_t> cpu_wait_ns() {
  std::error_code error;
  std::filesystem::directory_iterator tasks("/proc/self/task", error);
  if (error) return std::nullopt;
  int64_t total = 0;
  bool any = false;
  for (const auto& task : tasks) {
    std::ifstream in(task.path() / "schedstat");  // "<on cpu ns> <run delay ns> <slices>"
    int64_t on_cpu = 0, waited = 0;
    if (!(in >> on_cpu >> waited)) continue;  // a thread that just exited
    total += waited;
    any = true;
  }
  if (!any) return std::nullopt;
  return total;
}

void set_step_times(VariantResult& result, const std::vector<int64_t>& wall_ns,
                    const std::vector<int64_t>& cpu_ns) {
  result.timing = step_time_statistics(wall_ns);
  for (Measurement& m : step_time_statistics(cpu_ns, "step_cpu_time",
                                             "process CPU time (all threads)")) {
    if (m.name != "step_cpu_time.count") result.timing.push_back(std::move(m));
  }
  result.samples["step_time"] = as_samples(wall_ns);
  result.samples["step_cpu_time"] = as_samples(cpu_ns);
}

void PhaseClock::begin_step() {
  step_.clear();
  open_.clear();
  add_phase_listener(this);
  listening_ = true;
}

void PhaseClock::end_step() noexcept {
  if (!listening_) return;
  remove_phase_listener(this);
  listening_ = false;
  try {
    for (const auto& [phase, ns] : step_) samples_[phase].push_back(ns);
  } catch (...) {  // out of memory: the step has no phase times
  }
}

std::map<std::string, size_t> PhaseClock::sample_counts() const {
  std::map<std::string, size_t> counts;
  for (const auto& [phase, samples] : samples_) counts[phase] = samples.size();
  return counts;
}

void PhaseClock::truncate(const std::map<std::string, size_t>& counts) {
  for (auto it = samples_.begin(); it != samples_.end();) {
    const auto kept = counts.find(it->first);
    if (kept == counts.end() || kept->second == 0) {
      it = samples_.erase(it);
      continue;
    }
    if (it->second.size() > kept->second) it->second.resize(kept->second);
    ++it;
  }
}

void PhaseClock::on_phase_begin(const char* name) noexcept {
  try {
    open_.emplace_back(name, std::chrono::steady_clock::now());
  } catch (...) {
  }
}

void PhaseClock::on_phase_end(const char* name) noexcept {
  const auto now = std::chrono::steady_clock::now();
  // Phases end innermost first; one that began before the step started has no begin here.
  if (open_.empty() || open_.back().first != name) return;
  const auto ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(now - open_.back().second).count();
  open_.pop_back();
  try {
    step_[name] += ns;
  } catch (...) {
  }
}

StepWindow::StepWindow(Instrument& instrument, int64_t after_step, bool interleave_uninstrumented)
    : instrument_(instrument), after_step_(after_step), interleave_(interleave_uninstrumented) {
  (void)instrument_.take();
}

StepWindow::~StepWindow() {
  if (counting_) instrument_.stop();
  phase_clock_.end_step();
}

void StepWindow::on_train_step_start(runtime::Trainer&, int64_t step) {
  throw_if_stopped();  // loops that drive a window by hand stop here too (interrupt.h)
  if (step <= after_step_) return;
  instrument_.drain();  // what came before the step is not the step's time
  step_range_.emplace("step " + std::to_string(step));
  trace_step_begin(step);
  counting_ = !interleave_ || window_steps_ % 2 == 0;
  if (counting_) {
    instrument_.start();
    phase_clock_.begin_step();
    step_sync_wait_begin_ = instrument_.sync_wait_so_far();
  }
  in_step_ = true;
  started_cpu_ns_ = process_cpu_ns();
  started_ = std::chrono::steady_clock::now();
}

void StepWindow::on_train_step_end(runtime::Trainer&, int64_t) {
  if (!in_step_) return;
  instrument_.drain();
  stretch_step(started_, test_step_slowdown());
  trace_step_end();
  step_range_.reset();
  const int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                         std::chrono::steady_clock::now() - started_)
                         .count();
  const int64_t cpu_ns = process_cpu_ns() - started_cpu_ns_;
  if (counting_) {
    step_cpu_ns_.push_back(cpu_ns);
    instrument_.stop();
    phase_clock_.end_step();
    const std::optional<int64_t> waited = instrument_.sync_wait_so_far();
    if (waited && step_sync_wait_begin_) {
      step_sync_wait_ns_.push_back(*waited - *step_sync_wait_begin_);
    } else {
      sync_wait_per_step_ = false;
    }
  }
  (counting_ ? step_ns_ : uninstrumented_step_ns_).push_back(ns);
  // After every step of the window, outside its time (so that with --instrument-overhead both
  // kinds of step follow one); kept for the instrumented steps, one sample per measured step.
  const int64_t probe_ns = time_machine_probe();
  if (counting_) probe_ns_.push_back(probe_ns);
  counting_ = false;
  in_step_ = false;
  ++window_steps_;
}

void StepWindow::finish(VariantResult& result) {
  fill_counts(result, instrument_.take(), steps(), instrument_.measures_launches(),
              instrument_.available());
  set_step_times(result, step_ns_, step_cpu_ns_);
  if (sync_wait_per_step_ && !step_sync_wait_ns_.empty()) {
    result.samples["sync.wait_time"] = as_samples(step_sync_wait_ns_);
  }
  add_phase_times(result, phase_clock_);
  add_machine_probe(result, probe_ns_);
  if (!interleave_) return;
  result.samples["step_time_uninstrumented"] = as_samples(uninstrumented_step_ns_);
  for (Measurement& m : step_time_statistics(uninstrumented_step_ns_, "step_time_uninstrumented")) {
    result.timing.push_back(std::move(m));
  }
  const Measurement* with = find_metric(result, "timing.step_time.median");
  const Measurement* without = find_metric(result, "timing.step_time_uninstrumented.median");
  Measurement ratio{"instrument_overhead.median_ratio", std::nullopt, "ratio",
                    "median instrumented step time / median uninstrumented step time (same run)"};
  if (with && with->value && without && without->value && *without->value > 0) {
    ratio.value = *with->value / *without->value;
  }
  result.timing.push_back(std::move(ratio));
  // The Hodges-Lehmann estimate of on / off over the interleaved steps and its 95%
  // distribution-free interval (null when there are too few steps for one): a ratio whose
  // interval holds 1 is noise.
  const RatioEstimate hl = hodges_lehmann_ratio(as_samples(step_ns_), as_samples(uninstrumented_step_ns_));
  result.timing.push_back({"instrument_overhead.ratio", hl.ratio, "ratio",
                           "Hodges-Lehmann estimate of instrumented / uninstrumented step time "
                           "(interleaved steps, same run)"});
  result.timing.push_back({"instrument_overhead.ratio_low", hl.low, "ratio",
                           "lower end of its 95% confidence interval"});
  result.timing.push_back({"instrument_overhead.ratio_high", hl.high, "ratio",
                           "upper end of its 95% confidence interval"});
}

void add_machine_probe(VariantResult& result, const std::vector<int64_t>& probe_ns) {
  if (probe_ns.empty()) return;
  result.samples[kMachineProbe] = as_samples(probe_ns);
  result.timing.push_back({std::string(kMachineProbe) + ".median", spread_of(probe_ns).median,
                           "ns",
                           "median time of the machine probe (a fixed piece of host work) "
                           "timed after each measured step"});
}

void add_phase_times(VariantResult& result, const PhaseClock& clock) {
  for (const auto& [phase, ns] : clock.samples()) {
    result.samples["phase[" + phase + "].time"] = as_samples(ns);
    const Spread s = spread_of(ns);
    std::vector<Measurement>& m = result.phases[phase];
    m.push_back({"time.median", s.median, "ns", "median host wall time of the phase in a step"});
    m.push_back({"time.min", s.min, "ns", "least host wall time of the phase in a step"});
    m.push_back({"time.max", s.max, "ns", "most host wall time of the phase in a step"});
  }
}

std::vector<Measurement> step_time_statistics(const std::vector<int64_t>& ns,
                                              const std::string& prefix, const std::string& what) {
  std::vector<Measurement> out;
  const double n = static_cast<double>(ns.size());
  const std::string p = prefix + ".";
  out.push_back({p + "count", n, "count", "measured steps timed"});
  if (ns.empty()) return out;
  const double mean = std::accumulate(ns.begin(), ns.end(), 0.0) / n;
  const Spread s = spread_of(ns);
  double var = 0;
  for (int64_t x : ns) var += (static_cast<double>(x) - mean) * (static_cast<double>(x) - mean);
  const double stddev = ns.size() > 1 ? std::sqrt(var / (n - 1)) : 0.0;
  out.push_back({p + "mean", mean, "ns", "mean " + what + " of a measured step"});
  out.push_back({p + "median", s.median, "ns", "median " + what + " of a measured step"});
  out.push_back({p + "min", s.min, "ns", "least " + what + " of a measured step"});
  out.push_back({p + "max", s.max, "ns", "most " + what + " of a measured step"});
  out.push_back({p + "stddev", stddev, "ns", "sample standard deviation of the " + what});
  return out;
}

namespace {

std::vector<Measurement> convert(const PhaseCounts& c, double divisor, bool launches_measured,
                                 bool instrument_available) {
  std::vector<Measurement> ms = to_measurements(c, divisor);
  for (Measurement& m : ms) {
    if (!instrument_available || (!launches_measured && m.name == "launch.count")) {
      m.value.reset();
    }
  }
  return ms;
}

// Memory figures are levels, not counts: in `total` and each phase, never divided per step.
// They are measured apart from the event instrument (null only where not measured).
std::vector<Measurement> with_memory(std::vector<Measurement> ms, const PhaseCounts& c) {
  for (Measurement& m : memory_measurements(c)) ms.push_back(std::move(m));
  return ms;
}

// A phase's list: its counts, memory and what only phases have (gpu_span).
std::vector<Measurement> phase_list(const PhaseCounts& c, bool launches_measured,
                                    bool instrument_available) {
  std::vector<Measurement> ms =
      with_memory(convert(c, 1.0, launches_measured, instrument_available), c);
  for (Measurement& m : phase_only_measurements(c)) {
    if (!instrument_available) m.value.reset();
    ms.push_back(std::move(m));
  }
  return ms;
}

}  // namespace

void add_phases(VariantResult& result, const Counts& counts, bool launches_measured,
                bool instrument_available, const std::string& prefix) {
  for (const auto& [phase, c] : counts.phases) {
    result.phases[prefix + phase] = phase_list(c, launches_measured, instrument_available);
  }
}

void fill_counts(VariantResult& result, const Counts& counts, int64_t steps, bool launches_measured,
                 bool instrument_available) {
  auto convert = [&](const PhaseCounts& c, double divisor) {
    return harness::convert(c, divisor, launches_measured, instrument_available);
  };
  result.measured_steps = steps;
  const PhaseCounts total = counts.total();
  result.total = with_memory(convert(total, 1.0), total);
  result.per_step = convert(total, steps > 0 ? static_cast<double>(steps) : 1.0);
  result.phases.clear();
  for (const auto& [phase, c] : counts.phases) {
    result.phases[phase] = phase_list(c, launches_measured, instrument_available);
  }
  result.launches_by_op =
      launches_measured ? total.launches_by_op : std::map<std::string, int64_t>{};
  result.sync_sites = to_sync_sites(counts);
  result.copy_sites = to_copy_sites(counts);
  result.event_sites = to_event_sites(counts);
}

}  // namespace harness

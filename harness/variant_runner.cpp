#include "harness/variant_runner.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "harness/instrument/phase.h"
#include "harness/interrupt.h"
#include "harness/measure.h"

namespace harness {

VariantRunner::VariantRunner(RunContext& context, std::string scenario,
                             const std::vector<std::string>& all_variants)
    : context_(context), scenario_(std::move(scenario)) {
  total_ = static_cast<size_t>(std::count_if(all_variants.begin(), all_variants.end(),
                                             [&](const auto& n) { return context.wants_variant(n); }));
}

VariantResult VariantRunner::run(const std::string& name,
                                 const std::function<void(VariantResult&)>& body,
                                 const std::string& expected_failure) {
  throw_if_stopped();
  VariantResult r;
  r.name = name;
  r.expected_failure = expected_failure;
  const bool shown = context_.wants_variant(name);
  if (shown) context_.progress.variant_started(scenario_, name, ++shown_, total_);
  const auto t0 = std::chrono::steady_clock::now();
  const std::optional<int64_t> waited0 = cpu_wait_ns();
  const std::string section = scenario_ + " " + name;
  set_running_variant(scenario_, name);
  // What the last variant left cached in the device allocator is not this one's (a fresh
  // process has nothing reserved): its reserved memory starts from what is still held.
  context_.instrument.release_cached_memory();
  if (context_.trace) context_.trace->section_begin(section);
  try {
    const NvtxRange range(scenario_ + "/" + name);  // tells variants apart on an nsys timeline
    body(r);
    r.ran = true;
  } catch (const std::exception& e) {
    r.ran = false;
    r.error = first_line(e.what());
  }
  if (r.ran && !r.expected_failure.empty()) {
    r.ran = false;
    r.error = "expected to fail (" + r.expected_failure + ") but it ran to the end";
    r.expected_failure.clear();
  }
  if (context_.trace) context_.trace->section_end(section);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::optional<int64_t> waited1 = cpu_wait_ns();
  if (r.ran && waited0 && waited1 && seconds > 0) {
    // Threads that ended during the variant took their waits with them: a lower bound.
    const double share = static_cast<double>(std::max<int64_t>(0, *waited1 - *waited0)) / 1e9 / seconds;
    r.timing.push_back({std::string(kCpuWaitShare), share, "ratio",
                        "time the process's threads waited for a CPU (runnable, not running), "
                        "summed over threads, per second of the variant (above 0.1: other work "
                        "held the cores, and its times are not comparable)"});
  }
  if (shown) context_.progress.variant_finished(r, seconds);
  return r;
}

std::string first_line(const std::string& message) {
  const size_t end = message.find('\n');
  return end == std::string::npos ? message : message.substr(0, end);
}

}  // namespace harness

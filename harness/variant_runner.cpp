#include "harness/variant_runner.h"

#include <algorithm>
#include <chrono>

#include "harness/instrument/phase.h"
#include "harness/interrupt.h"

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
  const std::string section = scenario_ + " " + name;
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
  if (shown) context_.progress.variant_finished(r, seconds);
  return r;
}

std::string first_line(const std::string& message) {
  const size_t end = message.find('\n');
  return end == std::string::npos ? message : message.substr(0, end);
}

}  // namespace harness

#pragma once
// VariantRunner: runs one variant of a scenario -- progress lines, timing, and the rule that a
// failing variant is recorded as failed (with its error) while the rest run on.
#include <functional>
#include <string>
#include <vector>

#include "harness/report/model/result.h"
#include "harness/scenario.h"

namespace harness {

class VariantRunner {
 public:
  // `all_variants`: the scenario's variants in run order (those the filters drop are not shown).
  VariantRunner(RunContext& context, std::string scenario,
                const std::vector<std::string>& all_variants);

  // Runs `body` for the variant `name`; exceptions become a failed VariantResult. With
  // `expected_failure` (which known failure the variant reproduces) an exception is the expected
  // outcome, and running to the end is the failure.
  VariantResult run(const std::string& name, const std::function<void(VariantResult&)>& body,
                    const std::string& expected_failure = "");

 private:
  RunContext& context_;
  std::string scenario_;
  size_t total_ = 0;
  size_t shown_ = 0;
};

// The first line of an error message (Torch errors append a C++ backtrace).
std::string first_line(const std::string& message);

}  // namespace harness

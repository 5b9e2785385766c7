#pragma once
// Comparing the parameters of two runs (for correctness checks of resumed and sharded runs).
#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

namespace harness::runtime {

struct ParameterComparison {
  bool identical = false;      // bitwise equal, every tensor
  double max_abs_diff = 0.0;   // over all elements of all tensors
  std::string detail;          // human summary
};

// Copies to the host to compare: call it outside measured windows.
ParameterComparison compare_parameters(const std::vector<at::Tensor>& actual,
                                       const std::vector<at::Tensor>& expected);

}  // namespace harness::runtime

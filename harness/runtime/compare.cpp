#include "harness/runtime/compare.h"

#include <ATen/ops/abs.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/max.h>
#include <ATen/ops/sub.h>

#include <algorithm>
#include <sstream>

namespace harness::runtime {

ParameterComparison compare_parameters(const std::vector<at::Tensor>& actual,
                                       const std::vector<at::Tensor>& expected) {
  ParameterComparison out;
  if (actual.size() != expected.size()) {
    out.detail = "different number of parameter tensors: " + std::to_string(actual.size()) +
                 " vs " + std::to_string(expected.size());
    return out;
  }
  size_t differing = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const at::Tensor a = actual[i].detach().to(at::kCPU);
    const at::Tensor e = expected[i].detach().to(at::kCPU);
    if (a.sizes() != e.sizes()) {
      out.detail = "parameter " + std::to_string(i) + " has a different shape";
      return out;
    }
    if (!at::equal(a, e)) {
      ++differing;
      if (a.numel() > 0) {
        out.max_abs_diff = std::max(out.max_abs_diff, at::sub(a, e).abs().max().item<double>());
      }
    }
  }
  out.identical = differing == 0;
  std::ostringstream s;
  if (out.identical) {
    s << "all " << actual.size() << " parameter tensors bitwise identical";
  } else {
    s << differing << " of " << actual.size() << " parameter tensors differ (max |diff| "
      << out.max_abs_diff << ")";
  }
  out.detail = s.str();
  return out;
}

}  // namespace harness::runtime

#pragma once
// Shared by the Adam implementation files: Optimizer._group_tensors_by_device_and_dtype.
#include <ATen/core/Tensor.h>

#include <vector>

namespace harness::runtime::detail {

// Indices grouped by the parameter's device and dtype, groups in order of first appearance.
std::vector<std::vector<size_t>> group_by_device_and_dtype(const std::vector<at::Tensor>& params);
// all[i] for i in idx.
std::vector<at::Tensor> pick(const std::vector<at::Tensor>& all, const std::vector<size_t>& idx);

}  // namespace harness::runtime::detail

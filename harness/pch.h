#pragma once
// Precompiled header of the LibTorch headers most translation units need (see CMakeLists.txt).
// Only headers that are heavy and stable belong here; project headers do not.
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>

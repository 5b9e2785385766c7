#include "harness/runtime/data.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/randn.h>

namespace harness::runtime {

Batch SyntheticRegressionData::batch(int64_t index) const {
  at::Generator gen = at::detail::createCPUGenerator(config_.seed * 1000003ULL +
                                                     static_cast<uint64_t>(index));
  Batch b;
  b.input = at::randn({config_.batch_size, config_.input_width}, gen);
  b.target = at::randn({config_.batch_size, config_.target_width}, gen);
  if (config_.pin_memory) {
    b.input = b.input.pin_memory();
    b.target = b.target.pin_memory();
  }
  return b;
}

}  // namespace harness::runtime

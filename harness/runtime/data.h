#pragma once
// SyntheticRegressionData: deterministic random regression batches made on the CPU, page-locked
// when asked (as a DataLoader with pin_memory=True gives them), batch i always the same.
#include <cstdint>

#include "harness/runtime/module.h"

namespace harness::runtime {

struct DataConfig {
  int64_t batch_size = 64;
  int64_t input_width = 32;
  int64_t target_width = 4;
  uint64_t seed = 1;
  bool pin_memory = false;
};

class SyntheticRegressionData {
 public:
  explicit SyntheticRegressionData(DataConfig config) : config_(config) {}
  Batch batch(int64_t index) const;
  const DataConfig& config() const { return config_; }

 private:
  DataConfig config_;
};

}  // namespace harness::runtime

#pragma once
// The trainer's data: batch i of a deterministic source, made on the CPU. SyntheticRegressionData
// gives random regression batches, page-locked when asked (as a DataLoader with pin_memory=True
// gives them); SyntheticTokenData (llama.h) gives token sequences.
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

class DataSource {
 public:
  virtual ~DataSource() = default;
  virtual Batch batch(int64_t index) const = 0;  // always the same batch for the same index
};

class SyntheticRegressionData final : public DataSource {
 public:
  explicit SyntheticRegressionData(DataConfig config) : config_(config) {}
  Batch batch(int64_t index) const override;
  const DataConfig& config() const { return config_; }

 private:
  DataConfig config_;
};

}  // namespace harness::runtime

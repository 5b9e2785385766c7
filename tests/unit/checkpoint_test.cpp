// Checkpoint files: round trip, and clear errors for missing, corrupt and foreign files.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "harness/errors.h"
#include "harness/runtime/checkpoint/checkpoint.h"

namespace harness::runtime {
namespace {

namespace fs = std::filesystem;

class CheckpointFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ckpt_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const char* name) { return (dir_ / name).string(); }
  fs::path dir_;
};

Checkpoint sample() {
  Checkpoint c;
  c.global_step = 7;
  c.model = {{"0.weight", at::arange(6, at::kFloat).reshape({2, 3})}, {"0.bias", at::ones({2})}};
  c.optimizer.state[0] = {{"step", at::scalar_tensor(7.0, at::kFloat)},
                          {"exp_avg", at::full({2, 3}, 0.5)}};
  OptimizerStateDict::Group g;
  g.options = {{"lr", 0.001}, {"foreach", true}};
  g.params = {0, 1};
  c.optimizer.param_groups.push_back(g);
  return c;
}

TEST_F(CheckpointFile, RoundTrip) {
  save_checkpoint(sample(), path("a.ckpt"));
  const Checkpoint c = load_checkpoint(path("a.ckpt"));
  EXPECT_EQ(c.global_step, 7);
  ASSERT_EQ(c.model.size(), 2u);
  EXPECT_EQ(c.model[0].first, "0.weight");
  EXPECT_TRUE(at::equal(c.model[0].second, at::arange(6, at::kFloat).reshape({2, 3})));
  EXPECT_EQ(c.optimizer.state.at(0).at("step").item<float>(), 7.0f);
  EXPECT_EQ(c.optimizer.param_groups.at(0).params, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(c.optimizer.param_groups.at(0).options.at("lr").toDouble(), 0.001);
  for (const auto& entry : fs::directory_iterator(dir_)) {
    EXPECT_EQ(entry.path().filename(), "a.ckpt") << "a temporary file was left behind";
  }
}

TEST_F(CheckpointFile, MissingFileIsAnInputError) {
  try {
    load_checkpoint(path("nope.ckpt"));
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("nope.ckpt"), std::string::npos);
  }
}

TEST_F(CheckpointFile, GarbageIsAnInputError) {
  std::ofstream(path("bad.ckpt")) << "this is not a checkpoint";
  EXPECT_THROW(load_checkpoint(path("bad.ckpt")), InputError);
}

TEST_F(CheckpointFile, TruncatedFileIsAnInputError) {
  save_checkpoint(sample(), path("t.ckpt"));
  fs::resize_file(path("t.ckpt"), fs::file_size(path("t.ckpt")) / 2);
  EXPECT_THROW(load_checkpoint(path("t.ckpt")), InputError);
}

TEST_F(CheckpointFile, UnwritableDestinationIsAnInputError) {
  EXPECT_THROW(save_checkpoint(sample(), path("no/such/dir/x.ckpt")), InputError);
}

TEST_F(CheckpointFile, ADirectoryBlockedByAFileNamesTheFile) {
  std::ofstream(path("scratch")).put('x');
  try {
    create_checkpoint_directory(path("scratch/run/step"));
    FAIL() << "a file in the way was not reported";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "cannot create the checkpoint directory " +
                                         path("scratch/run/step") +
                                         ": Not a directory: " + path("scratch"));
  }
}

}  // namespace
}  // namespace harness::runtime

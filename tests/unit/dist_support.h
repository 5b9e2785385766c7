#pragma once
// What the multi-process tests share: forking ranks, saving what they trained, and the
// single-device run they are compared with. This binary runs no Torch work before forking.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <torch/csrc/jit/serialization/pickle.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "harness/instrument/sim/sim_device.h"
#include "harness/runtime/data.h"
#include "harness/runtime/dist/communicator.h"
#include "harness/runtime/mlp.h"
#include "harness/runtime/strategy.h"
#include "harness/runtime/trainer.h"

namespace harness::runtime::test {

namespace fs = std::filesystem;

inline constexpr int64_t kGlobalBatch = 64;
inline constexpr int64_t kSteps = 6;
inline const MlpConfig kModel{{32, 64, 64, 32, 16, 4}, 42};

struct TempDir {
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "harness-dist-XXXXXX").string();
    path = ::mkdtemp(pattern.data());
  }
  ~TempDir() { fs::remove_all(path); }
  std::string path;
};

inline void save_tensors(const std::vector<at::Tensor>& tensors, const std::string& path) {
  c10::List<at::Tensor> list;
  for (const at::Tensor& t : tensors) list.push_back(t.detach().cpu());
  const std::vector<char> bytes = torch::jit::pickle_save(list);
  std::ofstream(path, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline std::vector<at::Tensor> load_tensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<at::Tensor> out;
  const c10::IValue list = torch::jit::pickle_load(bytes);
  for (const c10::IValue& v : list.toListRef()) out.push_back(v.toTensor());
  return out;
}

// Runs body(rank) in `world` child processes; true when every one exits 0 within the timeout.
inline bool run_in_processes(int world, const std::function<void(int)>& body,
                             std::chrono::seconds timeout = std::chrono::seconds(120)) {
  std::vector<pid_t> pids;
  for (int r = 0; r < world; ++r) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      int code = 0;
      try {
        body(r);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d: %s\n", r, e.what());
        code = 1;
      }
      std::fflush(nullptr);
      ::_exit(code);
    }
    pids.push_back(pid);
  }
  bool ok = true;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (pid_t pid : pids) {
    int status = 0;
    while (::waitpid(pid, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        for (pid_t p : pids) ::kill(p, SIGKILL);
        ::waitpid(pid, &status, 0);
        ok = false;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  return ok;
}

// Joins rank `rank` of `world` sim ranks, rendezvous through the file `store` (each run of ranks
// its own: a file a finished run left behind holds its ranks' addresses).
inline std::unique_ptr<Communicator> join_sim(int rank, int world, const std::string& store) {
  sim::initialize();
  RankEnv env;
  env.rank = rank;
  env.world_size = world;
  env.local_rank = rank;
  return connect(env, {DeviceKind::Sim, "sim"}, {std::chrono::seconds(60), store});
}

// join_sim with the store `run` in the folder `dir`.
inline std::unique_ptr<Communicator> join(int rank, int world, const std::string& dir,
                                          const std::string& run = "store") {
  return join_sim(rank, world, dir + "/" + run);
}

// A check inside a rank's process: throws, which fails that rank.
inline void check(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error(what);
}

inline void train_single_device(const std::string& out, const AdamOptions& adam = {}) {
  sim::initialize();
  MlpRegression model(kModel, adam);
  SyntheticRegressionData data({kGlobalBatch, 32, 4, 7, false});
  SingleDeviceStrategy strategy(sim::device(0), RestorePolicy::Rebuild);
  Trainer trainer(strategy, data, {kSteps, 1});
  trainer.fit(model);
  save_tensors(model.parameters(), out);
}

inline double max_abs_diff(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    worst = std::max(worst, (a[i] - b[i]).abs().max().item<double>());
  }
  return worst;
}

// Distributed training must match single-device training on the same global batch to within
// float32 summation-order noise (the all-reduce adds the ranks' gradients in another order).
inline constexpr double kTolerance = 1e-5;

}  // namespace harness::runtime::test

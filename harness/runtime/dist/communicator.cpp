#include "harness/runtime/dist/communicator.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "harness/errors.h"
#include "harness/interrupt.h"
#include "harness/instrument/sim/sim_device.h"
#include "harness/runtime/dist/counting_backend.h"

namespace harness::runtime {

void Communicator::broadcast(at::Tensor& tensor, int root) {
  std::vector<at::Tensor> one{tensor};
  broadcast(one, root);
}

namespace {

// c10 errors append a C++ backtrace: the first line says what happened.
std::string first_line_of(const char* what) {
  const std::string s(what);
  return s.substr(0, s.find('\n'));
}

class PendingWork final : public PendingCollective {
 public:
  PendingWork(c10::intrusive_ptr<c10d::Work> work, std::chrono::milliseconds timeout)
      : work_(std::move(work)), timeout_(timeout) {}
  void wait() override {
    if (work_) work_->wait(timeout_);
    work_.reset();
  }

 private:
  c10::intrusive_ptr<c10d::Work> work_;
  std::chrono::milliseconds timeout_;
};

class ProcessGroupCommunicator final : public Communicator {
 public:
  ProcessGroupCommunicator(c10::intrusive_ptr<c10d::Store> store,
                           c10::intrusive_ptr<c10d::Backend> backend,
                           std::chrono::milliseconds timeout)
      : store_(std::move(store)), backend_(std::move(backend)), timeout_(timeout) {
    // Where this rank runs, for its peers to see it die while they wait for it (wait_for_key).
    store_->set(process_key(rank()), as_bytes(host_name() + " " + std::to_string(::getpid())));
  }

  int rank() const override { return backend_->getRank(); }
  int world_size() const override { return backend_->getSize(); }
  std::string backend_name() const override { return backend_->getBackendName(); }

  void broadcast(std::vector<at::Tensor>& tensors, int root) override {
    c10d::BroadcastOptions o;
    o.rootRank = root;
    o.timeout = timeout_;
    backend_->broadcast(tensors, o)->wait(timeout_);
  }

  void all_reduce_sum(std::vector<at::Tensor>& tensors) override {
    c10d::AllreduceOptions o;
    o.reduceOp = c10d::ReduceOp::SUM;
    o.timeout = timeout_;
    backend_->allreduce(tensors, o)->wait(timeout_);
  }

  void all_gather(std::vector<at::Tensor>& outputs, const at::Tensor& input) override {
    c10d::AllgatherOptions o;
    o.timeout = timeout_;
    std::vector<std::vector<at::Tensor>> out = {outputs};
    std::vector<at::Tensor> in = {input};
    backend_->allgather(out, in, o)->wait(timeout_);
  }

  void all_gather_into(at::Tensor& output, const at::Tensor& input) override {
    all_gather_into_async(output, input)->wait();
  }

  std::unique_ptr<PendingCollective> all_gather_into_async(at::Tensor& output,
                                                           const at::Tensor& input) override {
    c10d::AllgatherOptions o;
    o.timeout = timeout_;
    at::Tensor in = input;
    return std::make_unique<PendingWork>(backend_->_allgather_base(output, in, o), timeout_);
  }

  void reduce_scatter_sum(at::Tensor& output, const at::Tensor& input) override {
    c10d::ReduceScatterOptions o;
    o.reduceOp = c10d::ReduceOp::SUM;
    o.timeout = timeout_;
    at::Tensor in = input;
    backend_->_reduce_scatter_base(output, in, o)->wait(timeout_);
  }

  void barrier() override {
    c10d::BarrierOptions o;
    o.timeout = timeout_;
    backend_->barrier(o)->wait(timeout_);
  }

  void store_set(const std::string& key, const std::string& value) override {
    store_->set(key, std::vector<uint8_t>(value.begin(), value.end()));
  }

  std::string store_get(const std::string& key) override {
    wait_for_key(key);  // a stop, or a peer's death, ends it with its own message
    try {
      const std::vector<uint8_t> v = store_->get(key);
      return std::string(v.begin(), v.end());
    } catch (const std::exception& e) {
      throw std::runtime_error("rank " + std::to_string(rank()) + ": no value for '" + key +
                               "' in the rendezvous store within " +
                               std::to_string(timeout_.count()) + " ms: " + first_line_of(e.what()));
    }
  }

 private:
  // Waits for `key` by asking the store whether it is there, more rarely as the wait goes on (up
  // to every 50 ms), and between asks SIGINT or SIGTERM ends the wait (Interrupted): a rank whose
  // peer died never gets the peer's key, and sat out the whole timeout (issue 53). (The store's
  // own timed wait, in slices, would log a warning for every slice.) At the timeout, get()
  // reports it, as before.
  // A rank on this host that died (its process gone, or a zombie) is named within a second, exit
  // 3, rather than at the timeout.
  void wait_for_key(const std::string& key) {
    constexpr std::chrono::milliseconds kLongestPause{50};
    constexpr std::chrono::seconds kPeerCheck{1};
    const auto start = std::chrono::steady_clock::now();
    const auto deadline = start + timeout_;
    auto next_peer_check = start + kPeerCheck;
    for (std::chrono::milliseconds pause{1};; pause = std::min(pause * 2, kLongestPause)) {
      throw_if_stopped();
      if (store_->check({key})) return;
      const auto now = std::chrono::steady_clock::now();
      if (now >= deadline) return;  // get() reports the timeout
      if (now >= next_peer_check) {
        next_peer_check = now + kPeerCheck;
        const std::string dead = dead_peer();
        if (!dead.empty()) {
          throw std::runtime_error("rank " + std::to_string(rank()) + ": " + dead +
                                   " while this rank waited for '" + key + "'");
        }
      }
      std::this_thread::sleep_for(pause);
    }
  }

  static std::string process_key(int rank) { return "process/" + std::to_string(rank); }
  static std::vector<uint8_t> as_bytes(const std::string& s) { return {s.begin(), s.end()}; }

  // "rank 1 (pid 4242) died" for the first rank on this host whose process is gone, else "".
  std::string dead_peer() {
    const std::string here = host_name();
    for (int r = 0; r < world_size(); ++r) {
      if (r == rank() || !store_->check({process_key(r)})) continue;
      const std::vector<uint8_t> bytes = store_->get(process_key(r));
      const std::string text(bytes.begin(), bytes.end());
      const size_t space = text.rfind(' ');
      if (space == std::string::npos || text.substr(0, space) != here) continue;
      const pid_t pid = static_cast<pid_t>(std::stol(text.substr(space + 1)));
      if (!process_alive(pid)) {
        return "rank " + std::to_string(r) + " (pid " + std::to_string(pid) + ") died";
      }
    }
    return "";
  }

  // Whether process `pid` runs: it exists and is not a zombie (a killed rank its parent has not
  // reaped yet is gone all the same).
  static bool process_alive(pid_t pid) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (!std::getline(stat, line)) return ::kill(pid, 0) == 0 || errno == EPERM;
    const size_t paren = line.rfind(')');
    const char state = paren != std::string::npos && paren + 2 < line.size() ? line[paren + 2] : '?';
    return state != 'Z' && state != 'X';
  }

  static std::string host_name() {
    char name[256] = {0};
    return ::gethostname(name, sizeof name - 1) == 0 ? name : "";
  }

  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::Backend> backend_;
  std::chrono::milliseconds timeout_;
};

}  // namespace

std::unique_ptr<Communicator> connect(const RankEnv& env, const DeviceSelection& device,
                                      const CommunicatorOptions& options) {
  if (device.kind == DeviceKind::Sim) {
    if (env.local_rank >= sim::device_count()) {
      throw InputError("LOCAL_RANK " + std::to_string(env.local_rank) + " has no sim device (" +
                       std::to_string(sim::device_count()) + " per process)");
    }
    sim::set_home_device(env.local_rank);
  } else if (device.kind == DeviceKind::Cuda) {
    // Each rank owns GPU LOCAL_RANK: it becomes the current device (CUPTI's home device too).
    const c10::impl::DeviceGuardImplInterface* cuda =
        c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
    if (env.local_rank >= cuda->deviceCount()) {
      throw InputError("LOCAL_RANK " + std::to_string(env.local_rank) + " has no GPU (" +
                       std::to_string(cuda->deviceCount()) + " visible)");
    }
    cuda->setDevice(c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(env.local_rank)));
  }
  c10::intrusive_ptr<c10d::Store> store;
  if (!options.file_store_path.empty()) {
    store = c10::make_intrusive<c10d::FileStore>(options.file_store_path, env.world_size);
  } else {
    c10d::TCPStoreOptions o;
    o.port = static_cast<uint16_t>(env.master_port);
    o.isServer = env.rank == 0;
    o.numWorkers = env.world_size;
    o.waitWorkers = true;
    o.timeout = options.timeout;
    try {
      store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, o);
    } catch (const std::exception& e) {
      const std::string why = e.what();
      if (o.isServer && (why.find("EADDRINUSE") != std::string::npos ||
                         why.find("address already in use") != std::string::npos)) {
        throw InputError("MASTER_PORT " + std::to_string(env.master_port) +
                         " is already in use on this host (rank 0 serves the rendezvous store "
                         "there): another job or an earlier run holds it; choose a free port "
                         "(torchrun --master-port)");
      }
      throw std::runtime_error("rank " + std::to_string(env.rank) + ": rendezvous at " +
                               env.master_addr + ":" + std::to_string(env.master_port) +
                               " failed: " + first_line_of(e.what()));
    }
  }
  store->setTimeout(options.timeout);
  // NCCL for GPUs where the build has it (as torchrun users expect), Gloo for sim and cpu.
  auto inner = device.kind == DeviceKind::Cuda && nccl_available()
                   ? make_nccl_backend(c10::make_intrusive<c10d::PrefixStore>("nccl", store),
                                       env.rank, env.world_size, options.timeout)
                   : make_gloo_backend(c10::make_intrusive<c10d::PrefixStore>("gloo", store),
                                       env.rank, env.world_size, options.timeout);
  return std::make_unique<ProcessGroupCommunicator>(
      c10::make_intrusive<c10d::PrefixStore>("harness", store),
      c10::make_intrusive<CountingBackend>(std::move(inner)), options.timeout);
}

}  // namespace harness::runtime

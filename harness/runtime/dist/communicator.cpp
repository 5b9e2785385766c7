#include "harness/runtime/dist/communicator.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "harness/errors.h"
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
      : store_(std::move(store)), backend_(std::move(backend)), timeout_(timeout) {}

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

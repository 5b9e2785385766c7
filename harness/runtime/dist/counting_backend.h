#pragma once
// CountingBackend: a thin c10d backend in front of another (Gloo here) that makes collectives
// countable. Each collective is recorded when issued ("collective.<name>", payload bytes of this
// rank's tensors; a coalesced call is one per tensor). Reductions NCCL runs and Gloo cannot (an
// integer AVG, PREMUL_SUM) are summed by Gloo and finished here. Waiting for it is counted as a GPU has it: on device tensors a device-side
// collective wait (NCCL's work.wait() makes the stream wait; not a host sync), on CPU tensors a
// host sync (Gloo blocks the caller); barrier() is a host sync. Its Work has a future holding
// the caller's tensors (DDP's reducer and communication hooks wait on it).
//
// Sim tensors live in host memory, so the inner Gloo backend is handed zero-copy host aliases of
// them: no staging copies exist, so none are counted (as the sim backend never counts its own
// bookkeeping). The results land in the sim tensors themselves.
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>

namespace harness::runtime {

class CountingBackend final : public c10d::Backend {
 public:
  explicit CountingBackend(c10::intrusive_ptr<c10d::Backend> inner);

  const std::string getBackendName() const override;
  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  // Coalesced calls (one work for several tensors): one collective per tensor, one wait.
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_split_sizes,
                                               std::vector<int64_t>& input_split_sizes,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

 private:
  c10::intrusive_ptr<c10d::Backend> inner_;
};

// LibTorch's ProcessGroupGloo over `store` on the loopback-or-hostname device
// (GLOO_SOCKET_IFNAME is honoured as in PyTorch).
c10::intrusive_ptr<c10d::Backend> make_gloo_backend(const c10::intrusive_ptr<c10d::Store>& store,
                                                    int rank, int size,
                                                    std::chrono::milliseconds timeout);

// LibTorch's ProcessGroupNCCL over `store` (cuda ranks); only where nccl_available(): builds
// with CUDA.
bool nccl_available();
c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store,
                                                    int rank, int size,
                                                    std::chrono::milliseconds timeout);

}  // namespace harness::runtime

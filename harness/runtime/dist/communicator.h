#pragma once
// Communicator: the collectives the runtime's strategies and scenarios use, on a c10d process
// group (LibTorch's own: Gloo for cpu and sim tensors; see counting_backend.h), and the group's
// rendezvous store for the harness's own bookkeeping (gathering results; never counted).
//
// Every collective is blocking, as `torch.distributed.broadcast(..., async_op=False)` is: it is
// issued, counted ("collective.<name>.count/bytes"), and waited for (a "collective wait" sync).
#include <ATen/core/Tensor.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "harness/runtime/device.h"
#include "harness/runtime/dist/rank_env.h"

namespace harness::runtime {

// A collective issued with async_op=True: wait() blocks until it is done (a "collective wait").
class PendingCollective {
 public:
  virtual ~PendingCollective() = default;
  virtual void wait() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual std::string backend_name() const = 0;

  // Every tensor gets root's values (tensors of one call are one collective).
  virtual void broadcast(std::vector<at::Tensor>& tensors, int root) = 0;
  void broadcast(at::Tensor& tensor, int root);
  // Element-wise sum over ranks, in place.
  virtual void all_reduce_sum(std::vector<at::Tensor>& tensors) = 0;
  // outputs[r] gets rank r's `input` (torch.distributed.all_gather into a list).
  virtual void all_gather(std::vector<at::Tensor>& outputs, const at::Tensor& input) = 0;
  // `output` (world_size x input's elements) gets every rank's `input`, in rank order
  // (all_gather_into_tensor).
  virtual void all_gather_into(at::Tensor& output, const at::Tensor& input) = 0;
  // The same, issued now and waited for by the returned handle (an async_op=True collective).
  virtual std::unique_ptr<PendingCollective> all_gather_into_async(at::Tensor& output,
                                                                   const at::Tensor& input) = 0;
  // `output` gets this rank's slice of the element-wise sum over ranks of `input`
  // (reduce_scatter_tensor with SUM; input has world_size x output's elements).
  virtual void reduce_scatter_sum(at::Tensor& output, const at::Tensor& input) = 0;
  virtual void barrier() = 0;

  // Bookkeeping through the rendezvous store: not collectives, not counted. get() waits for the
  // key up to the group's timeout and throws naming the key when it does not come.
  virtual void store_set(const std::string& key, const std::string& value) = 0;
  virtual std::string store_get(const std::string& key) = 0;
};

struct CommunicatorOptions {
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};  // rendezvous and each collective
  std::string file_store_path;  // non-empty: rendezvous through this file instead of TCP
};

// Joins the process group of `env` for tensors of `device` (rank r's tensors live on
// device.device(env.local_rank)). Blocks until every rank has joined or the timeout passes.
std::unique_ptr<Communicator> connect(const RankEnv& env, const DeviceSelection& device,
                                      const CommunicatorOptions& options = {});

}  // namespace harness::runtime

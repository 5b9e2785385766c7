#pragma once
// The host syncs of CUDA ops that the sim replays: what PyTorch 2.11's CUDA implementation of an
// op reads back to the host (or copies to the device and waits for) before it can go on -- a
// count that sizes its output (nonzero and everything built on it), a value it checks, a scalar
// it needs on the host. On CUDA each is a copy and a cudaStreamSynchronize (memcpy_and_sync, an
// .item(), a blocking .cpu() / .to(device), or a synchronous Thrust call); on sim the op runs its
// CPU kernel on aliases, so these reads do not happen by themselves: the rule of the op says
// which the CUDA op makes for these arguments, and the sim counts them as it counts any copy and
// sync, attributed to the op.
//
// Rules are for ops with a kernel per backend (their CPU kernel is what sim runs). Composite ops,
// whose code reaches a syncing op through the dispatcher on device tensors (item, is_nonzero,
// allclose, where(cond), argwhere, nonzero_numpy, masked_fill.Tensor, ctc_loss with device
// lengths), need none: the sim counts the op they reach. The list, with the source of each rule, is the
// the counting contract in docs/counting.md.
#include <ATen/core/function_schema.h>
#include <ATen/core/ivalue.h>

#include <cstdint>
#include <vector>

#include "harness/instrument/counts.h"

namespace harness::sim {

// One read or write of the host that the host waits for: a copy of `bytes` (0: a sync with no
// copy of its own, such as a synchronous Thrust algorithm) and a sync.
struct HostWait {
  CopyKind kind = CopyKind::DeviceToHost;
  int64_t bytes = 0;
  bool pinned = false;  // the host buffer is page-locked
  const char* reason = "";
};

// The host waits op `schema` makes on CUDA with arguments `args` (the schema's arguments, before
// the op runs).
using SyncRule = std::vector<HostWait> (*)(const c10::FunctionSchema& schema,
                                           const c10::IValue* args);

struct SyncRuleEntry {
  const char* op;                       // "aten::nonzero"
  std::vector<const char*> overloads;   // "" for the overload without a name
  SyncRule rule;
  bool takes_host_index_tensors;        // CPU index tensors are allowed, as CUDA copies them over
  const char* source;                   // where in PyTorch 2.11 the sync is
};

const std::vector<SyncRuleEntry>& sync_rules();

}  // namespace harness::sim

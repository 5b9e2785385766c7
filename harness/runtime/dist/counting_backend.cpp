#include "harness/runtime/dist/counting_backend.h"

#include <ATen/core/ivalue.h>

#include <c10/core/ScalarType.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "harness/instrument/collector.h"
#include "harness/interrupt.h"
#include "harness/instrument/phase.h"
#include "harness/instrument/sim/sim_device.h"
#include "harness/instrument/trace.h"

namespace harness::runtime {
namespace {

// What the inner backend sees: a sim tensor's host memory (zero-copy), anything else as it is.
at::Tensor for_inner(const at::Tensor& t) { return sim::is_sim(t) ? sim::host_alias(t) : t; }

std::vector<at::Tensor> for_inner(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> out;
  out.reserve(tensors.size());
  for (const at::Tensor& t : tensors) {
    TORCH_CHECK(t.is_contiguous(), "collectives take contiguous tensors");
    out.push_back(for_inner(t));
  }
  return out;
}

// Under sim's Compute::kShapes (sim_device.h) a collective of sim tensors moves nothing: its
// tensors have no bytes. It is counted as any other, with the bytes it would move, and its work
// is done at once.
bool moves_nothing(const std::vector<at::Tensor>& tensors) {
  return sim::computes_shapes_only() &&
         std::any_of(tensors.begin(), tensors.end(), [](const at::Tensor& t) { return sim::is_sim(t); });
}

class NothingMovedWork final : public c10d::Work {
 public:
  NothingMovedWork()
      : future_(c10::make_intrusive<c10::ivalue::Future>(
            c10::ListType::create(c10::TensorType::get()))) {
    future_->markCompleted(c10::IValue(c10::List<at::Tensor>()));
  }
  bool isCompleted() override { return true; }
  bool isSuccess() const override { return true; }
  bool wait(std::chrono::milliseconds) override { return true; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

 private:
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

c10::intrusive_ptr<c10d::Work> nothing_moved() { return c10::make_intrusive<NothingMovedWork>(); }

int64_t payload_bytes(const std::vector<at::Tensor>& tensors) {
  int64_t bytes = 0;
  for (const at::Tensor& t : tensors) bytes += static_cast<int64_t>(t.nbytes());
  return bytes;
}

// How waiting for a collective is counted, as a GPU has it (DESIGN.md, "collective wait"):
//   Device:  on device tensors: NCCL's work.wait() makes the current stream wait for the NCCL
//            stream, the host goes on: a device-side collective wait, not a host sync;
//   Host:    on CPU tensors (Gloo): the caller blocks until the data is there: a host sync;
//   Barrier: barrier() blocks the host on every backend (NCCL synchronizes its stream): a sync.
enum class WaitKind { Device, Host, Barrier };

WaitKind wait_kind_of(const std::vector<at::Tensor>& tensors) {
  for (const at::Tensor& t : tensors) {
    if (sim::is_sim(t)) return WaitKind::Device;
  }
  return WaitKind::Host;
}

// What a collective still does to its result once the inner backend is done, where Gloo's result
// is not NCCL's (an integer average: NCCL sums and divides in one kernel, Gloo's AVG divides by a
// float and fails on integer tensors). Done once, by whoever sees the completion first: a wait,
// the future's callback, or the work's destructor.
// Made only for such a collective: every other one costs nothing here.
struct Completion {
  std::once_flag once;
  std::function<void()> finish;
  void run() { std::call_once(once, finish); }
};

// The inner backend's work, with the wait counted; keeps the aliases alive until it is done.
// Its future (getFuture) completes when the inner work does, holding `results`: the caller's
// tensors (the sim tensors, not their host aliases), on their device, as a ProcessGroupNCCL
// future holds CUDA tensors; waiting on it makes the current stream wait (the sim counts a
// stream wait), as with NCCL.
class CountedWork final : public c10d::Work {
 public:
  CountedWork(c10::intrusive_ptr<c10d::Work> inner, const char* op, WaitKind kind,
              std::vector<at::Tensor> keep_alive, std::vector<at::Tensor> results,
              std::function<void()> finish, std::optional<CollectiveTrace> trace)
      : inner_(std::move(inner)),
        op_(op),
        kind_(kind),
        keep_alive_(std::move(keep_alive)),
        results_(std::move(results)),
        completion_(finish ? std::make_shared<Completion>() : nullptr),
        trace_(std::move(trace)) {
    if (completion_) completion_->finish = std::move(finish);
    if (!trace_) return;
    done_ns_ = std::make_shared<std::atomic<int64_t>>(0);
    // When the inner work completes (on Gloo's thread), for the collective's span on the trace.
    try {
      inner_->getFuture()->addCallback(
          [done = done_ns_](c10::ivalue::Future&) { done->store(trace_clock_ns()); });
    } catch (...) {  // a work without a future: its span ends when it is waited for
    }
  }
  // A work dropped without a wait (a prefetch left in flight by a stage that failed) is still
  // settled here, so that its memory is not freed later on Gloo's thread, in whatever phase runs
  // then (engine_reuse's next variant had a device peak that varied from run to run).
  ~CountedWork() override {
    if (waited_) return;
    try {
      if (inner_->wait(kSettleTimeout)) finish_result();
    } catch (...) {  // timed out (a peer that never joins) or failed: nothing to free it here
      return;
    }
    trace_completed();
    await_release_by_workers();
  }
  CountedWork(const CountedWork&) = delete;
  CountedWork& operator=(const CountedWork&) = delete;

  bool wait(std::chrono::milliseconds timeout) override {
    const int64_t begin = events::begin_time();
    const bool done = stop_handlers_installed() ? wait_stoppable(timeout) : inner_->wait(timeout);
    if (done) finish_result();
    const int64_t waited = events::elapsed_since(begin);
    switch (kind_) {
      case WaitKind::Device: events::record_collective_wait(op_, waited); break;
      case WaitKind::Host:
        events::record_collective_sync(op_, "collective wait (CPU tensors)", waited);
        break;
      case WaitKind::Barrier: events::record_collective_sync(op_, "barrier", waited); break;
    }
    waited_ = true;
    if (done) trace_completed();
    if (done) await_release_by_workers();  // after the wait is timed: bookkeeping, not waiting
    return done;
  }
  // bench's wait: in slices, between which SIGINT or SIGTERM ends it (Interrupted), so that a rank
  // whose peer died stops when torchrun or the user asks instead of at the timeout (issue 53:
  // one stayed 121 s after a SIGTERM). The inner work's wait may be called again after a slice
  // times out (c10d::Work::wait throws without changing the work).
  bool wait_stoppable(std::chrono::milliseconds timeout) {
    using Clock = std::chrono::steady_clock;
    const bool forever = timeout == kNoTimeout;
    const Clock::time_point deadline = Clock::now() + timeout;
    while (true) {
      throw_if_stopped();
      auto slice = kStopCheck;
      if (!forever) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        if (left <= std::chrono::milliseconds(0)) return inner_->wait(std::chrono::milliseconds(1));
        slice = std::min(slice, left);
      }
      try {
        return inner_->wait(slice);
      } catch (const std::exception&) {
        // A slice that ran out, or the work's own failure. A work that completed between the
        // slice's end and this check has its own outcome: waiting again returns at once with
        // it (true, or the work's error), never the slice's "timed out".
        if (inner_->isCompleted()) return inner_->wait(kNoTimeout);
      }
    }
  }

  bool isCompleted() override { return inner_->isCompleted(); }
  bool isSuccess() const override { return inner_->isSuccess(); }
  std::exception_ptr exception() const override { return inner_->exception(); }
  void synchronize() override { inner_->synchronize(); }
  void abort() override { inner_->abort(); }
  std::vector<at::Tensor> result() override { return results_; }

  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override {
    std::lock_guard<std::mutex> lock(future_mu_);
    if (future_) return future_;
    std::vector<c10::Device> devices;
    for (const at::Tensor& t : results_) {
      if (t.device().type() != c10::DeviceType::CPU &&
          std::find(devices.begin(), devices.end(), t.device()) == devices.end()) {
        devices.push_back(t.device());
      }
    }
    future_ = c10::make_intrusive<c10::ivalue::Future>(
        c10::ListType::create(c10::TensorType::get()), std::move(devices));
    // Completed from the inner future's callback (Gloo's worker thread), with the caller's
    // tensors; an error is passed on as it is.
    c10::weak_intrusive_ptr<c10::ivalue::Future> weak(future_);
    inner_->getFuture()->addCallback(
        [weak, results = results_, completion = completion_](c10::ivalue::Future& inner) {
          auto future = weak.lock();
          if (!future) return;
          if (inner.hasError()) {
            future->setError(inner.exception_ptr());
          } else {
            if (completion) completion->run();
            future->markCompleted(c10::IValue(c10::List<at::Tensor>(results)));
          }
        });
    return future_;
  }

 private:
  void finish_result() {
    if (completion_) completion_->run();
  }

  // The collective's span on the trace: from its issue to when the inner work completed (or, if
  // that was not seen, to now, when it is known complete).
  void trace_completed() noexcept {
    if (!trace_) return;
    const int64_t now = trace_clock_ns();
    const int64_t done = done_ns_ ? done_ns_->load() : 0;
    trace_->done_ns = done != 0 ? std::min(done, now) : now;
    events::record_collective_trace(*trace_);
    trace_.reset();
  }

  // The inner backend's worker thread still holds the work (and through it what the work owns:
  // the aliases of the sim tensors' storage, Gloo's own flat CPU buffer of an all_gather or a
  // reduce_scatter) for a moment after marking it complete. Were it the last owner, that memory
  // would be freed on that thread at a time that varies from run to run, and the memory levels
  // read at phase boundaries with it: wait until this is the only owner, so that the memory is
  // freed where the caller drops its tensors. The worker drops it right after completing it,
  // unless the scheduler holds the thread back: with a 200 ms bound, one CI run saw rank 1's next
  // phase begin with 8448 host bytes held, the size of Gloo's flat buffer for an all_gather of
  // layer 0 (not reproduced here). Bounded all the same: a worker that never lets go only costs
  // that determinism.
  void await_release_by_workers() const {
    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    while (inner_.use_count() > 1) {
      const auto waited = Clock::now() - start;
      if (waited > kReleaseWait) return;
      if (waited < std::chrono::milliseconds(1)) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    }
  }

  static constexpr std::chrono::seconds kReleaseWait{10};
  static constexpr std::chrono::milliseconds kSettleTimeout{1000};
  static constexpr std::chrono::milliseconds kStopCheck{100};

  c10::intrusive_ptr<c10d::Work> inner_;
  const char* op_;
  WaitKind kind_;
  std::vector<at::Tensor> keep_alive_;
  std::vector<at::Tensor> results_;
  std::shared_ptr<Completion> completion_;
  std::mutex future_mu_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  bool waited_ = false;
  std::optional<CollectiveTrace> trace_;
  std::shared_ptr<std::atomic<int64_t>> done_ns_;  // tracing only: when the inner work completed
};

int64_t numel(const std::vector<at::Tensor>& tensors) {
  int64_t n = 0;
  for (const at::Tensor& t : tensors) n += t.numel();
  return n;
}

// What the trace shows of a collective issued at `begin` (events::begin_time()): empty when no
// trace is being recorded.
std::optional<CollectiveTrace> trace_of(const c10d::Backend& backend, const char* op,
                                        int64_t bytes, const std::vector<at::Tensor>& in,
                                        const std::vector<at::Tensor>& out, WaitKind kind,
                                        int64_t begin) {
  if (begin == 0 || !events::tracing()) return std::nullopt;
  CollectiveTrace t;
  t.op = op;
  t.bytes = bytes;
  t.in_nelems = numel(in);
  t.out_nelems = numel(out);
  const std::vector<at::Tensor>& any = in.empty() ? out : in;
  t.dtype = any.empty() ? "" : c10::toString(any.front().scalar_type());
  t.group_size = backend.getSize();
  t.rank = backend.getRank();
  t.group_name = backend.getGroupUid();
  t.group_desc = backend.getGroupDesc();
  t.on_device = kind == WaitKind::Device;
  t.phase = Phase::current_name();
  t.thread = trace_thread_id();
  t.issued_ns = begin;
  t.call_end_ns = trace_clock_ns();
  return t;
}

c10::intrusive_ptr<c10d::Work> counted(c10::intrusive_ptr<c10d::Work> work, const char* op,
                                       int64_t bytes, WaitKind kind,
                                       std::vector<at::Tensor> keep_alive,
                                       std::vector<at::Tensor> results,
                                       std::optional<CollectiveTrace> trace,
                                       std::function<void()> finish = nullptr) {
  events::record_collective(op, bytes);
  return c10::make_intrusive<CountedWork>(std::move(work), op, kind, std::move(keep_alive),
                                          std::move(results), std::move(finish), std::move(trace));
}

// A coalesced call (one work for several tensors, as NCCL runs them in one group): one collective
// of `op` per tensor, each with its bytes, and one wait.
c10::intrusive_ptr<c10d::Work> counted_each(c10::intrusive_ptr<c10d::Work> work, const char* op,
                                            const std::vector<int64_t>& bytes_each, WaitKind kind,
                                            std::vector<at::Tensor> keep_alive,
                                            std::vector<at::Tensor> results,
                                            std::optional<CollectiveTrace> trace,
                                            std::function<void()> finish = nullptr) {
  for (const int64_t bytes : bytes_each) events::record_collective(op, bytes);
  return c10::make_intrusive<CountedWork>(std::move(work), op, kind, std::move(keep_alive),
                                          std::move(results), std::move(finish), std::move(trace));
}

std::vector<int64_t> bytes_of_each(const std::vector<at::Tensor>& tensors) {
  std::vector<int64_t> out;
  out.reserve(tensors.size());
  for (const at::Tensor& t : tensors) out.push_back(static_cast<int64_t>(t.nbytes()));
  return out;
}

int64_t sum(const std::vector<int64_t>& v) {
  int64_t total = 0;
  for (const int64_t x : v) total += x;
  return total;
}

// What the inner backend is asked for a reduction that NCCL runs in one kernel and Gloo cannot,
// and what is done to the results once it is done (whoever sees the completion first):
//   - ReduceOp.AVG of integers: NCCL sums and divides, truncating; Gloo's AVG divides by a float
//     and fails ("result type Float can't be cast to ... Long"). Lightning reduces its integer
//     batch sizes this way for sync_dist=True on any backend not named "gloo". Gloo sums; the
//     results are divided by the ranks.
//   - ReduceOp.PREMUL_SUM (`dist._make_nccl_premul_sum(factor)`: torch's FSDP2 with a gradient
//     divide factor, as torchtitan sets one): NCCL multiplies by the factor as it sums; Gloo
//     refuses it. Gloo sums; the results are multiplied by the factor.
// Under Compute::kShapes (nothing moves) nothing is done to them.
struct InnerReduce {
  c10d::ReduceOp op;
  std::function<void()> finish;
};

InnerReduce reduce_for_inner(const c10d::ReduceOp& op, std::vector<at::Tensor> results,
                             int ranks, bool nothing_moves) {
  if (nothing_moves) return {op, nullptr};
  const bool integral = std::any_of(results.begin(), results.end(), [](const at::Tensor& t) {
    return at::isIntegralType(t.scalar_type(), /*includeBool=*/true);
  });
  if (op == c10d::ReduceOp::AVG && integral) {
    return {c10d::ReduceOp(c10d::ReduceOp::SUM), [results, ranks]() mutable {
              for (at::Tensor& t : results) t.div_(ranks, "trunc");
            }};
  }
  if (op == c10d::ReduceOp::PREMUL_SUM) {
    const auto* supplement =
        dynamic_cast<const c10d::NCCLPreMulSumSupplement*>(op.supplement_.get());
    TORCH_CHECK(supplement != nullptr, "ReduceOp.PREMUL_SUM without its factor");
    // A factor tensor on the device is read where it lies, as NCCL's kernel reads it: no copy.
    const at::Tensor tensor_factor = supplement->tensor_factor.defined()
                                         ? for_inner(supplement->tensor_factor)
                                         : at::Tensor();
    const double double_factor = supplement->double_factor;
    return {c10d::ReduceOp(c10d::ReduceOp::SUM), [results, tensor_factor, double_factor]() mutable {
              for (at::Tensor& t : results) {
                if (tensor_factor.defined()) {
                  t.mul_(tensor_factor);
                } else {
                  t.mul_(double_factor);
                }
              }
            }};
  }
  return {op, nullptr};
}

}  // namespace

CountingBackend::CountingBackend(c10::intrusive_ptr<c10d::Backend> inner)
    : c10d::Backend(inner->getRank(), inner->getSize()), inner_(std::move(inner)) {}

const std::string CountingBackend::getBackendName() const {
  return "counting(" + inner_->getBackendName() + ")";
}

c10::intrusive_ptr<c10d::Work> CountingBackend::broadcast(std::vector<at::Tensor>& tensors,
                                                          const c10d::BroadcastOptions& opts) {
  const int64_t begin = events::begin_time();
  std::vector<at::Tensor> inner = for_inner(tensors);
  auto work = moves_nothing(tensors) ? nothing_moved() : inner_->broadcast(inner, opts);
  const int64_t bytes = payload_bytes(tensors);
  const WaitKind kind = wait_kind_of(tensors);
  return counted(std::move(work), "broadcast", bytes, kind, std::move(inner), tensors,
                 trace_of(*this, "broadcast", bytes, tensors, tensors, kind, begin));
}

c10::intrusive_ptr<c10d::Work> CountingBackend::allreduce(std::vector<at::Tensor>& tensors,
                                                          const c10d::AllreduceOptions& opts) {
  const int64_t begin = events::begin_time();
  std::vector<at::Tensor> inner = for_inner(tensors);
  const bool nothing = moves_nothing(tensors);
  InnerReduce reduce = reduce_for_inner(opts.reduceOp, inner, getSize(), nothing);
  c10d::AllreduceOptions inner_opts = opts;
  inner_opts.reduceOp = reduce.op;
  std::function<void()> finish = std::move(reduce.finish);
  auto work = nothing ? nothing_moved() : inner_->allreduce(inner, inner_opts);
  const int64_t bytes = payload_bytes(tensors);
  const WaitKind kind = wait_kind_of(tensors);
  return counted(std::move(work), "all_reduce", bytes, kind, std::move(inner), tensors,
                 trace_of(*this, "all_reduce", bytes, tensors, tensors, kind, begin),
                 std::move(finish));
}

c10::intrusive_ptr<c10d::Work> CountingBackend::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  const int64_t begin = events::begin_time();
  std::vector<at::Tensor> inner_in = for_inner(inputs);
  std::vector<std::vector<at::Tensor>> inner_out;
  std::vector<at::Tensor> keep_alive = inner_in;
  for (const auto& list : outputs) {
    inner_out.push_back(for_inner(list));
    keep_alive.insert(keep_alive.end(), inner_out.back().begin(), inner_out.back().end());
  }
  auto work = moves_nothing(inputs) ? nothing_moved()
                                     : inner_->allgather(inner_out, inner_in, opts);
  std::vector<at::Tensor> results;  // as Gloo's: the output tensors
  for (const auto& list : outputs) results.insert(results.end(), list.begin(), list.end());
  const int64_t bytes = payload_bytes(inputs);
  const WaitKind kind = wait_kind_of(inputs);
  auto trace = trace_of(*this, "all_gather", bytes, inputs, results, kind, begin);
  return counted(std::move(work), "all_gather", bytes, kind, std::move(keep_alive),
                 std::move(results), std::move(trace));
}

c10::intrusive_ptr<c10d::Work> CountingBackend::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) {
  const int64_t begin = events::begin_time();
  std::vector<at::Tensor> inner = for_inner(std::vector<at::Tensor>{output, input});
  auto work = moves_nothing({input}) ? nothing_moved()
                                     : inner_->_allgather_base(inner[0], inner[1], opts);
  const int64_t bytes = static_cast<int64_t>(input.nbytes());
  const WaitKind kind = wait_kind_of({input});
  return counted(std::move(work), "all_gather", bytes, kind, std::move(inner), {output},
                 trace_of(*this, "all_gather", bytes, {input}, {output}, kind, begin));
}

c10::intrusive_ptr<c10d::Work> CountingBackend::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  const int64_t begin = events::begin_time();
  std::vector<at::Tensor> inner = for_inner(std::vector<at::Tensor>{output, input});
  const bool nothing = moves_nothing({input});
  InnerReduce reduce = reduce_for_inner(opts.reduceOp, {inner[0]}, getSize(), nothing);
  c10d::ReduceScatterOptions inner_opts = opts;
  inner_opts.reduceOp = reduce.op;
  auto work = nothing ? nothing_moved() : inner_->_reduce_scatter_base(inner[0], inner[1], inner_opts);
  const int64_t bytes = static_cast<int64_t>(input.nbytes());
  const WaitKind kind = wait_kind_of({input});
  return counted(std::move(work), "reduce_scatter", bytes, kind, std::move(inner), {output},
                 trace_of(*this, "reduce_scatter", bytes, {input}, {output}, kind, begin),
                 std::move(reduce.finish));
}

c10::intrusive_ptr<c10d::Work> CountingBackend::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  const int64_t begin = events::begin_time();
  std::vector<at::Tensor> inner = for_inner(tensors);
  const bool nothing = moves_nothing(tensors);
  InnerReduce reduce = reduce_for_inner(opts.reduceOp, inner, getSize(), nothing);
  c10d::AllreduceCoalescedOptions inner_opts = opts;
  inner_opts.reduceOp = reduce.op;
  auto work = nothing ? nothing_moved() : inner_->allreduce_coalesced(inner, inner_opts);
  const std::vector<int64_t> bytes = bytes_of_each(tensors);
  const WaitKind kind = wait_kind_of(tensors);
  return counted_each(std::move(work), "all_reduce", bytes, kind, std::move(inner), tensors,
                      trace_of(*this, "all_reduce", sum(bytes), tensors, tensors, kind, begin),
                      std::move(reduce.finish));
}

c10::intrusive_ptr<c10d::Work> CountingBackend::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  const int64_t begin = events::begin_time();
  std::vector<at::Tensor> inner_out = for_inner(outputs), inner_in = for_inner(inputs);
  auto work = moves_nothing(inputs)
                  ? nothing_moved()
                  : inner_->allgather_into_tensor_coalesced(inner_out, inner_in, opts);
  std::vector<at::Tensor> keep_alive = inner_out;
  keep_alive.insert(keep_alive.end(), inner_in.begin(), inner_in.end());
  const std::vector<int64_t> bytes = bytes_of_each(inputs);
  const WaitKind kind = wait_kind_of(inputs);
  return counted_each(std::move(work), "all_gather", bytes, kind, std::move(keep_alive), outputs,
                      trace_of(*this, "all_gather", sum(bytes), inputs, outputs, kind, begin));
}

c10::intrusive_ptr<c10d::Work> CountingBackend::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  const int64_t begin = events::begin_time();
  std::vector<at::Tensor> inner_out = for_inner(outputs), inner_in = for_inner(inputs);
  const bool nothing = moves_nothing(inputs);
  InnerReduce reduce = reduce_for_inner(opts.reduceOp, inner_out, getSize(), nothing);
  c10d::ReduceScatterOptions inner_opts = opts;
  inner_opts.reduceOp = reduce.op;
  auto work = nothing ? nothing_moved()
                      : inner_->reduce_scatter_tensor_coalesced(inner_out, inner_in, inner_opts);
  std::vector<at::Tensor> keep_alive = inner_out;
  keep_alive.insert(keep_alive.end(), inner_in.begin(), inner_in.end());
  const std::vector<int64_t> bytes = bytes_of_each(inputs);
  const WaitKind kind = wait_kind_of(inputs);
  return counted_each(std::move(work), "reduce_scatter", bytes, kind, std::move(keep_alive),
                      outputs,
                      trace_of(*this, "reduce_scatter", sum(bytes), inputs, outputs, kind, begin),
                      std::move(reduce.finish));
}

c10::intrusive_ptr<c10d::Work> CountingBackend::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  const int64_t begin = events::begin_time();
  std::vector<at::Tensor> inner_out = for_inner(outputs);
  std::vector<std::vector<at::Tensor>> inner_in;
  std::vector<at::Tensor> keep_alive = inner_out, all_inputs;
  std::vector<int64_t> bytes;  // each output's collective moves its whole input list
  for (const auto& list : inputs) {
    inner_in.push_back(for_inner(list));
    keep_alive.insert(keep_alive.end(), inner_in.back().begin(), inner_in.back().end());
    all_inputs.insert(all_inputs.end(), list.begin(), list.end());
    bytes.push_back(payload_bytes(list));
  }
  const bool nothing = moves_nothing(all_inputs);
  InnerReduce reduce = reduce_for_inner(opts.reduceOp, inner_out, getSize(), nothing);
  c10d::ReduceScatterOptions inner_opts = opts;
  inner_opts.reduceOp = reduce.op;
  auto work = nothing ? nothing_moved() : inner_->reduce_scatter(inner_out, inner_in, inner_opts);
  const WaitKind kind = wait_kind_of(all_inputs);
  return counted_each(
      std::move(work), "reduce_scatter", bytes, kind, std::move(keep_alive), outputs,
      trace_of(*this, "reduce_scatter", sum(bytes), all_inputs, outputs, kind, begin),
      std::move(reduce.finish));
}

c10::intrusive_ptr<c10d::Work> CountingBackend::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_split_sizes,
    std::vector<int64_t>& input_split_sizes, const c10d::AllToAllOptions& opts) {
  const int64_t begin = events::begin_time();
  std::vector<at::Tensor> inner = for_inner(std::vector<at::Tensor>{output, input});
  auto work = moves_nothing({input}) ? nothing_moved()
                                     : inner_->alltoall_base(inner[0], inner[1], output_split_sizes,
                                                             input_split_sizes, opts);
  const int64_t bytes = static_cast<int64_t>(input.nbytes());
  const WaitKind kind = wait_kind_of({input});
  return counted(std::move(work), "all_to_all", bytes, kind, std::move(inner), {output},
                 trace_of(*this, "all_to_all", bytes, {input}, {output}, kind, begin));
}

c10::intrusive_ptr<c10d::Work> CountingBackend::reduce(std::vector<at::Tensor>& tensors,
                                                       const c10d::ReduceOptions& opts) {
  const int64_t begin = events::begin_time();
  std::vector<at::Tensor> inner = for_inner(tensors);
  const bool nothing = moves_nothing(tensors);
  // Only the root's tensors hold the result; the others' are left as they were.
  InnerReduce reduce = reduce_for_inner(opts.reduceOp, inner, getSize(),
                                        nothing || getRank() != opts.rootRank);
  c10d::ReduceOptions inner_opts = opts;
  inner_opts.reduceOp = reduce.op;
  auto work = nothing ? nothing_moved() : inner_->reduce(inner, inner_opts);
  const int64_t bytes = payload_bytes(tensors);
  const WaitKind kind = wait_kind_of(tensors);
  return counted(std::move(work), "reduce", bytes, kind, std::move(inner), tensors,
                 trace_of(*this, "reduce", bytes, tensors, tensors, kind, begin),
                 std::move(reduce.finish));
}

c10::intrusive_ptr<c10d::Work> CountingBackend::gather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::GatherOptions& opts) {
  const int64_t begin = events::begin_time();
  std::vector<at::Tensor> inner_in = for_inner(inputs);
  std::vector<std::vector<at::Tensor>> inner_out;  // empty except on the root
  std::vector<at::Tensor> keep_alive = inner_in, results;
  for (const auto& list : outputs) {
    inner_out.push_back(for_inner(list));
    keep_alive.insert(keep_alive.end(), inner_out.back().begin(), inner_out.back().end());
    results.insert(results.end(), list.begin(), list.end());
  }
  auto work = moves_nothing(inputs) ? nothing_moved() : inner_->gather(inner_out, inner_in, opts);
  const int64_t bytes = payload_bytes(inputs);
  const WaitKind kind = wait_kind_of(inputs);
  auto trace = trace_of(*this, "gather", bytes, inputs, results, kind, begin);
  return counted(std::move(work), "gather", bytes, kind, std::move(keep_alive),
                 std::move(results), std::move(trace));
}

c10::intrusive_ptr<c10d::Work> CountingBackend::scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ScatterOptions& opts) {
  const int64_t begin = events::begin_time();
  std::vector<at::Tensor> inner_out = for_inner(outputs);
  std::vector<std::vector<at::Tensor>> inner_in;  // empty except on the root
  std::vector<at::Tensor> keep_alive = inner_out;
  for (const auto& list : inputs) {
    inner_in.push_back(for_inner(list));
    keep_alive.insert(keep_alive.end(), inner_in.back().begin(), inner_in.back().end());
  }
  auto work = moves_nothing(outputs) ? nothing_moved() : inner_->scatter(inner_out, inner_in, opts);
  const int64_t bytes = payload_bytes(outputs);  // what each rank receives
  const WaitKind kind = wait_kind_of(outputs);
  return counted(std::move(work), "scatter", bytes, kind, std::move(keep_alive), outputs,
                 trace_of(*this, "scatter", bytes, outputs, outputs, kind, begin));
}

c10::intrusive_ptr<c10d::Work> CountingBackend::barrier(const c10d::BarrierOptions& opts) {
  const int64_t begin = events::begin_time();
  auto work = inner_->barrier(opts);
  return counted(std::move(work), "barrier", 0, WaitKind::Barrier, {}, {},
                 trace_of(*this, "barrier", 0, {}, {}, WaitKind::Barrier, begin));
}

}  // namespace harness::runtime

#pragma once
// TraceRecorder: a timeline of the run, written in one of two shapes (TraceFormat):
//   chrome: one Chrome trace-event document (Perfetto UI, chrome://tracing); ranks merged into
//           one file, a process per rank;
//   kineto: one document per rank shaped as PyTorch's Kineto writes it (cpu_op, cuda_runtime,
//           kernel, gpu_memcpy, user_annotation, ProfilerStep#N, distributedInfo), which
//           HolisticTraceAnalysis and TensorBoard's profiler plugin read.
// It records phases (as a PhaseListener), variant sections, measured steps, and the device events
// the instrument sees in measured windows: each launch or copy as the host call that issued it
// and the device slice it ran as, linked by a correlation id (and a flow arrow); syncs; each
// collective as a span from issue to completion. Arguments are JSON values: numbers stay
// numbers. Names are escaped by the JSON library, never by hand.
//
// Tracks (Chrome threads) have fixed ids in a fixed order, the same in every rank's process:
// variants, steps, phases, the host threads, syncs, collectives, then the device streams.
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/instrument/phase.h"

namespace harness {

// Monotonic clock, nanoseconds: the time base of trace events.
int64_t trace_clock_ns() noexcept;

// The calling thread's OS id (gettid), cached per thread.
uint64_t trace_thread_id() noexcept;

// Nanoseconds as the microseconds both trace formats write ("ts", "dur").
inline double ns_to_us(int64_t ns) { return static_cast<double>(ns) / 1000.0; }

// Arguments of a trace event: a JSON object (null: none).
using TraceArgs = nlohmann::json;

enum class TraceFormat { Chrome, Kineto };

// What ran on the device. Collective: on device tensors (an NCCL kernel on a GPU);
// HostCollective: on CPU tensors (Gloo's worker thread does it, no device work).
enum class DeviceWork { Kernel, Memcpy, Memset, Collective, HostCollective };

// The stream sim puts its ops and copies on (as CUPTI numbers PyTorch's default stream), and the
// one its collectives run on (an NCCL stream).
inline constexpr int64_t kSimComputeStream = 7;
inline constexpr int64_t kSimCollectiveStream = 20;

class TraceRecorder final : public PhaseListener {
 public:
  TraceRecorder();

  void on_phase_begin(const char* name) noexcept override;
  void on_phase_end(const char* name) noexcept override;
  // Brackets one variant of one scenario on the "variants" track, at `at_ns` (trace_clock_ns();
  // 0: now). A section may end at a time already past (harness_sim's run knows which step was
  // the last only when the program ends).
  void section_begin(const std::string& name, int64_t at_ns = 0) noexcept;
  void section_end(const std::string& name, int64_t at_ns = 0) noexcept;
  // A measured step, numbered as the trainer numbers it: "step N" on the "steps" track;
  // ProfilerStep#K in the Kineto shape, K counting this recorder's measured steps from 0. A step
  // that never ends leaves nothing.
  void step_begin(int64_t step) noexcept;
  void step_end() noexcept;

  // A span [begin_ns, end_ns] on a named track ("syncs", "collectives", ...).
  void add_span(std::string_view track, std::string_view name, std::string_view category,
                int64_t begin_ns, int64_t end_ns, TraceArgs args = {}) noexcept;
  void add_instant(std::string_view track, std::string_view name, std::string_view category,
                   int64_t at_ns, TraceArgs args = {}) noexcept;
  // A flow arrow (Chrome flow events 's' and 'f') from the slice that encloses `from_ns` on
  // `from_track` to the slice that encloses `to_ns` on `to_track`; `id` is unique in the trace
  // and below 2^39.
  void add_flow(std::string_view name, uint64_t id, std::string_view from_track, int64_t from_ns,
                std::string_view to_track, int64_t to_ns) noexcept;

  // A fresh correlation id (unique in this recorder, from 1) for a host call and its device work.
  uint64_t next_correlation() noexcept;
  // The host call that issued device work with the same `correlation`, on OS thread `thread`
  // (0: the calling thread). `api` is the runtime function (cudaLaunchKernel, cudaMemcpyAsync,
  // ...); `op`, where there is one, the framework op it ran for (sim: the ATen op, whose call is
  // the launch). Chrome: one slice on the thread's host track; Kineto: a cpu_op (when `op` is
  // given) around a cuda_runtime event.
  void add_host_call(std::string_view op, std::string_view api, uint64_t correlation,
                     int64_t begin_ns, int64_t end_ns, TraceArgs args = {},
                     uint64_t thread = 0) noexcept;
  // Work on device `device` (-1: this process's, set_device), stream `stream`, issued by the host call of the same
  // `correlation` (0: none known): a flow arrow goes from that call to it. Collective work on one
  // stream is serialized: a slice starts no earlier than the previous one on its stream ended.
  void add_device_work(DeviceWork kind, std::string_view name, int device, int64_t stream,
                       uint64_t correlation, int64_t begin_ns, int64_t end_ns,
                       TraceArgs args = {}) noexcept;

  size_t event_count() const;
  // The process these events belong to in a Chrome document (default: pid 1, named "bench");
  // ranks use their rank, named "rank <r>". `rank`, `world_size` and `backend` go to the Kineto
  // shape's distributedInfo.
  void set_process(int pid, std::string name, int rank = 0, int world_size = 1,
                   std::string backend = "");
  // Memory of this process's device (`on_device`) or of the host at `at_ns`: the bytes allocated
  // then and the most allocated at once since the previous record (a memory watch records both
  // at every phase boundary), and what the device's allocator holds reserved. Chrome: counters
  // "device memory" and "host memory"; Kineto: PyTorch's "[memory]" instant events.
  void add_memory(bool on_device, int64_t at_ns, int64_t allocated, int64_t peak,
                  std::optional<int64_t> reserved) noexcept;
  // The device of this process: its index, how Chrome tracks name it ("sim", "gpu") and the
  // name deviceProperties gives it.
  void set_device(int index, std::string track_prefix, std::string name);
  // Where ts 0 is, on the monotonic clock (default: when the recorder was made). Ranks of one
  // run share rank 0's, so that their files line up. `unix_ns`: the same instant on the system
  // clock (Kineto's baseTimeNanoseconds); 0: worked out here.
  void set_origin(int64_t origin_ns, int64_t unix_ns = 0);
  int64_t origin_ns() const;
  int64_t origin_unix_ns() const;

  // The Chrome trace-event document; `metadata` goes to "otherData", with "origin_ns" (when the
  // recorder started, on the monotonic clock) beside it.
  std::string to_json(const std::vector<std::pair<std::string, std::string>>& metadata = {}) const;
  // The Kineto-shaped document of this process (one rank); `metadata` goes to "otherData".
  std::string to_kineto_json(
      const std::vector<std::pair<std::string, std::string>>& metadata = {}) const;

  // What is recorded, for the writers (trace.cpp, trace_kineto.cpp).
  enum class Kind { Begin, End, Span, Instant, FlowStart, FlowEnd, Step, HostCall, Device, Memory };
  struct Event {
    Kind kind;
    std::string track;  // Begin/End/Span/Instant/Flow*: the track
    std::string name;   // HostCall: the op ("" for none); Device: the slice's name
    std::string category;  // HostCall: the api
    int64_t ts_ns = 0, dur_ns = 0;
    TraceArgs args;
    uint64_t id = 0;      // flow id; HostCall/Device: correlation; Step: K
    uint64_t thread = 0;  // the OS thread that recorded it (HostCall: the caller's)
    DeviceWork work = DeviceWork::Kernel;
    int device = 0;  // Device: the slice's; Memory: the device's, -1 for the host
    int64_t stream = 0;
    int64_t step = 0;  // Step: the trainer's number
  };
  struct Snapshot {
    std::vector<Event> events;  // sorted by time (ties: in the order recorded)
    int pid, rank;
    std::string process_name;
    int world_size;
    std::string backend;
    int device;
    std::string device_prefix, device_name;
    int64_t origin_ns, origin_unix_ns;
    uint64_t main_thread;  // the thread that made the recorder (drives the run)
  };
  Snapshot snapshot() const;

 private:
  void add(Event event) noexcept;

  int64_t origin_ns_;
  int64_t origin_unix_ns_;
  uint64_t main_thread_;
  int pid_ = 1;
  int rank_ = 0;
  std::string process_name_ = "bench";
  int world_size_ = 1;
  std::string backend_;
  int device_ = 0;
  std::string device_prefix_ = "gpu";
  std::string device_name_;
  mutable std::mutex mu_;
  std::vector<Event> events_;
  std::optional<std::pair<int64_t, int64_t>> open_step_;  // (trainer step, begin)
  uint64_t steps_ = 0;
  uint64_t correlations_ = 0;
};

// The recorder measured steps go to (StepWindow calls these): set by bench for the run's
// lifetime; nullptr: none, and the calls cost one atomic load.
void set_step_trace(TraceRecorder* trace) noexcept;
void trace_step_begin(int64_t step) noexcept;
void trace_step_end() noexcept;

// One document of several processes' Chrome traces (the ranks of a run, each from to_json()):
// events keep their pid, times are moved onto the first document's origin (the monotonic clock is
// shared by the processes of one host), "otherData" is the first document's. Throws
// std::invalid_argument naming the document that is not a trace.
std::string merge_traces(const std::vector<std::string>& documents);

// The Kineto-shaped file of rank `rank` in a --trace directory.
std::string kineto_trace_file(const std::string& dir, int rank);

}  // namespace harness

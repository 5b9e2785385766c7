#pragma once
// TraceSession: the timeline `python -m harness_sim run --trace` writes. bench's TraceRecorder,
// fed while the session listens by the phases (a PhaseListener: the program's record_function
// and NVTX ranges, Lightning's hooks), by the instruments of the CountSessions it is attached to
// (CountSession::set_trace: launches, copies, syncs, collectives) and by run's step windows
// (steps, and sections named as the report's variants). Written as bench writes --trace: one
// Chrome trace-event document, or (kineto) a directory with the Kineto-shaped file of this rank
// (rank 0 unless set_rank). The ranks a program starts under run each write their own, which
// rank 0's run merges (merge_trace_files) or puts beside its own.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "harness/instrument/trace.h"

namespace harness::python {

// How reports and traces written from Python name the device.
inline constexpr const char* kSimDeviceName =
    "simulated accelerator in host memory (harness_sim in Python)";

class TraceSession {
 public:
  // Listens to phases from now on; `process` names the process on the timeline.
  explicit TraceSession(const std::string& process);
  ~TraceSession();
  TraceSession(const TraceSession&) = delete;
  TraceSession& operator=(const TraceSession&) = delete;

  // What the CountSessions put their events on (they keep it alive while attached).
  const std::shared_ptr<TraceRecorder>& recorder() const { return recorder_; }
  // Stops listening to phases (once; the destructor does it too).
  void stop() noexcept;
  // This process as rank `rank` of `world_size` (the ranks a program started under run): the
  // process "rank <r>" on a Chrome timeline (pid r, as bench's ranks), the Kineto shape's
  // distributedInfo, and the sim device of that rank.
  void set_rank(int rank, int world_size);
  // Where ts 0 is (TraceRecorder::set_origin): every rank takes rank 0's, so their files line up.
  std::pair<int64_t, int64_t> origin() const;
  void set_origin(int64_t origin_ns, int64_t unix_ns);
  // Writes the timeline atomically: format "chrome" to the file `path`, "kineto" to
  // kineto_trace_file(path, rank), creating the directory `path`. `metadata` goes to
  // "otherData", with the device and the instrument.
  // Throws InputError naming the path when it cannot be written.
  void write(const std::string& path, const std::string& format,
             const std::map<std::string, std::string>& metadata) const;

 private:
  std::shared_ptr<TraceRecorder> recorder_;
  bool listening_ = false;
  int rank_ = 0;
};

// One Chrome trace of the ranks' files (`paths[0]` rank 0's, each written by TraceSession::write),
// merged as bench merges its ranks' (merge_traces), written atomically to `out`. Throws
// InputError naming a file that cannot be read or is not a trace, or `out` when it cannot be
// written.
void merge_trace_files(const std::vector<std::string>& paths, const std::string& out);

}  // namespace harness::python

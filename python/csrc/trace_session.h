#pragma once
// TraceSession: the timeline `python -m harness_sim run --trace` writes. bench's TraceRecorder,
// fed while the session listens by the phases (a PhaseListener: the program's record_function
// and NVTX ranges, Lightning's hooks), by the instruments of the CountSessions it is attached to
// (CountSession::set_trace: launches, copies, syncs, collectives) and by run's step windows
// (steps, and sections named as the report's variants). Written as bench writes --trace: one
// Chrome trace-event document, or (kineto) a directory with the Kineto-shaped file of rank 0.
#include <cstdint>
#include <map>
#include <memory>
#include <string>

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
  // Writes the timeline atomically: format "chrome" to the file `path`, "kineto" to
  // kineto_trace_file(path, 0), creating the directory `path`. `metadata` goes to "otherData",
  // with the device and the instrument.
  // Throws InputError naming the path when it cannot be written.
  void write(const std::string& path, const std::string& format,
             const std::map<std::string, std::string>& metadata) const;

 private:
  std::shared_ptr<TraceRecorder> recorder_;
  bool listening_ = false;
};

}  // namespace harness::python

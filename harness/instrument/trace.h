#pragma once
// TraceRecorder: a timeline of the run, written as Chrome trace-event JSON (loads in Perfetto UI
// and chrome://tracing). It records phases (as a PhaseListener), variant sections, and the device
// events the instrument sees in measured windows: ops (spans), copies (spans with bytes), syncs
// (instants); on CUDA also kernels on their streams and flow arrows from each launch call to what
// it launched. Names are escaped by the JSON library, never by hand.
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "harness/instrument/phase.h"

namespace harness {

// Monotonic clock, nanoseconds: the time base of trace events.
int64_t trace_clock_ns() noexcept;

class TraceRecorder final : public PhaseListener {
 public:
  TraceRecorder();

  void on_phase_begin(const char* name) noexcept override;
  void on_phase_end(const char* name) noexcept override;

  // A span [begin_ns, end_ns] on a named track (e.g. "device ops", "copies").
  void add_span(std::string_view track, std::string_view name, std::string_view category,
                int64_t begin_ns, int64_t end_ns,
                std::vector<std::pair<std::string, std::string>> args = {}) noexcept;
  void add_instant(std::string_view track, std::string_view name, std::string_view category,
                   int64_t at_ns, std::vector<std::pair<std::string, std::string>> args = {}) noexcept;
  // A flow arrow (Chrome flow events 's' and 'f') from the slice that encloses `from_ns` on
  // `from_track` to the slice that encloses `to_ns` on `to_track`; `id` is unique in the trace.
  void add_flow(std::string_view name, uint64_t id, std::string_view from_track, int64_t from_ns,
                std::string_view to_track, int64_t to_ns) noexcept;
  // Brackets one variant of one scenario on the "variants" track.
  void section_begin(const std::string& name) noexcept;
  void section_end(const std::string& name) noexcept;

  size_t event_count() const;
  // The process these events belong to in the document (default: pid 1, no name); ranks use
  // their rank, named "rank <r>".
  void set_process(int pid, std::string name);
  // The Chrome trace-event document; `metadata` goes to "otherData", with "origin_ns" (when the
  // recorder started, on the monotonic clock) beside it.
  std::string to_json(const std::vector<std::pair<std::string, std::string>>& metadata = {}) const;

 private:
  struct Event {
    char phase;  // 'B', 'E', 'X', 'i', 's', 'f'
    std::string track, name, category;
    int64_t ts_ns, dur_ns;
    std::vector<std::pair<std::string, std::string>> args;
    uint64_t flow_id = 0;  // 's' and 'f' only
  };
  void add(Event event) noexcept;

  int64_t origin_ns_;
  int pid_ = 1;
  std::string process_name_;
  mutable std::mutex mu_;
  std::vector<Event> events_;
};

// One document of several processes' traces (the ranks of a run, each from to_json()): events
// keep their pid, times are moved onto the first document's origin (the monotonic clock is
// shared by the processes of one host), "otherData" is the first document's. Throws
// std::invalid_argument naming the document that is not a trace.
std::string merge_traces(const std::vector<std::string>& documents);

}  // namespace harness

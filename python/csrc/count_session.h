#pragma once
// CountSession: what `with harness_sim.count() as c:` drives. The sim instrument (the same
// EventCollector and MemoryWatch as bench's) switched on for the with-block, the host time of
// each `c.step()` and of the phases inside it (PhaseClock), and where each sync came from in
// Python (site.h). Turns what it saw into a VariantResult, as bench's StepWindow does.
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "harness/instrument/counts.h"
#include "harness/instrument/instrument.h"
#include "harness/instrument/site.h"
#include "harness/instrument/trace.h"
#include "harness/measure.h"
#include "harness/report/model/result.h"

struct _object;  // CPython's PyObject

namespace harness::python {

// Syncs and copies are sited (harness/instrument/site.h) by the calling thread's Python frames:
// the innermost frame outside torch, Lightning and harness_sim, and the library frame it called.
// install_python_sites() makes that the process's resolver (at import of harness_sim).
void install_python_sites();
// The ContextVar harness_sim.allow_sync sets (see _device/counting.py): a str inside an allowed
// region.
void set_allowed_var(_object* var);  // a PyObject*
// How sites name files: relative to `root` (the program's root; "": as they are), else from the
// package on for a file under one of `package_dirs` (site-packages and the like).
void set_site_paths(const std::string& root, std::vector<std::string> package_dirs);

// A place in a Python file.
struct SourceLine {
  std::string file;
  int line = 0;
  std::string function;
};
// The site (frame, library) of a stack given innermost first, named as the calling thread's
// frames are: the innermost frame outside the libraries, and the innermost library frame under
// it. For a stack Python no longer runs: a line dynamo traced into a compiled graph.
Site site_of(const std::vector<SourceLine>& stack);

class CountSession {
 public:
  CountSession();
  ~CountSession();
  CountSession(const CountSession&) = delete;
  CountSession& operator=(const CountSession&) = delete;

  void start();
  void stop();
  bool active() const { return active_; }
  // A training step inside the session: timed, and its phases timed.
  void begin_step();
  void end_step();

  // mark() remembers the session as it stands (stopped); rewind() brings it back to the mark,
  // dropping what was counted since: `run` marks at each step's end, so what follows the last
  // step is left out of the report without writing one at every step. rewind() without a mark
  // is an error.
  void mark();
  void rewind();
  bool marked() const { return mark_.has_value(); }

  // Also put what the instrument sees on `trace` (nullptr: off), which the session keeps alive
  // while it is attached. Only while the session is stopped (std::logic_error otherwise).
  void set_trace(std::shared_ptr<TraceRecorder> trace);

  // Everything counted so far (the with-block, steps or not).
  const Counts& counts() const { return counts_; }
  int64_t steps() const { return static_cast<int64_t>(step_ns_.size()); }
  // Counts, per-step figures (divided by steps(), or by 1 without steps), step and phase times.
  VariantResult variant(const std::string& name,
                        const std::map<std::string, std::string>& axes) const;

 private:
  std::unique_ptr<Instrument> instrument_;
  std::shared_ptr<TraceRecorder> trace_;
  bool active_ = false;
  bool in_step_ = false;
  Counts counts_;
  PhaseClock phase_clock_;
  int64_t step_started_ns_ = 0;
  int64_t step_started_cpu_ns_ = 0;
  std::vector<int64_t> step_ns_, step_cpu_ns_;
  std::vector<int64_t> probe_ns_;  // time_machine_probe() after each step, outside its time
  std::optional<NvtxRange> step_range_;  // "step N" while a c.step() runs
  struct Mark {
    Counts counts;
    size_t steps = 0;
    std::map<std::string, size_t> phase_samples;
  };
  std::optional<Mark> mark_;
};

// The phase stack as Python sees it: enter and exit in strict LIFO order (a `with` block), names
// interned for the life of the process (Phase keeps pointers). exit_phase throws
// std::logic_error when `name` is not the innermost phase this module opened.
void enter_phase(const std::string& name);
void exit_phase(const std::string& name);

}  // namespace harness::python

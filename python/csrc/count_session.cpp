#include "count_session.h"

#include <Python.h>
#include <frameobject.h>

#include <chrono>
#include <list>
#include <stdexcept>
#include <unordered_set>

#include "harness/instrument/phase.h"
#include "harness/runtime/device.h"

namespace harness::python {
namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string as_string(PyObject* o) {
  if (o == nullptr || !PyUnicode_Check(o)) return "?";
  const char* s = PyUnicode_AsUTF8(o);
  return s ? s : "?";
}

// Frames of torch itself and of this package are not where the user's sync is.
bool is_library_file(const std::string& file) {
  return file.find("/torch/") != std::string::npos ||
         file.find("/harness_sim/") != std::string::npos ||
         file.find("/lightning/") != std::string::npos ||
         file.find("/pytorch_lightning/") != std::string::npos ||
         file.find("/_pytest/") != std::string::npos ||
         file.find("/pluggy/") != std::string::npos || file.rfind("<frozen", 0) == 0;
}

// The innermost frame of the calling thread outside the libraries, with its library callee for
// context: "train.py:42 in training_step (torch/optim/adam.py:512 in _multi_tensor_adam)". The
// callee is a frame of harness_sim's own only where no other library frame is between (run
// --as-cuda's TorchFunctionMode sits under every torch call: torch's line is the one to name).
// Needs the GIL; "" on a thread without Python frames (the autograd engine's).
std::string python_caller() {
  PyFrameObject* frame = PyEval_GetFrame();  // borrowed
  if (frame == nullptr) return "";
  Py_INCREF(frame);
  std::string innermost_library;
  std::string innermost_own;  // harness_sim's
  std::string found;
  while (frame != nullptr) {
    PyCodeObject* code = PyFrame_GetCode(frame);  // new reference
    const std::string file = as_string(code->co_filename);
    const std::string where =
        file + ":" + std::to_string(PyFrame_GetLineNumber(frame)) + " in " + as_string(code->co_name);
    Py_DECREF(code);
    if (!is_library_file(file)) {
      found = where;
      Py_DECREF(frame);
      break;
    }
    const bool own = file.find("/harness_sim/") != std::string::npos;
    if (own && innermost_own.empty()) innermost_own = where;
    if (!own && innermost_library.empty()) innermost_library = where;
    PyFrameObject* back = PyFrame_GetBack(frame);  // new reference
    Py_DECREF(frame);
    frame = back;
  }
  if (innermost_library.empty() && found.empty()) innermost_library = innermost_own;
  if (found.empty()) return innermost_library;
  if (innermost_library.empty()) return found;
  // Only the part of a library path from its package on.
  for (const char* package : {"/torch/", "/lightning/", "/pytorch_lightning/", "/harness_sim/"}) {
    const auto at = innermost_library.find(package);
    if (at != std::string::npos) {
      innermost_library = innermost_library.substr(at + 1);
      break;
    }
  }
  return found + " (" + innermost_library + ")";
}

}  // namespace

void SyncFrames::note(const SyncSiteKey& site) {
  std::string where;
  if (Py_IsInitialized() && !_Py_IsFinalizing()) {
    const PyGILState_STATE gil = PyGILState_Ensure();
    where = python_caller();
    PyGILState_Release(gil);
  }
  std::lock_guard<std::mutex> lock(mu_);
  frames_[site][where] += 1;
}

std::map<SyncSiteKey, std::map<std::string, int64_t>> SyncFrames::take() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::exchange(frames_, {});
}

CountSession::CountSession()
    : instrument_(make_instrument(DeviceKind::Sim)),
      live_frames_(std::make_shared<SyncFrames>()) {
  std::weak_ptr<SyncFrames> frames = live_frames_;
  instrument_->observe_syncs([frames](const SyncSiteKey& site) {
    if (auto f = frames.lock()) f->note(site);
  });
}

CountSession::~CountSession() {
  if (active_) instrument_->stop();
  instrument_->attach_trace(nullptr);
  phase_clock_.end_step();
}

void CountSession::start() {
  if (active_) throw std::logic_error("this harness_sim.count() is already counting");
  (void)instrument_->take();
  instrument_->start();
  active_ = true;
}

void CountSession::stop() {
  if (!active_) return;
  if (in_step_) end_step();
  instrument_->stop();
  active_ = false;
  counts_.add(instrument_->take());
  for (auto& [site, where] : live_frames_->take()) {
    for (auto& [frame, n] : where) frames_[site][frame] += n;
  }
}

void CountSession::set_trace(std::shared_ptr<TraceRecorder> trace) {
  if (active_) throw std::logic_error("set_trace() while the session counts: stop it first");
  instrument_->attach_trace(trace.get());
  trace_ = std::move(trace);
}

void CountSession::begin_step() {
  if (!active_) throw std::logic_error("step() outside the with-block of harness_sim.count()");
  if (in_step_) throw std::logic_error("step() inside another step()");
  phase_clock_.begin_step();
  in_step_ = true;
  step_range_.emplace("step " + std::to_string(steps() + 1));  // NVTX, as bench's steps
  step_started_cpu_ns_ = process_cpu_ns();
  step_started_ns_ = now_ns();
}

void CountSession::end_step() {
  if (!in_step_) return;
  step_ns_.push_back(now_ns() - step_started_ns_);
  step_cpu_ns_.push_back(process_cpu_ns() - step_started_cpu_ns_);
  phase_clock_.end_step();
  step_range_.reset();
  in_step_ = false;
  // The machine's speed beside each step (as bench's windows do): bench compare reads a step-time
  // change of two runs against the probe's.
  probe_ns_.push_back(time_machine_probe());
}

void CountSession::mark() {
  if (active_) throw std::logic_error("mark() while the session counts: stop it first");
  mark_ = Mark{counts_, frames_, step_ns_.size(), phase_clock_.sample_counts()};
}

void CountSession::rewind() {
  if (active_) throw std::logic_error("rewind() while the session counts: stop it first");
  if (!mark_) throw std::logic_error("rewind() without a mark()");
  counts_ = mark_->counts;
  frames_ = mark_->frames;
  step_ns_.resize(mark_->steps);
  step_cpu_ns_.resize(mark_->steps);
  probe_ns_.resize(mark_->steps);
  phase_clock_.truncate(mark_->phase_samples);
}

VariantResult CountSession::variant(const std::string& name,
                                    const std::map<std::string, std::string>& axes) const {
  VariantResult r;
  r.name = name;
  r.axes = axes;
  r.ran = true;
  fill_counts(r, counts_, steps() > 0 ? steps() : 1, instrument_->measures_launches(),
              instrument_->available());
  if (steps() > 0) {
    set_step_times(r, step_ns_, step_cpu_ns_);
    add_machine_probe(r, probe_ns_);
    add_phase_times(r, phase_clock_);
  } else {
    r.warnings.push_back("no c.step() in the counted block: per-step figures are the block's");
  }
  return r;
}

namespace {
struct PhaseStack {
  std::mutex mu;
  std::unordered_set<std::string> names;  // interned for the life of the process
  std::list<Phase> open;
};
PhaseStack& phase_stack() {
  static auto* stack = new PhaseStack();  // leaked: Phase names must outlive every scope
  return *stack;
}
}  // namespace

void enter_phase(const std::string& name) {
  PhaseStack& s = phase_stack();
  std::lock_guard<std::mutex> lock(s.mu);
  const std::string& interned = *s.names.insert(name).first;
  s.open.emplace_back(interned.c_str());
}

void exit_phase(const std::string& name) {
  PhaseStack& s = phase_stack();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.open.empty() || name != Phase::current_name()) {
    throw std::logic_error("harness_sim.phase('" + name + "') ended while '" +
                           Phase::current_name() + "' is the innermost phase: phases must nest");
  }
  s.open.pop_back();
}

}  // namespace harness::python

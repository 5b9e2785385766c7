#include "count_session.h"

#include <Python.h>
#include <frameobject.h>

#include <algorithm>
#include <chrono>
#include <list>
#include <stdexcept>
#include <functional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "harness/instrument/phase.h"
#include "harness/instrument/site.h"
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
  if (const char* s = PyUnicode_AsUTF8(o)) return s;
  // Not UTF-8: a path whose bytes Python decoded with surrogateescape (a directory named
  // $'d\xfe'). Its bytes again, the ones that are not UTF-8 written \xfe (backslashreplace), so
  // that a site names it readably and a report stays valid JSON (issue 53).
  PyErr_Clear();
  std::string out = "?";
  if (PyObject* bytes = PyUnicode_EncodeFSDefault(o)) {
    if (PyObject* text = PyUnicode_DecodeUTF8(PyBytes_AS_STRING(bytes), PyBytes_GET_SIZE(bytes),
                                              "backslashreplace")) {
      if (const char* s = PyUnicode_AsUTF8(text)) out = s;
      Py_DECREF(text);
    }
    Py_DECREF(bytes);
  }
  PyErr_Clear();
  return out;
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

// How paths are named in sites (set_site_paths): relative to the program's root, or from the
// package on for a file under a directory packages are imported from.
struct SitePaths {
  std::mutex mu;
  std::string root;                       // with a trailing '/'; "" names paths as they are
  std::vector<std::string> package_dirs;  // each with a trailing '/', longest first
};
SitePaths& site_paths() {
  static SitePaths* paths = new SitePaths();  // never destroyed: read at exit by late syncs
  return *paths;
}

std::string with_slash(std::string dir) {
  if (!dir.empty() && dir.back() != '/') dir += '/';
  return dir;
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return !prefix.empty() && s.compare(0, prefix.size(), prefix) == 0;
}

std::string short_path(const std::string& file) {
  SitePaths& paths = site_paths();
  std::lock_guard<std::mutex> lock(paths.mu);
  // Packages first: a project-local virtual environment (.venv/lib/python3.11/site-packages)
  // is under the program's root, and its packages are named from the package on all the same,
  // as on a machine whose environment is elsewhere (issue 53).
  for (const std::string& dir : paths.package_dirs) {
    if (starts_with(file, dir)) return file.substr(dir.size());
  }
  if (starts_with(file, paths.root)) return file.substr(paths.root.size());
  // A library outside those directories: from its package on.
  for (const char* package : {"/torch/", "/lightning/", "/pytorch_lightning/", "/harness_sim/"}) {
    const auto at = file.rfind(package);
    if (at != std::string::npos) return file.substr(at + 1);
  }
  return file;
}

// The line a frame is at. CPython finds it by scanning the code object's line table from its
// start for every call (PyCode_Addr2Line), so in a function of N lines a site cost O(N): 20,000
// syncing lines in one function took 3 s a step (issue 53). Here each code object's table is
// read once (co_lines(): byte ranges of instructions and their lines, in order) and searched by
// the frame's instruction offset; each code object read is kept alive, so that its address is
// never another's. Needs the GIL.
int line_of(PyFrameObject* frame, PyCodeObject* code) {
  struct Range {
    long start, end, line;  // line -1: none (CPython's None)
  };
  static auto* tables = new std::unordered_map<PyCodeObject*, std::vector<Range>>();  // kept
  auto table = tables->find(code);
  if (table == tables->end()) {
    std::vector<Range> ranges;
    if (PyObject* lines = PyObject_CallMethod(reinterpret_cast<PyObject*>(code), "co_lines",
                                              nullptr)) {
      while (PyObject* item = PyIter_Next(lines)) {
        if (PyTuple_Check(item) && PyTuple_GET_SIZE(item) == 3) {
          PyObject* line = PyTuple_GET_ITEM(item, 2);
          ranges.push_back({PyLong_AsLong(PyTuple_GET_ITEM(item, 0)),
                            PyLong_AsLong(PyTuple_GET_ITEM(item, 1)),
                            line == Py_None ? -1 : PyLong_AsLong(line)});
        }
        Py_DECREF(item);
      }
      Py_DECREF(lines);
    }
    if (PyErr_Occurred()) {
      PyErr_Clear();
      return PyFrame_GetLineNumber(frame);
    }
    Py_INCREF(code);  // held for as long as its table: its address stays its own
    table = tables->emplace(code, std::move(ranges)).first;
  }
  const long offset = PyFrame_GetLasti(frame);
  const std::vector<Range>& ranges = table->second;
  auto at = std::upper_bound(ranges.begin(), ranges.end(), offset,
                             [](long o, const Range& r) { return o < r.start; });
  if (at != ranges.begin() && offset < (at - 1)->end && (at - 1)->line >= 0) {
    return static_cast<int>((at - 1)->line);
  }
  return PyFrame_GetLineNumber(frame);  // what the table does not say, as CPython says it
}

std::string frame_text(PyFrameObject* frame, const std::string& file) {
  PyCodeObject* code = PyFrame_GetCode(frame);  // new reference
  std::string where = short_path(file) + ":" + std::to_string(line_of(frame, code)) + " in " +
                      as_string(code->co_name);
  Py_DECREF(code);
  return where;
}

std::string frame_file(PyFrameObject* frame) {
  PyCodeObject* code = PyFrame_GetCode(frame);  // new reference
  std::string file = as_string(code->co_filename);
  Py_DECREF(code);
  return file;
}

// The innermost frame of the calling thread outside the libraries, and its library callee for
// context: frame "train.py:42 in training_step", library "torch/optim/adam.py:512 in
// _multi_tensor_adam". harness_sim's own frames are never the callee (run --as-cuda's
// TorchFunctionMode sits under every torch call: naming it would say nothing, and would tie a
// site to harness_sim's line numbers). Needs the GIL; false on a thread without Python frames.
bool python_caller(Site& out) {
  PyFrameObject* frame = PyEval_GetFrame();  // borrowed
  if (frame == nullptr) return false;
  Py_INCREF(frame);
  std::string innermost_library;
  while (frame != nullptr) {
    const std::string file = frame_file(frame);
    if (!is_library_file(file)) {
      out.frame = frame_text(frame, file);
      Py_DECREF(frame);
      break;
    }
    const bool own = file.find("/harness_sim/") != std::string::npos;
    if (!own && innermost_library.empty()) innermost_library = frame_text(frame, file);
    PyFrameObject* back = PyFrame_GetBack(frame);  // new reference
    Py_DECREF(frame);
    frame = back;
  }
  out.library = innermost_library;
  return !out.empty();
}

std::string line_text(const SourceLine& at) {
  return short_path(at.file) + ":" + std::to_string(at.line) + " in " + at.function;
}

// harness_sim.allow_sync's ContextVar (a str while inside an allowed region, else None): set
// once at import, never released.
PyObject* g_allowed_var = nullptr;

// Why the calling context allows syncs ("" outside allow_sync). Needs the GIL.
std::string allowed_here() {
  if (g_allowed_var == nullptr) return "";
  PyObject* value = nullptr;
  if (PyContextVar_Get(g_allowed_var, Py_None, &value) < 0) {
    PyErr_Clear();
    return "";
  }
  std::string why = value != nullptr && PyUnicode_Check(value) ? as_string(value) : "";
  Py_XDECREF(value);
  return why;
}

// The site resolver (site.h) of a process that imported harness_sim.
bool python_site(Site& out) {
  if (!Py_IsInitialized() || _Py_IsFinalizing()) return false;
  // A thread that never ran Python (Gloo's, c10d's, a C++ worker's) has no frames to name: it
  // must not wait for the GIL, which a Python thread may hold while it waits for this one.
  if (PyGILState_GetThisThreadState() == nullptr) return false;
  const PyGILState_STATE gil = PyGILState_Ensure();
  const bool found = python_caller(out);
  if (found) out.allowed = allowed_here();
  PyGILState_Release(gil);
  return found;
}

}  // namespace

void install_python_sites() { set_site_resolver(&python_site); }

void set_allowed_var(_object* var) {
  if (!PyContextVar_CheckExact(var)) throw std::invalid_argument("expected a contextvars.ContextVar");
  Py_INCREF(var);
  Py_XDECREF(g_allowed_var);
  g_allowed_var = var;
}

Site site_of(const std::vector<SourceLine>& stack) {
  Site out;
  std::string innermost_library;
  for (const SourceLine& at : stack) {
    if (!is_library_file(at.file)) {
      out.frame = line_text(at);
      break;
    }
    const bool own = at.file.find("/harness_sim/") != std::string::npos;
    if (!own && innermost_library.empty()) innermost_library = line_text(at);
  }
  out.library = innermost_library;
  return out;
}

void set_site_paths(const std::string& root, std::vector<std::string> package_dirs) {
  for (std::string& dir : package_dirs) dir = with_slash(dir);
  std::sort(package_dirs.begin(), package_dirs.end(),
            [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  SitePaths& paths = site_paths();
  std::lock_guard<std::mutex> lock(paths.mu);
  paths.root = root.empty() ? "" : with_slash(root);
  paths.package_dirs = std::move(package_dirs);
}

CountSession::CountSession() : instrument_(make_instrument(DeviceKind::Sim)) {}

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
  mark_ = Mark{counts_, step_ns_.size(), phase_clock_.sample_counts()};
}

void CountSession::rewind() {
  if (active_) throw std::logic_error("rewind() while the session counts: stop it first");
  if (!mark_) throw std::logic_error("rewind() without a mark()");
  counts_ = mark_->counts;
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

// harness_sim._C: the sim backend, the instrument and the report writer of the harness, loaded
// into PyTorch's own Python process (the same LibTorch 2.11.0 the C++ project builds against).
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/reducer_timer.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/Storage.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/version.h>

#include <ATen/Parallel.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <pybind11/chrono.h>
#include <pybind11/stl.h>

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "count_session.h"
#include "trace_session.h"
#include "harness/errors.h"
#include "harness/instrument/phase_scope.h"
#include "harness/instrument/sim/sim_device.h"
#include "harness/report/gates/expectations.h"
#include "harness/report/gates/gate.h"
#include "harness/report/io/atomic_write.h"
#include "harness/report/io/json_report.h"
#include "harness/report/model/rank_merge.h"
#include "harness/runtime/dist/counting_backend.h"

namespace py = pybind11;

namespace harness::python {
namespace {

py::dict copy_dict(const CopyTally& t) {
  py::dict d;
  d["count"] = t.count;
  d["bytes"] = t.bytes;
  d["pinned"] = t.pinned;
  return d;
}

const c10::impl::DeviceGuardImplInterface& sim_guard() {
  return *c10::impl::getDeviceGuardImpl(c10::DeviceType::PrivateUse1);
}

py::object optional_int(const std::optional<int64_t>& v) {
  return v ? py::object(py::int_(*v)) : py::object(py::none());
}

py::dict phase_dict(const PhaseCounts& c) {
  py::dict d;
  d["launches"] = c.launches;
  d["launches_by_op"] = c.launches_by_op;
  d["h2d"] = copy_dict(c.h2d);
  d["d2h"] = copy_dict(c.d2h);
  d["d2d"] = copy_dict(c.d2d);
  d["cross_device"] = copy_dict(c.cross_device);
  d["syncs"] = c.syncs;
  d["sync_wait_ns"] = c.timed_syncs == c.syncs ? py::object(py::int_(c.sync_wait_ns))
                                               : py::object(py::none());
  d["collective_waits"] = c.collective_waits;
  d["stream_waits"] = c.stream_waits;
  d["graph_breaks"] = c.graph_breaks;
  d["recompiles"] = c.recompiles;
  d["capture_blockers"] = c.capture_blockers;
  py::dict collectives;
  for (const auto& [name, t] : c.collectives) {
    py::dict one;
    one["count"] = t.count;
    one["bytes"] = t.bytes;
    collectives[py::str(name)] = one;
  }
  d["collectives"] = collectives;
  py::dict memory;
  memory["device_peak"] = optional_int(c.memory.device.peak);
  memory["device_allocated"] = optional_int(c.memory.device.allocated);
  memory["device_reserved_peak"] = optional_int(c.memory.reserved.peak);
  memory["device_reserved"] = optional_int(c.memory.reserved.allocated);
  memory["host_peak"] = optional_int(c.memory.host.peak);
  memory["host_allocated"] = optional_int(c.memory.host.allocated);
  d["memory"] = memory;
  return d;
}

// Everything a session counted, as plain Python data (harness_sim.Counts wraps it).
py::dict counts_dict(const CountSession& s) {
  const Counts& counts = s.counts();
  py::dict d;
  d["total"] = phase_dict(counts.total());
  py::dict phases;
  for (const auto& [name, c] : counts.phases) phases[py::str(name)] = phase_dict(c);
  d["phases"] = phases;
  py::list sites;
  for (const auto& [key, tally] : counts.sync_sites) {
    py::dict site;
    site["phase"] = key.phase;
    site["op"] = key.op;
    site["reason"] = key.reason;
    site["count"] = tally.count;
    // Host time waited in these syncs (ns); None unless every one of them was timed.
    site["wait_ns"] = tally.timed == tally.count ? py::object(py::int_(tally.wait_ns))
                                                 : py::object(py::none());
    site["frame"] = key.frame;
    site["library"] = key.library;
    site["allowed"] = key.allowed;
    sites.append(site);
  }
  d["sync_sites"] = sites;
  py::list copy_sites;
  for (const auto& [key, tally] : counts.copy_sites) {
    py::dict site;
    site["phase"] = key.phase;
    site["kind"] = key.kind;
    site["how"] = key.how;
    site["frame"] = key.frame;
    site["library"] = key.library;
    site["count"] = tally.count;
    site["bytes"] = tally.bytes;
    copy_sites.append(site);
  }
  d["copy_sites"] = copy_sites;
  py::list event_sites;
  for (const auto& [key, count] : counts.event_sites) {
    py::dict site;
    site["kind"] = key.kind;
    site["phase"] = key.phase;
    site["what"] = key.what;
    site["frame"] = key.frame;
    site["library"] = key.library;
    site["count"] = count;
    event_sites.append(site);
  }
  d["event_sites"] = event_sites;
  d["steps"] = s.steps();
  return d;
}

// Provenance comes from Python (sys.argv, torch.__version__, ...): keys as in report-v1.md.
Provenance provenance_from(const py::dict& p) {
  Provenance out;
  auto text = [&p](const char* key) {
    return p.contains(key) && !p[key].is_none() ? py::str(p[key]).cast<std::string>()
                                                : std::string();
  };
  out.tool_version = text("tool_version");
  out.git_sha = text("git_sha");
  out.argv = p.contains("argv") ? p["argv"].cast<std::vector<std::string>>()
                                : std::vector<std::string>{};
  out.build_type = text("build_type");
  out.libtorch_version = text("libtorch_version");
  out.device = "sim";
  out.compute = sim::compute_name(sim::compute());
  out.device_name = kSimDeviceName;
  out.instrument = "dispatcher";
  out.instrument_status = "ok";
  out.hostname = text("hostname");
  out.started_at = text("started_at");
  static const std::string process_id = new_process_id();  // one for the process's reports
  out.process_id = process_id;
  out.intra_op_threads = at::get_num_threads();  // this process's, as bench's leader
  return out;
}

// One scenario of the given variants (name, axes, session), written as a schema-v1 report.
void write_report(const std::string& path, const py::dict& provenance,
                  const std::vector<std::string>& warnings, const std::string& scenario,
                  const std::string& description, const std::string& measured_window,
                  const std::map<std::string, std::string>& config, const py::list& variants) {
  RunReport report;
  report.provenance = provenance_from(provenance);
  report.warnings = warnings;
  ScenarioResult s;
  s.name = scenario;
  s.description = description;
  s.measured_window = measured_window;
  s.config = config;
  for (const py::handle v : variants) {
    const auto t = v.cast<py::tuple>();
    const auto& session = t[2].cast<const CountSession&>();
    if (session.active()) {
      throw std::logic_error("report() inside the with-block of harness_sim.count()");
    }
    s.variants.push_back(session.variant(t[0].cast<std::string>(),
                                         t[1].cast<std::map<std::string, std::string>>()));
  }
  report.scenarios.push_back(std::move(s));
  write_report_file(path, report);
}

// One report of the ranks a program started (python -m harness_sim run of a Lightning DDP program):
// `paths[r]` is rank r's report of one scenario, rank 0's first. Written as bench writes a run of
// several ranks (merge_rank_results: the variants merged over ranks, then each rank's own as
// "rank<r>/<name>"), with rank 0's provenance.
void merge_rank_reports(const std::vector<std::string>& paths, const std::string& out) {
  if (paths.empty()) throw std::invalid_argument("merge_rank_reports: no reports");
  std::vector<ScenarioResult> per_rank;
  RunReport merged;
  for (size_t r = 0; r < paths.size(); ++r) {
    RunReport report = read_report_file(paths[r]);
    if (report.scenarios.size() != 1) {
      throw InputError("rank " + std::to_string(r) + "'s report " + paths[r] +
                       " holds " + std::to_string(report.scenarios.size()) +
                       " scenarios, not one");
    }
    per_rank.push_back(std::move(report.scenarios.front()));
    if (r == 0) merged = std::move(report);
  }
  merged.scenarios = {merge_rank_results(per_rank)};
  merged.scenarios.front().world_size = static_cast<int>(paths.size());
  merged.provenance.world_size = static_cast<int>(paths.size());
  merged.provenance.ranks_per_host = static_cast<int>(paths.size());  // the launcher's local ranks
  write_report_file(out, merged);
}

// run --expect: the report's sites against an expectations file; (failed, what to print).
std::pair<bool, std::string> check_expectations_of(const std::string& report_path,
                                                   const std::string& expectations_path,
                                                   bool strict) {
  const ExpectationsFile file = parse_expectations_file(expectations_path);
  const ExpectationCheck check = check_expectations(file, read_report_file(report_path));
  return {check.failed(strict), check.text(strict)};
}

// run's inputs read before the program runs, as bench reads its own (issue 53): each gate file
// parsed and its rules' scenarios and variants checked against what the run can report
// (`scenario`: its steps and the set-up before them, on one process or on ranks), the baseline
// read as a report, the expectations file parsed. InputError names the file and the problem.
void check_run_inputs(const std::vector<std::string>& gates, const std::string& baseline,
                      const std::string& expect, const std::string& scenario) {
  constexpr int kRanksPossible = 64;  // each rank owns one of sim's devices, at most 64
  GateCatalog catalog;
  std::vector<std::string>& variants = catalog[scenario];
  for (const char* window : {"before_steps", "steps"}) {
    variants.emplace_back(window);
    for (int rank = 0; rank < kRanksPossible; ++rank) {
      variants.push_back("rank" + std::to_string(rank) + "/" + window);
    }
  }
  for (const std::string& path : gates) check_gate_names(parse_gate_file(path), catalog);
  if (!baseline.empty()) (void)read_report_file(baseline);
  if (!expect.empty()) (void)parse_expectations_file(expect);
}

// run --write-expectations: every site of the report, with its count per step.
void write_expectations_of(const std::string& report_path, const std::string& out_path,
                           const std::string& description) {
  write_file_atomically(out_path,
                        expectations_json(read_report_file(report_path), description).dump(2) +
                            "\n");
}

// DDP's reducer times a CUDA device's forward and backward with CUDA events (libtorch_cuda's
// CudaTimer, which asks the CUDA runtime): where sim serves CUDA, with host clocks, as its
// CpuTimer does (reducer.cpp).
class SimCudaTimer final : public c10d::Timer {
 public:
  explicit SimCudaTimer(c10::Device) {}
  std::optional<int64_t> measureDifference(Event start, Event end) override {
    const int64_t start_time = getTimeRef(start);
    const int64_t end_time = getTimeRef(end);
    if (start_time == c10d::kUnsetTime || end_time < start_time) return std::nullopt;
    return end_time - start_time;
  }
};

void serve_cuda() {
  sim::serve_cuda();
  static std::once_flag once;
  std::call_once(once, [] {
    // A higher priority than libtorch_cuda's registration replaces it (c10/util/Registry.h).
    c10d::TimerRegistry()->Register(
        c10::DeviceType::CUDA,
        [](c10::Device device) -> std::unique_ptr<c10d::Timer> {
          return std::make_unique<SimCudaTimer>(device);
        },
        c10::REGISTRY_PREFERRED);
  });
}

}  // namespace
}  // namespace harness::python

PYBIND11_MODULE(_C, m) {
  using namespace harness;
  using namespace harness::python;
  m.doc() = "the harness's sim backend and instrument (see harness_sim)";
  m.attr("TORCH_VERSION") = TORCH_VERSION;  // the LibTorch this module was compiled against
  m.attr("HARNESS_VERSION") = HARNESS_VERSION;
  m.attr("REPORT_SCHEMA_VERSION") = kReportSchemaVersion;

  m.def(
      "set_compute",
      [](const std::string& mode) {
        TORCH_CHECK(mode == "values" || mode == "shapes", "compute mode '", mode,
                    "': expected 'values' or 'shapes'");
        sim::set_compute(mode == "shapes" ? sim::Compute::kShapes : sim::Compute::kValues);
      },
      py::arg("mode"), "What sim's kernels compute: 'values' or 'shapes' (sim_device.h)");
  m.def("compute", [] { return std::string(sim::compute_name(sim::compute())); });
  m.def("initialize", &sim::initialize, py::arg("device_count") = sim::kDefaultDeviceCount,
        py::arg("name_backend") = true);
  // A program's other threads (a loader, a metrics worker) are not in the main thread's phase.
  set_phases_per_thread(true);
  python::install_python_sites();
  m.def("check_run_inputs", &python::check_run_inputs, py::arg("gates"), py::arg("baseline"),
        py::arg("expect"), py::arg("scenario"),
        "Reads run's gate files, baseline and expectations before the program runs");
  m.def("check_expectations", &python::check_expectations_of, py::arg("report"),
        py::arg("expectations"), py::arg("strict") = false,
        "(failed, text): the report's sites against an expectations file");
  m.def("write_expectations", &python::write_expectations_of, py::arg("report"), py::arg("out"),
        py::arg("description"), "Writes the report's sites as an expectations file");
  m.def("set_allowed_var", [](py::object var) { python::set_allowed_var(var.ptr()); },
        py::arg("var"), "The ContextVar harness_sim.allow_sync sets");
  m.def("set_site_paths", &python::set_site_paths, py::arg("root"), py::arg("package_dirs"),
        "How sites name files: relative to the program's root, else from the package on for a "
        "file under one of package_dirs");
  m.def("serve_cuda", &python::serve_cuda,
        "sim serves the CUDA device type too: CUDA tensors are sim's (run --as-cuda)");
  m.def("serves_cuda", &sim::serves_cuda);
  m.def("cuda_kernel_ops", &sim::cuda_kernel_ops, "The ops with a kernel at the CUDA key");
  m.def("take_over_cuda_kernels", &sim::take_over_cuda_kernels, py::arg("ops"),
        "The CUDA kernels of `ops` (a library's, loaded since serve_cuda()) run sim's instead");
  m.def("resize_storage", [](py::object storage, int64_t nbytes) {
    TORCH_CHECK(nbytes >= 0, "resize_: a storage's size must be >= 0, got ", nbytes);
    const c10::Storage& s = THPStorage_Unpack(storage.ptr());
    TORCH_CHECK(sim::is_sim_type(s.device().type()), "not a storage on a device sim serves: ",
                s.device().str());
    sim::resize_storage_bytes(s.unsafeGetStorageImpl(), static_cast<size_t>(nbytes));
  }, py::arg("storage"), py::arg("nbytes"),
        "Resizes a storage on sim's device in place (UntypedStorage.resize_ of a CUDA storage "
        "calls the CUDA runtime directly: StorageMethods.cpp)");
  m.def("cuda_default_generator", [](int index) {
    TORCH_CHECK(sim::serves_cuda(), "sim does not serve CUDA in this process");
    return at::detail::getCUDAHooks().getDefaultGenerator(static_cast<c10::DeviceIndex>(index));
  }, py::arg("index"), "CUDA device `index`'s default generator (Philox's seed and offset)");
  m.def("is_initialized", &sim::is_initialized);
  m.def("device_count", &sim::device_count);
  m.def("synchronize", &sim::synchronize, py::arg("index") = 0,
        py::call_guard<py::gil_scoped_release>());
  m.def("memory_stats", [](int index) {
    const memory::Stats s = sim::memory_stats(index);
    return std::make_tuple(s.allocated_bytes, s.peak_bytes, s.reserved_bytes,
                           s.reserved_peak_bytes);
  });
  m.def("reset_peak", &sim::reset_peak);
  m.def("empty_cache", &sim::empty_cache);
  m.def("set_home_device", &sim::set_home_device);
  m.def("set_sync_debug_mode", &sim::set_sync_debug_mode, py::arg("mode"));
  m.def("sync_debug_mode", &sim::sync_debug_mode);
  // The current sim device of this thread: the device guard's, which factories and
  // torch.accelerator use too.
  m.def("current_device", [] { return static_cast<int>(sim_guard().getDevice().index()); });
  m.def("set_device", [](int index) {
    sim_guard().setDevice(c10::Device(c10::DeviceType::PrivateUse1, index));
  });
  m.def("exchange_device", [](int index) {
    return static_cast<int>(
        sim_guard().exchangeDevice(c10::Device(c10::DeviceType::PrivateUse1, index)).index());
  });

  m.def("enter_phase", &enter_phase);
  m.def("exit_phase", &exit_phase);

  // Compiled code (harness_sim._device.compile): a kernel inductor generated is one launch, from
  // `begin_ns` (begin_time(): 0 when nothing counts) to now; graph breaks, recompilations and
  // capture blockers are events with the line dynamo names.
  m.def("begin_time", &events::begin_time);
  m.def(
      "record_launch",
      [](const std::string& op, int64_t begin_ns) { events::record_launch(op, begin_ns); },
      py::arg("op"), py::arg("begin_ns") = 0);
  m.def(
      "record_event",
      [](const std::string& kind, const std::string& what, const std::string& frame,
         const std::string& library) {
        if (!is_event_kind(kind)) throw py::value_error("unknown event kind '" + kind + "'");
        events::record_event(kind, what, Site{frame, library, ""});
      },
      py::arg("kind"), py::arg("what"), py::arg("frame") = "", py::arg("library") = "");
  // The (frame, library) of a stack of (file, line, function), innermost first.
  m.def(
      "site_of",
      [](const std::vector<std::tuple<std::string, int, std::string>>& stack) {
        std::vector<SourceLine> lines;
        for (const auto& [file, line, function] : stack) lines.push_back({file, line, function});
        const Site site = site_of(lines);
        return std::make_pair(site.frame, site.library);
      },
      py::arg("stack"));

  py::class_<CountSession>(m, "CountSession")
      .def(py::init<>())
      .def("start", &CountSession::start)
      .def("stop", &CountSession::stop)
      .def("begin_step", &CountSession::begin_step)
      .def("end_step", &CountSession::end_step)
      .def_property_readonly("active", &CountSession::active)
      .def("mark", &CountSession::mark)
      .def("rewind", &CountSession::rewind)
      .def_property_readonly("marked", &CountSession::marked)
      .def("counts", &counts_dict)
      .def(
          "set_trace",
          [](CountSession& s, const TraceSession* trace) {
            s.set_trace(trace ? trace->recorder() : nullptr);
          },
          py::arg("trace").none(true));

  // `python -m harness_sim run --trace`: the timeline of the sessions attached to it, with steps
  // and sections that run's step windows mark, written as bench's --trace.
  py::class_<TraceSession>(m, "TraceSession")
      .def(py::init<const std::string&>(), py::arg("process"))
      .def_static("now", &trace_clock_ns)  // the trace's clock (ns), for section times
      .def("step_begin", [](TraceSession& t, int64_t step) { t.recorder()->step_begin(step); })
      .def("step_end", [](TraceSession& t) { t.recorder()->step_end(); })
      .def(
          "section_begin",
          [](TraceSession& t, const std::string& name, int64_t at_ns) {
            t.recorder()->section_begin(name, at_ns);
          },
          py::arg("name"), py::arg("at_ns") = 0)
      .def(
          "section_end",
          [](TraceSession& t, const std::string& name, int64_t at_ns) {
            t.recorder()->section_end(name, at_ns);
          },
          py::arg("name"), py::arg("at_ns") = 0)
      .def("stop", &TraceSession::stop)
      .def("set_rank", &TraceSession::set_rank, py::arg("rank"), py::arg("world_size"))
      .def("origin", &TraceSession::origin)
      .def("set_origin", &TraceSession::set_origin, py::arg("origin_ns"), py::arg("unix_ns"))
      .def("write", &TraceSession::write, py::arg("path"), py::arg("format"),
           py::arg("metadata"));
  m.def("merge_trace_files", &merge_trace_files, py::arg("paths"), py::arg("out"));
  // bench's check of an output path before a run (InputError naming `flag`), and where a
  // --trace-format kineto directory puts rank `rank`'s file.
  m.def("check_writable", &check_writable_destination, py::arg("path"), py::arg("flag"));
  m.def("kineto_trace_file", &kineto_trace_file, py::arg("dir"), py::arg("rank"));

  m.def("write_report", &write_report, py::arg("path"), py::arg("provenance"),
        py::arg("warnings"), py::arg("scenario"), py::arg("description"),
        py::arg("measured_window"), py::arg("config"), py::arg("variants"));
  m.def("merge_rank_reports", &merge_rank_reports, py::arg("paths"), py::arg("out"));

  // torch.distributed's backend for sim tensors: Gloo on zero-copy host aliases, every
  // collective counted (harness/runtime/dist/counting_backend.h).
  m.def(
      "create_backend",
      [](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
         std::chrono::milliseconds timeout) -> c10::intrusive_ptr<c10d::Backend> {
        return c10::make_intrusive<runtime::CountingBackend>(
            runtime::make_gloo_backend(store, rank, size, timeout));
      },
      py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
      py::call_guard<py::gil_scoped_release>());

  py::register_exception<InputError>(m, "InputError", PyExc_ValueError);
}

// TraceRecorder and the Chrome writer (the Kineto writer is trace_kineto.cpp).
#include "harness/instrument/trace.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <set>
#include <stdexcept>

namespace harness {

int64_t trace_clock_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

uint64_t trace_thread_id() noexcept {
  thread_local const uint64_t id = static_cast<uint64_t>(::syscall(SYS_gettid));
  return id;
}

namespace {

int64_t unix_ns_at(int64_t steady_ns) {
  const int64_t now_steady = trace_clock_ns();
  const int64_t now_unix = std::chrono::duration_cast<std::chrono::nanoseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
  return now_unix - (now_steady - steady_ns);
}

std::atomic<TraceRecorder*> g_step_trace{nullptr};

// Flow ids of launches, apart from add_flow's (below 2^39; merge_traces adds rank << 40).
constexpr uint64_t kCorrelationFlowBase = uint64_t{1} << 39;

}  // namespace

TraceRecorder::TraceRecorder()
    : origin_ns_(trace_clock_ns()),
      origin_unix_ns_(unix_ns_at(origin_ns_)),
      main_thread_(trace_thread_id()) {}

void TraceRecorder::add(Event event) noexcept {
  try {
    if (event.thread == 0) event.thread = trace_thread_id();
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(std::move(event));
  } catch (...) {
    // Out of memory while tracing: the trace loses an event, the run goes on.
  }
}

void TraceRecorder::on_phase_begin(const char* name) noexcept {
  try {
    add({Kind::Begin, "phases", name, "phase", trace_clock_ns()});
  } catch (...) {
  }
}

void TraceRecorder::on_phase_end(const char* name) noexcept {
  try {
    add({Kind::End, "phases", name, "phase", trace_clock_ns()});
  } catch (...) {
  }
}

void TraceRecorder::section_begin(const std::string& name, int64_t at_ns) noexcept {
  try {
    add({Kind::Begin, "variants", name, "variant", at_ns != 0 ? at_ns : trace_clock_ns()});
  } catch (...) {
  }
}

void TraceRecorder::section_end(const std::string& name, int64_t at_ns) noexcept {
  try {
    add({Kind::End, "variants", name, "variant", at_ns != 0 ? at_ns : trace_clock_ns()});
  } catch (...) {
  }
}

void TraceRecorder::step_begin(int64_t step) noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  open_step_ = std::make_pair(step, trace_clock_ns());
}

void TraceRecorder::step_end() noexcept {
  const int64_t now = trace_clock_ns();
  std::optional<std::pair<int64_t, int64_t>> step;
  uint64_t k = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    step.swap(open_step_);
    if (!step) return;
    k = steps_++;
  }
  try {
    Event e{Kind::Step, "steps", "step " + std::to_string(step->first), "step", step->second,
            now - step->second};
    e.id = k;
    e.step = step->first;
    add(std::move(e));
  } catch (...) {
  }
}

void TraceRecorder::add_span(std::string_view track, std::string_view name,
                             std::string_view category, int64_t begin_ns, int64_t end_ns,
                             TraceArgs args) noexcept {
  try {
    add({Kind::Span, std::string(track), std::string(name), std::string(category), begin_ns,
         std::max<int64_t>(0, end_ns - begin_ns), std::move(args)});
  } catch (...) {
  }
}

void TraceRecorder::add_instant(std::string_view track, std::string_view name,
                                std::string_view category, int64_t at_ns,
                                TraceArgs args) noexcept {
  try {
    add({Kind::Instant, std::string(track), std::string(name), std::string(category), at_ns, 0,
         std::move(args)});
  } catch (...) {
  }
}

void TraceRecorder::add_flow(std::string_view name, uint64_t id, std::string_view from_track,
                             int64_t from_ns, std::string_view to_track, int64_t to_ns) noexcept {
  try {
    Event s{Kind::FlowStart, std::string(from_track), std::string(name), "flow", from_ns};
    s.id = id;
    Event f{Kind::FlowEnd, std::string(to_track), std::string(name), "flow", to_ns};
    f.id = id;
    add(std::move(s));
    add(std::move(f));
  } catch (...) {
  }
}

void TraceRecorder::add_memory(bool on_device, int64_t at_ns, int64_t allocated, int64_t peak,
                               std::optional<int64_t> reserved) noexcept {
  try {
    Event e{Kind::Memory, "phases", on_device ? "device memory" : "host memory", "memory", at_ns};
    e.args = {{"allocated", allocated}, {"peak", peak}};
    if (reserved) e.args["reserved"] = *reserved;
    e.device = on_device ? 0 : -1;  // the process's device: set_device's index, when written
    add(std::move(e));
  } catch (...) {
  }
}

uint64_t TraceRecorder::next_correlation() noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  return ++correlations_;
}

void TraceRecorder::add_host_call(std::string_view op, std::string_view api, uint64_t correlation,
                                  int64_t begin_ns, int64_t end_ns, TraceArgs args,
                                  uint64_t thread) noexcept {
  try {
    Event e{Kind::HostCall, "", std::string(op), std::string(api), begin_ns,
            std::max<int64_t>(0, end_ns - begin_ns), std::move(args)};
    e.id = correlation;
    e.thread = thread;
    add(std::move(e));
  } catch (...) {
  }
}

void TraceRecorder::add_device_work(DeviceWork kind, std::string_view name, int device,
                                    int64_t stream, uint64_t correlation, int64_t begin_ns,
                                    int64_t end_ns, TraceArgs args) noexcept {
  try {
    Event e{Kind::Device, "", std::string(name), "", begin_ns,
            std::max<int64_t>(0, end_ns - begin_ns), std::move(args)};
    e.id = correlation;
    e.work = kind;
    {
      std::lock_guard<std::mutex> lock(mu_);
      e.device = device >= 0 ? device : device_;
    }
    e.stream = stream;
    add(std::move(e));
  } catch (...) {
  }
}

void TraceRecorder::set_process(int pid, std::string name, int rank, int world_size,
                                std::string backend) {
  std::lock_guard<std::mutex> lock(mu_);
  pid_ = pid;
  rank_ = rank;
  process_name_ = std::move(name);
  world_size_ = world_size;
  backend_ = std::move(backend);
}

void TraceRecorder::set_device(int index, std::string track_prefix, std::string name) {
  std::lock_guard<std::mutex> lock(mu_);
  device_ = index;
  device_prefix_ = std::move(track_prefix);
  device_name_ = std::move(name);
}

void TraceRecorder::set_origin(int64_t origin_ns, int64_t unix_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  origin_ns_ = origin_ns;
  origin_unix_ns_ = unix_ns != 0 ? unix_ns : unix_ns_at(origin_ns);
}

int64_t TraceRecorder::origin_ns() const {
  std::lock_guard<std::mutex> lock(mu_);
  return origin_ns_;
}

int64_t TraceRecorder::origin_unix_ns() const {
  std::lock_guard<std::mutex> lock(mu_);
  return origin_unix_ns_;
}

size_t TraceRecorder::event_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return events_.size();
}

TraceRecorder::Snapshot TraceRecorder::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  Snapshot s{events_,     pid_,  rank_,  process_name_,  world_size_,     backend_,
             device_,     device_prefix_, device_name_, origin_ns_, origin_unix_ns_,
             main_thread_};
  // Collectives on one stream run one after another, as NCCL's do: a slice starts no earlier
  // than the previous one ended (each is recorded from issue to completion).
  std::map<std::pair<int, int64_t>, std::vector<Event*>> serial;
  for (Event& e : s.events) {
    if (e.kind == Kind::Device &&
        (e.work == DeviceWork::Collective || e.work == DeviceWork::HostCollective)) {
      serial[{e.work == DeviceWork::HostCollective ? -1 : e.device, e.stream}].push_back(&e);
    }
  }
  for (auto& [key, slices] : serial) {
    std::stable_sort(slices.begin(), slices.end(),
                     [](const Event* a, const Event* b) { return a->ts_ns < b->ts_ns; });
    int64_t free_at = INT64_MIN;
    for (Event* e : slices) {
      const int64_t end = e->ts_ns + e->dur_ns;
      e->ts_ns = std::max(e->ts_ns, free_at);
      e->dur_ns = std::max<int64_t>(0, end - e->ts_ns);
      free_at = e->ts_ns + e->dur_ns;
    }
  }
  std::stable_sort(s.events.begin(), s.events.end(),
                   [](const Event& a, const Event& b) { return a.ts_ns < b.ts_ns; });
  return s;
}

namespace {

// Chrome tracks: a name and a fixed id (its sort index), the same in every rank's process.
class ChromeTracks {
 public:
  explicit ChromeTracks(const TraceRecorder::Snapshot& s) : s_(s) {}

  std::string host(uint64_t thread) {
    if (thread == s_.main_thread) return "host";
    auto [it, added] = other_threads_.emplace(thread, other_threads_.size() + 2);
    return "host thread " + std::to_string(it->second);
  }
  std::string device(const TraceRecorder::Event& e) {
    if (e.work == DeviceWork::HostCollective) return "collectives";
    std::string name = s_.device_prefix + " " + std::to_string(e.device) + " stream " +
                       std::to_string(e.stream);
    // A stream's id follows from its number: the same whichever streams a rank used, the
    // process's own device (each rank's) first.
    if (e.device >= 0 && e.device < 1000 && e.stream >= 0 && e.stream < 1000000) {
      const int other = e.device == s_.device ? 0 : e.device + 1;
      device_ids_[name] = 1000 + other * 1000000 + static_cast<int>(e.stream);
    }
    return name;
  }
  int tid(const std::string& track) {
    if (auto it = device_ids_.find(track); it != device_ids_.end()) return it->second;
    static const std::map<std::string, int> fixed = {
        {"variants", 1}, {"steps", 2},        {"phases", 3},
        {"host", 10},    {"syncs", 50},       {"collectives", 51},
        {"collective waits", 52}};
    if (auto it = fixed.find(track); it != fixed.end()) return it->second;
    used_.insert(track);
    return 0;  // assigned in assign()
  }
  // Ids of the other tracks: host threads after "host", then other named tracks, then device
  // streams numbered past what device() gives, each group in the order of its names.
  std::map<std::string, int> assign() const {
    std::map<std::string, int> ids;
    int host = 11, other = 60, device = 1000 + 1001 * 1000000;
    const std::string device_prefix = s_.device_prefix + " ";
    for (const std::string& track : used_) {
      if (track.rfind("host thread ", 0) == 0) {
        ids[track] = host++;
      } else if (track.rfind(device_prefix, 0) == 0) {
        ids[track] = device++;
      } else {
        ids[track] = other++;
      }
    }
    return ids;
  }

 private:
  const TraceRecorder::Snapshot& s_;
  std::map<uint64_t, size_t> other_threads_;
  std::map<std::string, int> device_ids_;
  std::set<std::string> used_;
};

}  // namespace

std::string TraceRecorder::to_json(
    const std::vector<std::pair<std::string, std::string>>& metadata) const {
  using Kind = TraceRecorder::Kind;
  const Snapshot s = snapshot();
  ChromeTracks tracks(s);
  // Correlation -> the host call's track and time, for the flows.
  std::map<uint64_t, std::pair<std::string, int64_t>> calls;
  for (const Event& e : s.events) {
    if (e.kind == Kind::HostCall) calls.emplace(e.id, std::make_pair(tracks.host(e.thread), e.ts_ns));
  }
  struct Pending {
    nlohmann::json event;
    std::string track;
  };
  std::vector<Pending> out;
  uint64_t flows = 0;
  auto emit = [&](nlohmann::json j, const std::string& track) {
    tracks.tid(track);
    out.push_back({std::move(j), track});
  };
  auto base = [&](const std::string& name, const std::string& cat, const char* ph, int64_t ts) {
    return nlohmann::json{{"name", name},
                          {"cat", cat},
                          {"ph", ph},
                          {"ts", ns_to_us(ts - s.origin_ns)},
                          {"pid", s.pid}};
  };
  auto with_args = [](nlohmann::json j, const TraceArgs& args) {
    if (args.is_object() && !args.empty()) j["args"] = args;
    return j;
  };
  for (const Event& e : s.events) {
    switch (e.kind) {
      case Kind::Begin:
      case Kind::End:
        emit(with_args(base(e.name, e.category, e.kind == Kind::Begin ? "B" : "E", e.ts_ns),
                       e.args),
             e.track);
        break;
      case Kind::Span:
      case Kind::Step: {
        nlohmann::json j = base(e.name, e.category, "X", e.ts_ns);
        j["dur"] = ns_to_us(e.dur_ns);
        TraceArgs args = e.args.is_object() ? e.args : TraceArgs::object();
        if (e.kind == Kind::Step) args["measured step"] = e.id;
        emit(with_args(std::move(j), args), e.track);
        break;
      }
      case Kind::Instant: {
        nlohmann::json j = base(e.name, e.category, "i", e.ts_ns);
        j["s"] = "t";
        emit(with_args(std::move(j), e.args), e.track);
        break;
      }
      case Kind::Memory: {
        // A counter: Perfetto and chrome://tracing draw one graph per name and argument.
        nlohmann::json j = base(e.name, e.category, "C", e.ts_ns);
        j["args"] = e.args;
        emit(std::move(j), e.track);
        break;
      }
      case Kind::FlowStart:
      case Kind::FlowEnd: {
        nlohmann::json j = base(e.name, e.category, e.kind == Kind::FlowStart ? "s" : "f", e.ts_ns);
        j["id"] = e.id;
        if (e.kind == Kind::FlowEnd) j["bp"] = "e";  // binds to the slice that encloses it
        emit(std::move(j), e.track);
        break;
      }
      case Kind::HostCall: {
        const std::string track = tracks.host(e.thread);
        const bool has_op = !e.name.empty();
        nlohmann::json j = base(has_op ? e.name : e.category, has_op ? "launch" : "cuda api", "X",
                                e.ts_ns);
        j["dur"] = ns_to_us(e.dur_ns);
        TraceArgs args = e.args.is_object() ? e.args : TraceArgs::object();
        if (has_op && !e.category.empty()) args["api"] = e.category;
        args["correlation"] = e.id;
        emit(with_args(std::move(j), args), track);
        break;
      }
      case Kind::Device: {
        static const char* const kCategory[] = {"kernel", "memcpy", "memset", "collective",
                                                "collective"};
        const std::string track = tracks.device(e);
        nlohmann::json j = base(e.name, kCategory[static_cast<int>(e.work)], "X", e.ts_ns);
        j["dur"] = ns_to_us(e.dur_ns);
        TraceArgs args = e.args.is_object() ? e.args : TraceArgs::object();
        if (e.id != 0) args["correlation"] = e.id;
        if (e.work != DeviceWork::HostCollective) args["stream"] = e.stream;
        emit(with_args(std::move(j), args), track);
        auto call = calls.find(e.id);
        if (e.id == 0 || call == calls.end()) break;
        // The arrow from the call to the work: one per slice (a call may issue several), ids
        // apart from add_flow's.
        const uint64_t id = kCorrelationFlowBase + ++flows;
        nlohmann::json s_ev = base("launch", "launch", "s", call->second.second);
        s_ev["id"] = id;
        nlohmann::json f_ev = base("launch", "launch", "f", e.ts_ns);
        f_ev["id"] = id;
        f_ev["bp"] = "e";
        emit(std::move(s_ev), call->second.first);
        emit(std::move(f_ev), track);
        break;
      }
    }
  }
  const std::map<std::string, int> assigned = tracks.assign();
  auto tid_of = [&](const std::string& track) {
    const int fixed = tracks.tid(track);
    return fixed != 0 ? fixed : assigned.at(track);
  };
  nlohmann::json events = nlohmann::json::array();
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", s.pid}, {"tid", 0},
                    {"args", {{"name", s.process_name}}}});
  events.push_back({{"name", "process_sort_index"}, {"ph", "M"}, {"pid", s.pid}, {"tid", 0},
                    {"args", {{"sort_index", s.pid}}}});
  std::map<int, std::string> named;
  for (const Pending& p : out) named.emplace(tid_of(p.track), p.track);
  for (const auto& [tid, track] : named) {
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", s.pid}, {"tid", tid},
                      {"args", {{"name", track}}}});
    events.push_back({{"name", "thread_sort_index"}, {"ph", "M"}, {"pid", s.pid}, {"tid", tid},
                      {"args", {{"sort_index", tid}}}});
  }
  // Events are in time order already; flow starts were emitted with their work, so keep each
  // track in time order (stable: B/E at one instant stay in the order they happened).
  std::vector<size_t> order(out.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return out[a].event["ts"].get<double>() < out[b].event["ts"].get<double>();
  });
  for (size_t i : order) {
    nlohmann::json j = std::move(out[i].event);
    j["tid"] = tid_of(out[i].track);
    events.push_back(std::move(j));
  }
  nlohmann::json other = nlohmann::json::object();
  for (const auto& [k, v] : metadata) other[k] = v;
  other["origin_ns"] = s.origin_ns;
  nlohmann::json doc = {{"traceEvents", std::move(events)},
                        {"displayTimeUnit", "ms"},
                        {"otherData", std::move(other)}};
  return doc.dump(1);
}

void set_step_trace(TraceRecorder* trace) noexcept { g_step_trace.store(trace); }

void trace_step_begin(int64_t step) noexcept {
  if (TraceRecorder* t = g_step_trace.load(std::memory_order_acquire)) t->step_begin(step);
}

void trace_step_end() noexcept {
  if (TraceRecorder* t = g_step_trace.load(std::memory_order_acquire)) t->step_end();
}

std::string merge_traces(const std::vector<std::string>& documents) {
  nlohmann::json merged;
  int64_t origin = 0;
  for (size_t i = 0; i < documents.size(); ++i) {
    nlohmann::json doc = nlohmann::json::parse(documents[i], nullptr, /*allow_exceptions=*/false);
    if (!doc.is_object() || !doc.contains("traceEvents") || !doc["traceEvents"].is_array() ||
        !doc.contains("otherData") || !doc["otherData"].contains("origin_ns") ||
        !doc["otherData"]["origin_ns"].is_number_integer()) {
      throw std::invalid_argument("trace " + std::to_string(i) + " is not a harness trace");
    }
    const int64_t its_origin = doc["otherData"]["origin_ns"].get<int64_t>();
    if (i == 0) {
      merged = std::move(doc);
      origin = its_origin;
      continue;
    }
    const double shift_us = static_cast<double>(its_origin - origin) / 1000.0;
    for (nlohmann::json& e : doc["traceEvents"]) {
      if (e.contains("ts") && e["ts"].is_number()) e["ts"] = e["ts"].get<double>() + shift_us;
      // Flow ids are unique within a process: keep them apart across documents.
      if (e.contains("id") && e["id"].is_number_unsigned()) {
        e["id"] = e["id"].get<uint64_t>() + (static_cast<uint64_t>(i) << 40);
      }
      merged["traceEvents"].push_back(std::move(e));
    }
  }
  return merged.dump(1);
}

std::string kineto_trace_file(const std::string& dir, int rank) {
  return dir + "/rank" + std::to_string(rank) + ".pt.trace.json";
}

}  // namespace harness

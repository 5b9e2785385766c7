#include "harness/instrument/trace.h"

#include <chrono>
#include <map>
#include <stdexcept>
#include <nlohmann/json.hpp>

namespace harness {

int64_t trace_clock_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

TraceRecorder::TraceRecorder() : origin_ns_(trace_clock_ns()) {}

void TraceRecorder::add(Event event) noexcept {
  try {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(std::move(event));
  } catch (...) {
    // Out of memory while tracing: the trace loses an event, the run goes on.
  }
}

void TraceRecorder::on_phase_begin(const char* name) noexcept {
  add({'B', "phases", name, "phase", trace_clock_ns(), 0, {}});
}

void TraceRecorder::on_phase_end(const char* name) noexcept {
  add({'E', "phases", name, "phase", trace_clock_ns(), 0, {}});
}

void TraceRecorder::add_span(std::string_view track, std::string_view name,
                             std::string_view category, int64_t begin_ns, int64_t end_ns,
                             std::vector<std::pair<std::string, std::string>> args) noexcept {
  add({'X', std::string(track), std::string(name), std::string(category), begin_ns,
       end_ns - begin_ns, std::move(args)});
}

void TraceRecorder::add_instant(std::string_view track, std::string_view name,
                                std::string_view category, int64_t at_ns,
                                std::vector<std::pair<std::string, std::string>> args) noexcept {
  add({'i', std::string(track), std::string(name), std::string(category), at_ns, 0,
       std::move(args)});
}

void TraceRecorder::add_flow(std::string_view name, uint64_t id, std::string_view from_track,
                             int64_t from_ns, std::string_view to_track, int64_t to_ns) noexcept {
  add({'s', std::string(from_track), std::string(name), "flow", from_ns, 0, {}, id});
  add({'f', std::string(to_track), std::string(name), "flow", to_ns, 0, {}, id});
}

void TraceRecorder::section_begin(const std::string& name) noexcept {
  add({'B', "variants", name, "variant", trace_clock_ns(), 0, {}});
}

void TraceRecorder::section_end(const std::string& name) noexcept {
  add({'E', "variants", name, "variant", trace_clock_ns(), 0, {}});
}

void TraceRecorder::set_process(int pid, std::string name) {
  std::lock_guard<std::mutex> lock(mu_);
  pid_ = pid;
  process_name_ = std::move(name);
}

size_t TraceRecorder::event_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return events_.size();
}

std::string TraceRecorder::to_json(
    const std::vector<std::pair<std::string, std::string>>& metadata) const {
  std::lock_guard<std::mutex> lock(mu_);
  // Tracks in order of first use become threads of one process.
  std::map<std::string, int> tids;
  nlohmann::json events = nlohmann::json::array();
  if (!process_name_.empty()) {
    events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", pid_}, {"tid", 0},
                      {"args", {{"name", process_name_}}}});
    events.push_back({{"name", "process_sort_index"}, {"ph", "M"}, {"pid", pid_}, {"tid", 0},
                      {"args", {{"sort_index", pid_}}}});
  }
  auto tid_of = [&](const std::string& track) {
    auto [it, added] = tids.emplace(track, static_cast<int>(tids.size()) + 1);
    if (added) {
      events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", pid_}, {"tid", it->second},
                        {"args", {{"name", track}}}});
      events.push_back({{"name", "thread_sort_index"}, {"ph", "M"}, {"pid", pid_},
                        {"tid", it->second}, {"args", {{"sort_index", it->second}}}});
    }
    return it->second;
  };
  for (const Event& e : events_) {
    // Integer nanoseconds inside, microseconds only here, at output.
    nlohmann::json j = {{"name", e.name},
                        {"cat", e.category},
                        {"ph", std::string(1, e.phase)},
                        {"ts", static_cast<double>(e.ts_ns - origin_ns_) / 1000.0},
                        {"pid", pid_},
                        {"tid", tid_of(e.track)}};
    if (e.phase == 'X') j["dur"] = static_cast<double>(e.dur_ns) / 1000.0;
    if (e.phase == 'i') j["s"] = "t";
    if (e.phase == 's' || e.phase == 'f') j["id"] = e.flow_id;
    if (e.phase == 'f') j["bp"] = "e";  // binds to the slice that encloses it
    if (!e.args.empty()) {
      nlohmann::json args = nlohmann::json::object();
      for (const auto& [k, v] : e.args) args[k] = v;
      j["args"] = std::move(args);
    }
    events.push_back(std::move(j));
  }
  nlohmann::json other = nlohmann::json::object();
  for (const auto& [k, v] : metadata) other[k] = v;
  other["origin_ns"] = origin_ns_;
  nlohmann::json doc = {{"traceEvents", std::move(events)},
                        {"displayTimeUnit", "ms"},
                        {"otherData", std::move(other)}};
  return doc.dump(1);
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

}  // namespace harness

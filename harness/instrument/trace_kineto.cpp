// The Kineto-shaped writer of TraceRecorder: what PyTorch's profiler (libkineto's
// ChromeTraceLogger) writes for one rank, so that HolisticTraceAnalysis reads it.
//
// What HTA reads of it: distributedInfo.rank (which rank the file is), events with "dur" (events
// without one are dropped), "stream" >= 0 together with "correlation" >= 0 marking GPU work
// (everything else is host side), cuda_runtime calls named cudaLaunchKernel / cudaMemcpyAsync /
// cudaMemsetAsync joined to their GPU work by "correlation" (launch statistics), kernel names
// starting "nccl" and containing "Kernel" as communication and "Memcpy" / "Memset" as memory
// kernels (temporal breakdown, overlap), and ProfilerStep#N spans (iterations; GPU work counts in
// the iteration of the call that issued it).
//
// Layout, as Kineto's: host events in the OS process (pid) on their OS thread (tid); device
// events in a process per device (pid = device index) on a thread per stream (tid = stream).
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <vector>

#include "harness/instrument/trace.h"

namespace harness {
namespace {

using Event = TraceRecorder::Event;
using Kind = TraceRecorder::Kind;

// The duration, in µs, a slice of device work starting at `begin_us` is written with: its own,
// or longer so that it reaches the next whole microsecond. HTA reads nanosecond traces by rounding
// each slice's start up and its end down to whole microseconds (round_down_time_stamps), so a
// slice that does not cross one -- the sim's sub-microsecond copies and kernels -- would get a
// duration of -1 µs, and its temporal breakdown asserts on the negative time that adds up
// (non_compute_time >= 0). Written this way, each slice keeps its start and is 0 µs or more to HTA.
double device_dur_us(double begin_us, double dur_us) {
  const double first_whole = std::ceil(begin_us);
  if (std::floor(begin_us + dur_us) >= first_whole) return dur_us;
  double dur = first_whole - begin_us;
  while (std::floor(begin_us + dur) < first_whole) dur = std::nextafter(dur, HUGE_VAL);
  return dur;
}

// Host collectives (CPU tensors) run on Gloo's worker thread: a thread of their own here, so
// that their spans (issue to completion) do not cross the calling thread's ops.
constexpr uint64_t kCollectiveThread = uint64_t{1} << 30;

// The CUDA runtime call a sync of the sim stands for, by the reason it was counted.
std::string sync_api(const Event& e) {
  const std::string reason = e.args.is_object() ? e.args.value("reason", "") : "";
  if (reason.find("device synchronize") != std::string::npos) return "cudaDeviceSynchronize";
  if (reason.find("event synchronize") != std::string::npos) return "cudaEventSynchronize";
  return "cudaStreamSynchronize";
}

}  // namespace

std::string TraceRecorder::to_kineto_json(
    const std::vector<std::pair<std::string, std::string>>& metadata) const {
  const Snapshot s = snapshot();
  const int64_t os_pid = ::getpid();
  nlohmann::json events = nlohmann::json::array();
  auto ts = [&](int64_t ns) { return ns_to_us(ns - s.origin_ns); };
  auto complete = [&](const std::string& cat, const std::string& name, int64_t pid, uint64_t tid,
                      int64_t begin, int64_t dur, nlohmann::json args, bool device = false) {
    const double dur_us = device ? device_dur_us(ts(begin), ns_to_us(dur)) : ns_to_us(dur);
    nlohmann::json j = {{"ph", "X"}, {"cat", cat},       {"name", name},  {"pid", pid},
                        {"tid", tid}, {"ts", ts(begin)}, {"dur", dur_us}};
    if (args.is_object() && !args.empty()) j["args"] = std::move(args);
    events.push_back(std::move(j));
  };
  auto object = [](const TraceArgs& a) { return a.is_object() ? a : TraceArgs::object(); };
  std::set<uint64_t> threads = {s.main_thread};
  std::set<std::pair<int, int64_t>> streams;
  // Correlation -> the runtime call (its thread and start), for the flows.
  std::map<uint64_t, std::pair<uint64_t, int64_t>> calls;
  for (const Event& e : s.events) {
    if (e.kind == Kind::HostCall && !e.category.empty()) {
      calls.emplace(e.id, std::make_pair(e.thread, e.ts_ns));
    }
  }
  std::set<uint64_t> flowed;
  // Phases and variants are spans (B/E pairs) on the thread that drives the run.
  std::map<std::string, std::vector<const Event*>> open;
  int64_t last_device_allocated = 0, last_host_allocated = 0;  // for "[memory]"'s Bytes
  for (const Event& e : s.events) {
    switch (e.kind) {
      case Kind::Begin: open[e.track].push_back(&e); break;
      case Kind::End: {
        std::vector<const Event*>& stack = open[e.track];
        if (stack.empty()) break;
        const Event* b = stack.back();
        stack.pop_back();
        nlohmann::json args = object(b->args);
        args[e.track == "variants" ? "variant" : "phase"] = b->name;
        complete("user_annotation", b->name, os_pid, s.main_thread, b->ts_ns, e.ts_ns - b->ts_ns,
                 std::move(args));
        break;
      }
      case Kind::Step:
        complete("user_annotation", "ProfilerStep#" + std::to_string(e.id), os_pid, s.main_thread,
                 e.ts_ns, e.dur_ns, {{"step", e.step}});
        break;
      case Kind::Span:
      case Kind::Instant: {
        std::string cat = "cpu_op", name = e.name;
        nlohmann::json args = object(e.args);
        if (e.category == "sync") {
          cat = "cuda_runtime";
          name = sync_api(e);
          args["op"] = e.name;
        } else if (e.category == "collective wait" || e.category == "stream wait") {
          cat = "cuda_runtime";
          name = "cudaStreamWaitEvent";
          args["op"] = e.name;
        }
        threads.insert(e.thread);
        if (e.kind == Kind::Span) {
          complete(cat, name, os_pid, e.thread, e.ts_ns, e.dur_ns, std::move(args));
        } else {
          nlohmann::json j = {{"ph", "i"},      {"s", "t"},     {"cat", cat},
                              {"name", name},   {"pid", os_pid}, {"tid", e.thread},
                              {"ts", ts(e.ts_ns)}};
          if (!args.empty()) j["args"] = std::move(args);
          events.push_back(std::move(j));
        }
        break;
      }
      case Kind::FlowStart:
      case Kind::FlowEnd: break;  // Chrome only: Kineto's arrows are its correlations
      case Kind::Memory: {
        // As PyTorch's profiler records memory (profile_memory=True): "[memory]" instants with
        // the device (type 1: the GPU, 0: the CPU) and its total allocated; "Bytes" is the
        // change since the previous record of that device.
        const bool device = e.device >= 0;
        const int64_t allocated = e.args.value("allocated", int64_t{0});
        int64_t& last = device ? last_device_allocated : last_host_allocated;
        events.push_back({{"ph", "i"},
                          {"s", "t"},
                          {"cat", "cpu_instant_event"},
                          {"name", "[memory]"},
                          {"pid", os_pid},
                          {"tid", s.main_thread},
                          {"ts", ts(e.ts_ns)},
                          {"args",
                           {{"Device Type", device ? 1 : 0},
                            {"Device Id", device ? s.device : -1},
                            {"Bytes", allocated - last},
                            {"Total Allocated", allocated},
                            {"Total Reserved", e.args.value("reserved", allocated)},
                            {"Peak Allocated", e.args.value("peak", int64_t{0})}}}});
        last = allocated;
        break;
      }
      case Kind::HostCall: {
        threads.insert(e.thread);
        const nlohmann::json args = object(e.args);
        if (!e.name.empty()) {
          nlohmann::json op = args;
          op["External id"] = e.id;
          complete("cpu_op", e.name, os_pid, e.thread, e.ts_ns, e.dur_ns, std::move(op));
        }
        if (!e.category.empty()) {
          nlohmann::json call = args;
          call["correlation"] = e.id;
          call["External id"] = e.id;
          complete("cuda_runtime", e.category, os_pid, e.thread, e.ts_ns, e.dur_ns,
                   std::move(call));
        }
        break;
      }
      case Kind::Device: {
        nlohmann::json args = object(e.args);
        if (e.work == DeviceWork::HostCollective) {
          threads.insert(kCollectiveThread);
          complete("cpu_op", e.name, os_pid, kCollectiveThread, e.ts_ns, e.dur_ns,
                   std::move(args));
          break;
        }
        args["device"] = e.device;
        args["stream"] = e.stream;
        args["correlation"] = e.id;
        args["External id"] = e.id;
        const char* cat = e.work == DeviceWork::Memcpy   ? "gpu_memcpy"
                          : e.work == DeviceWork::Memset ? "gpu_memset"
                                                         : "kernel";
        streams.emplace(e.device, e.stream);
        complete(cat, e.name, e.device, static_cast<uint64_t>(e.stream), e.ts_ns, e.dur_ns,
                 std::move(args), /*device=*/true);
        auto call = calls.find(e.id);
        // One arrow per call (its id is the correlation), to the first work it issued.
        if (e.id == 0 || call == calls.end() || !flowed.insert(e.id).second) break;
        events.push_back({{"ph", "s"}, {"id", e.id}, {"pid", os_pid}, {"tid", call->second.first},
                          {"ts", ts(call->second.second)}, {"cat", "ac2g"}, {"name", "ac2g"}});
        events.push_back({{"ph", "f"}, {"id", e.id}, {"pid", e.device}, {"tid", e.stream},
                          {"ts", ts(e.ts_ns)}, {"cat", "ac2g"}, {"name", "ac2g"}, {"bp", "e"}});
        break;
      }
    }
  }
  // Names of the processes and threads, host first; the same order on every rank.
  nlohmann::json meta = nlohmann::json::array();
  auto metadata_event = [&](const char* name, int64_t pid, uint64_t tid, const char* key,
                            nlohmann::json value) {
    meta.push_back({{"ph", "M"}, {"name", name}, {"pid", pid}, {"tid", tid}, {"ts", 0},
                    {"args", {{key, std::move(value)}}}});
  };
  metadata_event("process_name", os_pid, 0, "name", s.process_name);
  metadata_event("process_sort_index", os_pid, 0, "sort_index", 0);
  int index = 0;
  for (uint64_t thread : threads) {
    const std::string name = thread == s.main_thread        ? "main thread"
                             : thread == kCollectiveThread ? "collectives (gloo)"
                                                           : "thread " + std::to_string(thread);
    metadata_event("thread_name", os_pid, thread, "name", name);
    // The driving thread first, collectives last, the others by id between.
    const int sort = thread == s.main_thread ? 0 : thread == kCollectiveThread ? 1000 : ++index;
    metadata_event("thread_sort_index", os_pid, thread, "sort_index", sort);
  }
  std::set<int> devices;
  for (const auto& [device, stream] : streams) devices.insert(device);
  for (int device : devices) {
    metadata_event("process_name", device, 0, "name",
                   s.device_prefix + " " + std::to_string(device));
    metadata_event("process_sort_index", device, 0, "sort_index", 1 + device);
  }
  for (const auto& [device, stream] : streams) {
    metadata_event("thread_name", device, static_cast<uint64_t>(stream), "name",
                   "stream " + std::to_string(stream));
    metadata_event("thread_sort_index", device, static_cast<uint64_t>(stream), "sort_index",
                   stream);
  }
  // Each thread's events in time order (stable: a span and what it encloses keep their order).
  std::stable_sort(events.begin(), events.end(), [](const nlohmann::json& a, const nlohmann::json& b) {
    return a["ts"].get<double>() < b["ts"].get<double>();
  });
  for (nlohmann::json& e : events) meta.push_back(std::move(e));

  nlohmann::json other = nlohmann::json::object();
  for (const auto& [k, v] : metadata) other[k] = v;
  other["origin_ns"] = s.origin_ns;
  nlohmann::json device_properties = nlohmann::json::array();
  device_properties.push_back(
      {{"id", s.device}, {"name", s.device_name.empty() ? s.device_prefix : s.device_name}});
  const nlohmann::json doc = {
      {"schemaVersion", 1},
      {"deviceProperties", std::move(device_properties)},
      {"distributedInfo",
       {{"backend", s.backend}, {"rank", s.rank},
        {"world_size", s.world_size}}},
      {"displayTimeUnit", "ms"},
      {"baseTimeNanoseconds", s.origin_unix_ns},
      {"traceEvents", std::move(meta)},
      {"otherData", std::move(other)}};
  return doc.dump(1);
}

}  // namespace harness

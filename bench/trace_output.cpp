#include "bench/trace_output.h"

#include <sys/stat.h>

#include <filesystem>
#include <sstream>
#include <system_error>

#include "harness/errors.h"
#include "harness/report/io/atomic_write.h"

namespace harness {
namespace {

std::vector<std::pair<std::string, std::string>> metadata(const Provenance& p) {
  return {{"tool", "harness " + p.tool_version},
          {"git_sha", p.git_sha},
          {"device", p.device_name},
          {"instrument", p.instrument},
          {"started_at", p.started_at}};
}

}  // namespace

void RunTrace::check_destination(const BenchOptions& o) {
  if (o.trace_format != "kineto") {
    check_writable_destination(o.trace_out, "--trace");
    return;
  }
  if (o.trace_out.empty()) throw InputError("--trace-format kineto needs --trace DIRECTORY");
  if (o.trace_out == "-") {
    throw InputError("--trace -: --trace-format kineto writes a file per rank into a directory");
  }
  struct stat st {};
  if (::stat(o.trace_out.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) {
    throw InputError("--trace " + o.trace_out +
                     ": is not a directory (--trace-format kineto writes a file per rank into one)");
  }
  std::error_code error;
  std::filesystem::create_directories(o.trace_out, error);
  if (error) throw InputError("--trace " + o.trace_out + ": " + error.message());
  check_writable_destination(kineto_trace_file(o.trace_out, 0), "--trace");
}

RunTrace::RunTrace(const BenchOptions& o, Instrument& instrument,
                   const runtime::DeviceSelection& device,
                   const std::optional<runtime::RankEnv>& rank_env, runtime::Communicator* comm)
    : out_(o.trace_out),
      kineto_(o.trace_format == "kineto"),
      rank_(rank_env ? rank_env->rank : 0),
      instrument_(instrument) {
  const bool cuda = device.kind == runtime::DeviceKind::Cuda;
  const std::string backend = cuda ? "nccl" : "gloo";
  if (rank_env) {
    recorder_.set_process(rank_env->rank, "rank " + std::to_string(rank_env->rank), rank_env->rank,
                          rank_env->world_size, backend);
  } else {
    recorder_.set_process(1, "bench", 0, 1, backend);
  }
  const int index = rank_env ? rank_env->local_rank : 0;
  recorder_.set_device(index, cuda ? "gpu" : runtime::to_string(device.kind), device.description);
  if (comm) {  // rank 0's origin for every rank
    if (comm->rank() == 0) {
      comm->store_set("trace/origin", std::to_string(recorder_.origin_ns()) + " " +
                                          std::to_string(recorder_.origin_unix_ns()));
    } else {
      std::istringstream in(comm->store_get("trace/origin"));
      int64_t origin = 0, unix_ns = 0;
      if (in >> origin >> unix_ns) recorder_.set_origin(origin, unix_ns);
    }
  }
  add_phase_listener(&recorder_);
  instrument_.attach_trace(&recorder_);
  set_step_trace(&recorder_);
  attached_ = true;
}

RunTrace::~RunTrace() { detach(); }

void RunTrace::detach() noexcept {
  if (!attached_) return;
  set_step_trace(nullptr);
  instrument_.attach_trace(nullptr);
  remove_phase_listener(&recorder_);
  attached_ = false;
}

void RunTrace::finish(const Provenance& p, runtime::Communicator* comm, bool leader) {
  if (finished_) return;
  finished_ = true;
  detach();
  if (kineto_) {
    write_file_atomically(kineto_trace_file(out_, rank_), recorder_.to_kineto_json(metadata(p)));
    return;
  }
  std::string json = recorder_.to_json(metadata(p));
  if (comm) {
    if (comm->rank() != 0) {
      comm->store_set("trace/rank" + std::to_string(comm->rank()), json);
      return;
    }
    std::vector<std::string> documents = {std::move(json)};
    for (int r = 1; r < comm->world_size(); ++r) {
      documents.push_back(comm->store_get("trace/rank" + std::to_string(r)));
    }
    json = merge_traces(documents);
  }
  if (leader) write_file_atomically(out_, json);
}

}  // namespace harness

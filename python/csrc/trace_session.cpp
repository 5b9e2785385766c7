#include "trace_session.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <system_error>
#include <utility>
#include <vector>

#include "harness/errors.h"
#include "harness/instrument/phase.h"
#include "harness/report/io/atomic_write.h"

namespace harness::python {

TraceSession::TraceSession(const std::string& process)
    : recorder_(std::make_shared<TraceRecorder>()) {
  recorder_->set_process(1, process, 0, 1, "gloo");
  recorder_->set_device(0, "sim", kSimDeviceName);
  add_phase_listener(recorder_.get());
  listening_ = true;
}

TraceSession::~TraceSession() { stop(); }

void TraceSession::stop() noexcept {
  if (!listening_) return;
  remove_phase_listener(recorder_.get());
  listening_ = false;
}

void TraceSession::write(const std::string& path, const std::string& format,
                         const std::map<std::string, std::string>& metadata) const {
  std::vector<std::pair<std::string, std::string>> other(metadata.begin(), metadata.end());
  other.emplace_back("device", kSimDeviceName);
  other.emplace_back("instrument", "dispatcher");
  if (format == "chrome") {
    write_file_atomically(path, recorder_->to_json(other), "trace");
    return;
  }
  if (format != "kineto") throw InputError("--trace-format " + format + ": chrome or kineto");
  std::error_code error;
  std::filesystem::create_directories(path, error);
  if (error) throw InputError("--trace " + path + ": " + error.message());
  write_file_atomically(kineto_trace_file(path, rank_), recorder_->to_kineto_json(other),
                        "trace");
}

void TraceSession::set_rank(int rank, int world_size) {
  rank_ = rank;
  recorder_->set_process(rank, "rank " + std::to_string(rank), rank, world_size, "gloo");
  recorder_->set_device(rank, "sim", kSimDeviceName);
}

std::pair<int64_t, int64_t> TraceSession::origin() const {
  return {recorder_->origin_ns(), recorder_->origin_unix_ns()};
}

void TraceSession::set_origin(int64_t origin_ns, int64_t unix_ns) {
  recorder_->set_origin(origin_ns, unix_ns);
}

void merge_trace_files(const std::vector<std::string>& paths, const std::string& out) {
  std::vector<std::string> documents;
  for (const std::string& path : paths) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw InputError("trace " + path + ": cannot be read");
    std::ostringstream text;
    text << in.rdbuf();
    documents.push_back(text.str());
  }
  std::string merged;
  try {
    merged = merge_traces(documents);
  } catch (const std::invalid_argument& e) {
    throw InputError(std::string("merging the ranks' traces: ") + e.what());
  }
  write_file_atomically(out, merged, "trace");
}

}  // namespace harness::python

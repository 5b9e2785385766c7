#include "trace_session.h"

#include <filesystem>
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
  write_file_atomically(kineto_trace_file(path, 0), recorder_->to_kineto_json(other), "trace");
}

}  // namespace harness::python

#include "bench/repetitions.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <stdexcept>
#include <thread>

#include "bench/temp_dir.h"
#include "harness/interrupt.h"
#include "harness/report/io/json_report.h"
#include "harness/report/model/repetition_merge.h"

namespace harness {
namespace {

// Starts repetition `index` of `argv`: its report to `report`, its console table to /dev/null
// (the first process prints the merged one), its messages to our stderr.
pid_t spawn_repetition(const std::vector<std::string>& argv, size_t index,
                       const std::string& report) {
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid > 0) return pid;
  // It dies with the first process, as ranks do with their launcher (launcher.cpp).
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != parent) ::_exit(128 + SIGKILL);
  ::setenv(kRepetitionReportVariable, report.c_str(), 1);
  ::setenv(kRepetitionIndexVariable, std::to_string(index).c_str(), 1);
  const int null = ::open("/dev/null", O_WRONLY);
  if (null >= 0) ::dup2(null, STDOUT_FILENO);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  ::execv("/proc/self/exe", args.data());
  std::fprintf(stderr, "bench: repetition %zu: cannot start %s: %s\n", index + 1,
               argv[0].c_str(), std::strerror(errno));
  ::_exit(127);
}

// Waits for `pid`; a stop signal is passed on to it (then SIGKILL after a grace period), and
// thrown as Interrupted once it has ended.
int wait_for(pid_t pid) {
  std::optional<std::chrono::steady_clock::time_point> stopping_since;
  while (true) {
    int status = 0;
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) {
      if (const int sig = stop_signal()) throw Interrupted{sig};
      return status;
    }
    if (done < 0 && errno != EINTR) {
      throw std::runtime_error(std::string("waitpid: ") + std::strerror(errno));
    }
    if (stop_signal() != 0 && !stopping_since) {
      ::kill(pid, SIGTERM);
      stopping_since = std::chrono::steady_clock::now();
    }
    if (stopping_since && std::chrono::steady_clock::now() - *stopping_since > std::chrono::seconds(5)) {
      ::kill(pid, SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::string describe(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    return std::string("was killed by ") + signal_name(WTERMSIG(status));
  }
  return "ended with wait status " + std::to_string(status);
}

}  // namespace

std::optional<BenchOptions> repetition_options(const BenchOptions& given) {
  const char* report = std::getenv(kRepetitionReportVariable);
  if (report == nullptr) return std::nullopt;
  const char* index = std::getenv(kRepetitionIndexVariable);
  BenchOptions o = given;
  o.json_out = report;
  o.markdown_out.clear();
  o.html_out.clear();
  o.gbench_out.clear();
  o.gbench_repetitions = false;
  o.gates.clear();
  o.expect.clear();
  o.write_expectations.clear();
  o.baseline.clear();
  if (index == nullptr || std::string(index) != "0") o.trace_out.clear();
  o.run.quiet = true;
  o.repetitions = 1;
  return o;
}

RunReport run_repetitions(const BenchOptions& o) {
  install_stop_handlers();
  const TempDir reports("harness-repetitions-");
  std::vector<RunReport> per_process;
  const auto n = static_cast<size_t>(o.repetitions);
  for (size_t k = 0; k < n; ++k) {
    throw_if_stopped();
    if (!o.run.quiet) std::cerr << "bench: process " << k + 1 << "/" << n << "\n" << std::flush;
    const std::string path = reports.path() + "/process-" + std::to_string(k) + ".json";
    const int status = wait_for(spawn_repetition(o.argv, k, path));
    const bool exited = WIFEXITED(status);
    const int code = exited ? WEXITSTATUS(status) : -1;
    if (code == static_cast<int>(ExitCode::BadInput)) {
      throw InputError("repetition " + std::to_string(k + 1) + " of " + std::to_string(n) +
                       " found bad input (above)");
    }
    // 0, or 3 with the failed variants in its report: a report to merge.
    const bool reported = code == 0 || code == static_cast<int>(ExitCode::ScenarioFailed);
    if (!reported || ::access(path.c_str(), F_OK) != 0) {
      throw std::runtime_error("repetition " + std::to_string(k + 1) + " of " +
                               std::to_string(n) + " " + describe(status) +
                               " without a report");
    }
    per_process.push_back(read_report_file(path));
  }
  return merge_repetitions(per_process);
}

}  // namespace harness

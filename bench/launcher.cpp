#include "bench/launcher.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <thread>

#include "bench/temp_dir.h"
#include "harness/interrupt.h"

namespace harness {
namespace {

// A loopback port that is free now (the kernel picks it; rank 0's store binds it right after).
int free_loopback_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    throw std::runtime_error("cannot find a free loopback port: " + why);
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return "was killed by signal " + std::to_string(sig) + " (" + ::strsignal(sig) + ")";
  }
  return "ended with wait status " + std::to_string(status);
}

pid_t spawn_rank(const std::vector<std::string>& argv, int rank, int world, int port,
                 bool world_from_scenarios, const std::string& temp_dir) {
  const pid_t launcher = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid > 0) return pid;
  // Child: it dies with the launcher (SIGKILL: a launcher killed by SIGKILL, or crashed, must not
  // leave ranks running that write a report after the caller saw it fail). The signal is kept
  // across execv; a launcher that died before prctl is seen by getppid().
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != launcher) ::_exit(128 + SIGKILL);
  // The rank's environment, then this same bench binary.
  ::setenv("RANK", std::to_string(rank).c_str(), 1);
  ::setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
  ::setenv("WORLD_SIZE", std::to_string(world).c_str(), 1);
  ::setenv("LOCAL_WORLD_SIZE", std::to_string(world).c_str(), 1);
  ::setenv("MASTER_ADDR", "127.0.0.1", 1);
  ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
  ::setenv("TMPDIR", temp_dir.c_str(), 1);
  // One intra-op thread per rank unless the caller chose, as torchrun sets it for several ranks
  // on a host (torch/distributed/run.py): the ranks' idle OpenMP workers would otherwise spin
  // on the cores the other ranks need (2 ranks on 2 CPUs: three quarters of the CPU time in
  // libgomp's spin-wait, a sharded step 90 ms instead of a few).
  ::setenv("OMP_NUM_THREADS", "1", /*overwrite=*/0);
  if (world_from_scenarios) {
    ::setenv(kWorldFromScenariosVariable, "1", 1);
  } else {
    ::unsetenv(kWorldFromScenariosVariable);
  }
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  ::execv("/proc/self/exe", args.data());
  std::fprintf(stderr, "bench: rank %d: cannot start %s: %s\n", rank, argv[0].c_str(),
               std::strerror(errno));
  ::_exit(127);
}

}  // namespace

std::vector<std::string> without_nproc(const std::vector<std::string>& argv) {
  std::vector<std::string> out;
  for (size_t i = 0; i < argv.size(); ++i) {
    if (argv[i] == "--nproc") {
      ++i;
      continue;
    }
    if (argv[i].rfind("--nproc=", 0) == 0) continue;
    out.push_back(argv[i]);
  }
  return out;
}

ExitCode launch_local_ranks(const std::vector<std::string>& argv, int nproc,
                            bool world_from_scenarios) {
  install_stop_handlers();
  const int port = free_loopback_port();
  // The ranks' TMPDIR, removed when the launcher returns (a rank killed before it could clean up
  // leaves nothing behind), or by its remover when the launcher was killed: after the ranks.
  const TempDir temp_dir("harness-ranks-");

  std::vector<pid_t> pids;
  std::vector<std::optional<int>> status(static_cast<size_t>(nproc));
  for (int r = 0; r < nproc; ++r) {
    pids.push_back(spawn_rank(argv, r, nproc, port, world_from_scenarios, temp_dir.path()));
    temp_dir.remove_after(pids.back());
  }

  std::optional<int> failed_rank;
  std::optional<int> stopped_rank;  // a rank stopped by a signal (SIGSTOP, SIGTSTP): it hangs
  int stopped_by = 0;
  bool stopped_others = false;
  std::string failure;
  size_t running = pids.size();
  auto stopping_since = std::optional<std::chrono::steady_clock::time_point>();
  const auto grace = std::chrono::seconds(5);
  while (running > 0) {
    int st = 0;
    const pid_t pid = ::waitpid(-1, &st, WNOHANG | WUNTRACED);
    if (pid > 0) {
      for (size_t r = 0; r < pids.size(); ++r) {
        if (pids[r] != pid || status[r]) continue;
        if (WIFSTOPPED(st)) {
          if (!stopped_rank) {
            stopped_rank = static_cast<int>(r);
            stopped_by = WSTOPSIG(st);
          }
          continue;
        }
        status[r] = st;
        --running;
        const bool ok = WIFEXITED(st) && (WEXITSTATUS(st) == 0 || (r == 0 && WEXITSTATUS(st) == 1));
        if (!ok && !failed_rank && !stopping_since) {
          failed_rank = static_cast<int>(r);
          failure = describe_status(st);
        }
      }
      continue;
    }
    const int sig = stop_signal();
    if ((failed_rank || sig) && !stopping_since) {
      for (size_t r = 0; r < pids.size(); ++r) {
        if (!status[r]) {
          ::kill(pids[r], SIGTERM);
          ::kill(pids[r], SIGCONT);  // a stopped rank cannot act on SIGTERM until it continues
          stopped_others = true;
        }
      }
      stopping_since = std::chrono::steady_clock::now();
    }
    if (stopping_since && std::chrono::steady_clock::now() - *stopping_since > grace) {
      for (size_t r = 0; r < pids.size(); ++r) {
        if (!status[r]) ::kill(pids[r], SIGKILL);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }

  if (const int sig = stop_signal()) throw Interrupted{sig};  // the ranks were stopped and reaped
  if (failed_rank) {
    std::cerr << "bench: ";
    if (stopped_rank && *stopped_rank != *failed_rank) {
      std::cerr << "rank " << *stopped_rank << " of " << nproc << " was stopped by "
                << signal_name(stopped_by) << " and stopped answering; then ";
    }
    std::cerr << "rank " << *failed_rank << " of " << nproc << " " << failure
              << (stopped_others ? "; the other ranks were stopped" : "") << "\n";
    const int code = WIFEXITED(*status[*failed_rank]) ? WEXITSTATUS(*status[*failed_rank]) : 3;
    return code == static_cast<int>(ExitCode::BadInput) ? ExitCode::BadInput
                                                        : ExitCode::ScenarioFailed;
  }
  return static_cast<ExitCode>(WEXITSTATUS(*status[0]));
}

}  // namespace harness

#include "bench/temp_dir.h"

#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "harness/errors.h"

namespace harness {
namespace {

namespace fs = std::filesystem;

// Starts the remover of `dir` and returns the descriptor that keeps it waiting. SIGKILL runs no
// destructor, so a detached process (in its own session: a kill of the caller's process group
// does not reach it; and nobody's child, to reap or to count) reads pids from a socket only this
// process holds. End of file means this process has ended, however: it waits up to 10 s for each
// pid it was given, then removes the directory. After a normal end the destructor has removed it
// already, and the remover finds nothing to do.
//
// posix_spawn, not fork: it does not copy the page tables of a process that has loaded LibTorch
// (two forks of bench cost 7-15 ms here; the spawn about 1 ms). The shell it starts, in a new
// session, puts the remover in the background and exits at once.
int start_remover(const std::string& dir) {
  // A socket pair rather than a pipe: send() with MSG_NOSIGNAL cannot kill this process with
  // SIGPIPE if the remover is gone. Close-on-exec: no program this process starts holds it open.
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    throw std::runtime_error(std::string("socketpair: ") + std::strerror(errno));
  }
  auto fail = [&](const char* what, int error) {
    ::close(fds[0]);
    ::close(fds[1]);
    throw std::runtime_error(std::string(what) + ": " + std::strerror(error));
  };
  // An asynchronous list reads /dev/null unless redirected: the socket, stdin of the shell, is
  // given to it as fd 3.
  static const char* kScript =
      "exec 3<&0; { pids=$(cat); for p in $pids; do n=0; while kill -0 \"$p\" 2>/dev/null && "
      "[ $n -lt 200 ]; do sleep 0.05; n=$((n+1)); done; done; exec rm -rf -- \"$0\"; } <&3 3<&- &";
  const char* argv[] = {"/bin/sh", "-c", kScript, dir.c_str(), nullptr};
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attributes;
  ::posix_spawn_file_actions_init(&actions);
  ::posix_spawnattr_init(&attributes);
  ::posix_spawn_file_actions_adddup2(&actions, fds[0], 0);  // (clears close-on-exec there)
  ::posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  ::posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  ::posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSID);
  pid_t shell = 0;
  const int spawned = ::posix_spawn(&shell, "/bin/sh", &actions, &attributes,
                                    const_cast<char* const*>(argv), environ);
  ::posix_spawn_file_actions_destroy(&actions);
  ::posix_spawnattr_destroy(&attributes);
  if (spawned != 0) fail("posix_spawn /bin/sh", spawned);
  ::close(fds[0]);
  int ignored = 0;
  while (::waitpid(shell, &ignored, 0) < 0 && errno == EINTR) {
  }
  return fds[1];
}

}  // namespace

TempDir::TempDir(const std::string& prefix) {
  // Not fs::temp_directory_path(): it throws a filesystem_error when TMPDIR is not a directory,
  // and the message should say what to fix.
  const char* env = std::getenv("TMPDIR");
  const std::string parent = env != nullptr && *env != '\0' ? env : "/tmp";
  std::string pattern = (fs::path(parent) / (prefix + "XXXXXX")).string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw InputError("cannot create a temporary directory in " + parent +
                     " (set TMPDIR to a writable directory): " + std::strerror(errno));
  }
  path_ = pattern;
  try {
    remover_fd_ = start_remover(path_);
  } catch (...) {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
    throw;
  }
}

TempDir::~TempDir() {
  // The directory first, then the remover's cue: it never removes what is still in use.
  std::error_code ignored;
  fs::remove_all(path_, ignored);
  ::close(remover_fd_);
}

void TempDir::remove_after(pid_t pid) const {
  const std::string line = std::to_string(pid) + "\n";
  [[maybe_unused]] const ssize_t n = ::send(remover_fd_, line.data(), line.size(), MSG_NOSIGNAL);
}

}  // namespace harness

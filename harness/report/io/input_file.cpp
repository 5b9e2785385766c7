#include "harness/report/io/input_file.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "harness/errors.h"
#include "harness/interrupt.h"

namespace harness {
namespace {

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "is a directory";
  if (S_ISFIFO(mode)) return "is a FIFO";
  if (S_ISCHR(mode)) return "is a character device";
  if (S_ISBLK(mode)) return "is a block device";
  if (S_ISSOCK(mode)) return "is a socket";
  return "is not a regular file";
}

// Closes a descriptor it opened (not stdin) when the read ends, thrown or not.
struct Descriptor {
  int fd;
  bool owned;
  ~Descriptor() {
    if (owned && fd >= 0) ::close(fd);
  }
};

}  // namespace

std::string read_input_file(const std::string& path, const std::string& what, size_t limit) {
  auto fail = [&](const std::string& reason) -> void {
    throw InputError("cannot read " + what + " '" + path + "': " + reason);
  };
  const bool from_stdin = path == "-";
  // O_NONBLOCK: opening a FIFO for reading does not wait for a writer; nothing is read from
  // anything but a regular file or stdin.
  const Descriptor in{from_stdin ? 0 : ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC),
                      !from_stdin};
  if (in.fd < 0) fail(std::strerror(errno));
  struct stat st {};
  if (::fstat(in.fd, &st) != 0) fail(std::strerror(errno));
  if (!from_stdin && !S_ISREG(st.st_mode)) {
    fail(std::string(kind_of(st.st_mode)) + "; give a regular file, or - for stdin");
  }
  const std::string too_big =
      "larger than " + (limit >= (size_t{1} << 20) ? std::to_string(limit >> 20) + " MiB"
                                                   : std::to_string(limit) + " bytes");
  if (S_ISREG(st.st_mode) && static_cast<size_t>(st.st_size) > limit) fail(too_big);
  if (!from_stdin) ::fcntl(in.fd, F_SETFL, ::fcntl(in.fd, F_GETFL) & ~O_NONBLOCK);
  std::string text;
  // A regular file's size, once: growing by doubling would hold up to twice the file.
  if (S_ISREG(st.st_mode)) text.reserve(static_cast<size_t>(st.st_size));
  char buffer[1 << 16];
  for (;;) {
    // A blocking read restarts after a stop signal (SA_RESTART), so a read from a pipe or terminal
    // that never ends would keep bench waiting: wait in short polls and stop at a stop signal.
    if (from_stdin) {
      pollfd ready{in.fd, POLLIN, 0};
      const int r = ::poll(&ready, 1, 100);
      throw_if_stopped();
      if (r == 0 || (r < 0 && errno == EINTR)) continue;
    }
    const ssize_t n = ::read(in.fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(std::strerror(errno));
    if (n == 0) break;
    if (text.size() + static_cast<size_t>(n) > limit) fail(too_big);
    text.append(buffer, static_cast<size_t>(n));
  }
  return text;
}

}  // namespace harness

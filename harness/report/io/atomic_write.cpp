#include "harness/report/io/atomic_write.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "harness/errors.h"

namespace harness {
namespace {

std::string describe(const std::string& path, const std::string& what) {
  return (what.empty() ? "" : what + " ") + "'" + path + "'";
}

[[noreturn]] void fail_write(const std::string& path, const std::string& what,
                             const std::string& tmp, int error) {
  if (!tmp.empty()) std::remove(tmp.c_str());
  throw InputError("cannot write " + describe(path, what) + ": " + std::strerror(error));
}

// Where a write to `path` goes: `direct` (opened and written in place: stdout, a device, a FIFO,
// anything that is not a regular file) or `target`, the regular file (present or not) that the
// symlinks from `path` lead to, replaced by a rename.
struct Destination {
  bool direct = false;
  std::string target;
  int error = 0;  // errno of a failed lstat or readlink; ELOOP for too many links
};

std::string directory_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

Destination resolve(const std::string& path) {
  if (path == "-") return {true, path, 0};
  std::string at = path;
  for (int hop = 0; hop < 40; ++hop) {  // as the kernel's MAXSYMLINKS
    // /proc/self/fd/N and the like are magic links: their "target" is no path to rename onto.
    if (at.rfind("/proc/", 0) == 0 || at.rfind("/dev/", 0) == 0) return {true, path, 0};
    struct stat st {};
    if (::lstat(at.c_str(), &st) != 0) {
      if (errno == ENOENT) return {false, at, 0};  // created by the rename
      return {false, at, errno};
    }
    if (!S_ISLNK(st.st_mode)) return {!S_ISREG(st.st_mode), S_ISREG(st.st_mode) ? at : path, 0};
    std::string link(static_cast<size_t>(st.st_size > 0 ? st.st_size : 4096) + 1, '\0');
    const ssize_t n = ::readlink(at.c_str(), link.data(), link.size());
    if (n < 0) return {false, at, errno};
    link.resize(static_cast<size_t>(n));
    at = link.front() == '/' ? link : directory_of(at) + "/" + link;
  }
  return {false, at, ELOOP};
}

// Writes to stdout, a device or a FIFO as it is: no temporary file, no fsync (pipes and devices
// have nothing to flush to a disk). Appending: /dev/stdout redirected to a file (`> log`) keeps
// what the process wrote there before.
void write_directly(const std::string& path, std::string_view contents, const std::string& what) {
  std::FILE* file = path == "-" ? stdout : std::fopen(path.c_str(), "ab");
  if (file == nullptr) fail_write(path, what, "", errno);
  int error = 0;
  if (std::fwrite(contents.data(), 1, contents.size(), file) != contents.size() ||
      std::fflush(file) != 0) {
    error = errno;
  }
  if (file != stdout && std::fclose(file) != 0 && error == 0) error = errno;
  if (error != 0) fail_write(path, what, "", error);
}

}  // namespace

void write_file_atomically(const std::string& path, std::string_view contents,
                           const std::string& what) {
  const Destination destination = resolve(path);
  if (destination.error != 0) fail_write(path, what, "", destination.error);
  if (destination.direct) return write_directly(path, contents, what);
  const std::string tmp = destination.target + ".tmp." + std::to_string(::getpid());
  std::FILE* file = std::fopen(tmp.c_str(), "wb");
  if (file == nullptr) fail_write(path, what, tmp, errno);
  int error = 0;
  if (std::fwrite(contents.data(), 1, contents.size(), file) != contents.size() ||
      std::fflush(file) != 0 || ::fsync(::fileno(file)) != 0) {
    error = errno;
  }
  if (std::fclose(file) != 0 && error == 0) error = errno;
  if (error != 0) fail_write(path, what, tmp, error);
  if (std::rename(tmp.c_str(), destination.target.c_str()) != 0) {
    fail_write(path, what, tmp, errno);
  }
}

void check_writable_destination(const std::string& path, const std::string& flag) {
  if (path.empty() || path == "-") return;
  auto fail = [&](const std::string& problem) {
    throw InputError(flag + " " + (path.size() > 200 ? path.substr(0, 200) + "..." : path) + ": " +
                     problem);
  };
  if (path.back() == '/') fail("is a directory; give a file name");
  const Destination destination = resolve(path);
  if (destination.error != 0) fail(std::strerror(destination.error));
  struct stat st {};
  if (destination.direct) {
    if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      fail("is a directory; give a file name");
    }
    if (::access(path.c_str(), W_OK) != 0) fail(std::strerror(errno));
    return;
  }
  const std::string directory = directory_of(destination.target);
  if (::stat(directory.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    const int error = errno;
    if (error == ENOENT || S_ISREG(st.st_mode)) fail("directory " + directory + " does not exist");
    fail(directory + ": " + std::strerror(error));
  }
  // Create (and remove) the temporary file the write will use: an unwritable or read-only
  // directory, a name too long, are found now. open(2), not fopen: nothing is written yet.
  const std::string probe = destination.target + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) fail("cannot create a file in " + directory + ": " + std::strerror(errno));
  ::close(fd);
  ::unlink(probe.c_str());
}

}  // namespace harness

#include "harness/report/atomic_write.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "harness/errors.h"

namespace harness {
namespace {

[[noreturn]] void fail_write(const std::string& path, const std::string& what,
                             const std::string& tmp, int error) {
  std::remove(tmp.c_str());
  throw InputError("cannot write " + (what.empty() ? "" : what + " ") + "'" + path +
                   "': " + std::strerror(error));
}

}  // namespace

void write_file_atomically(const std::string& path, std::string_view contents,
                           const std::string& what) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  std::FILE* file = std::fopen(tmp.c_str(), "wb");
  if (file == nullptr) fail_write(path, what, tmp, errno);
  int error = 0;
  if (std::fwrite(contents.data(), 1, contents.size(), file) != contents.size() ||
      std::fflush(file) != 0 || ::fsync(::fileno(file)) != 0) {
    error = errno;
  }
  if (std::fclose(file) != 0 && error == 0) error = errno;
  if (error != 0) fail_write(path, what, tmp, error);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) fail_write(path, what, tmp, errno);
}

}  // namespace harness

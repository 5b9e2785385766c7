#include "bench/temp_dir.h"

#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "harness/errors.h"

namespace harness {

namespace fs = std::filesystem;

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
}

TempDir::~TempDir() {
  std::error_code ignored;
  fs::remove_all(path_, ignored);
}

}  // namespace harness

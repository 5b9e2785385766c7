#pragma once
// A private temporary directory under $TMPDIR (or /tmp), removed with everything in it when the
// object goes. bench's scratch directory (checkpoints) and the ranks' TMPDIR are TempDirs.
#include <string>

namespace harness {

class TempDir {
 public:
  // `prefix`: the directory's name before the random suffix ("harness-"). Throws InputError naming
  // the parent directory and the reason when it cannot be created (TMPDIR missing or unwritable).
  explicit TempDir(const std::string& prefix);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace harness

#pragma once
// A private temporary directory under $TMPDIR (or /tmp), removed with everything in it when the
// object goes, and also when this process is killed (SIGKILL, a crash: no destructor runs) by a
// detached remover. bench's scratch directory (checkpoints) and the ranks' TMPDIR are TempDirs.
#include <sys/types.h>

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

  // After this process is killed, the remover waits (up to 10 s) for `pid` to end before it
  // removes the directory: a child that may still be writing in it (a rank).
  void remove_after(pid_t pid) const;

 private:
  std::string path_;
  int remover_fd_ = -1;  // only this process holds it: its end tells the remover to act
};

}  // namespace harness

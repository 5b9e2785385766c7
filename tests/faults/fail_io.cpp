// An LD_PRELOAD shim that makes one file operation fail on chosen paths, to test what bench does
// when the disk fills up or fails mid-write. Environment:
//   HARNESS_FAIL_PATH   a substring of the paths to fail (e.g. "report.json", "/ckpt");
//   HARNESS_FAIL_CALL   fopen | fwrite | fsync | fclose | rename;
//   HARNESS_FAIL_ERRNO  the error to fail with, as a number (28 = ENOSPC, 5 = EIO).
// The harness writes every output through write_file_atomically (fopen, fwrite, fflush, fsync,
// fclose, rename); each of those calls goes through the PLT, where this library comes first.
// Every injected failure is logged to stderr as "fail_io: <call> <path>: <error>".
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cerrno>
#include <mutex>
#include <set>
#include <string>

namespace {

std::mutex g_mutex;
std::set<int>& tracked_fds() {  // descriptors of files opened on a failing path
  static auto* fds = new std::set<int>;
  return *fds;
}

const char* env_or_empty(const char* name) {
  const char* v = getenv(name);
  return v == nullptr ? "" : v;
}

bool matches(const char* path) {
  const char* needle = env_or_empty("HARNESS_FAIL_PATH");
  return path != nullptr && *needle != '\0' && strstr(path, needle) != nullptr;
}

bool failing(const char* call) { return strcmp(env_or_empty("HARNESS_FAIL_CALL"), call) == 0; }

int fail_errno() {
  const int e = atoi(env_or_empty("HARNESS_FAIL_ERRNO"));
  return e > 0 ? e : ENOSPC;
}

int inject(const char* call, const char* what) {
  const int e = fail_errno();
  fprintf(stderr, "fail_io: %s %s: %s\n", call, what, strerror(e));
  errno = e;
  return e;
}

bool tracked(FILE* f) {
  if (f == nullptr) return false;
  std::lock_guard<std::mutex> lock(g_mutex);
  return tracked_fds().count(fileno(f)) > 0;
}

template <typename Fn>
Fn next(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}

FILE* open_and_track(FILE* (*real)(const char*, const char*), const char* path, const char* mode) {
  if (matches(path) && failing("fopen")) {
    inject("fopen", path);
    return nullptr;
  }
  FILE* f = real(path, mode);
  if (f != nullptr && matches(path)) {
    std::lock_guard<std::mutex> lock(g_mutex);
    tracked_fds().insert(fileno(f));
  }
  return f;
}

}  // namespace

extern "C" {

FILE* fopen(const char* path, const char* mode) {
  static auto real = next<FILE* (*)(const char*, const char*)>("fopen");
  return open_and_track(real, path, mode);
}

FILE* fopen64(const char* path, const char* mode) {
  static auto real = next<FILE* (*)(const char*, const char*)>("fopen64");
  return open_and_track(real, path, mode);
}

size_t fwrite(const void* data, size_t size, size_t count, FILE* f) {
  static auto real = next<size_t (*)(const void*, size_t, size_t, FILE*)>("fwrite");
  if (failing("fwrite") && tracked(f)) {
    inject("fwrite", "(tracked file)");
    // A full disk takes part of the data, then fails.
    return count > 1 ? real(data, size, count / 2, f) : 0;
  }
  return real(data, size, count, f);
}

int fsync(int fd) {
  static auto real = next<int (*)(int)>("fsync");
  bool hit = false;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    hit = tracked_fds().count(fd) > 0;
  }
  if (hit && failing("fsync")) {
    inject("fsync", "(tracked file)");
    return -1;
  }
  return real(fd);
}

int fclose(FILE* f) {
  static auto real = next<int (*)(FILE*)>("fclose");
  const bool hit = tracked(f);
  if (hit) {
    std::lock_guard<std::mutex> lock(g_mutex);
    tracked_fds().erase(fileno(f));
  }
  const int rc = real(f);
  if (hit && failing("fclose")) {
    inject("fclose", "(tracked file)");
    return EOF;
  }
  return rc;
}

int rename(const char* from, const char* to) {
  static auto real = next<int (*)(const char*, const char*)>("rename");
  if (failing("rename") && matches(to)) {
    inject("rename", to);
    return -1;
  }
  return real(from, to);
}

}  // extern "C"

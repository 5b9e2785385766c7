#pragma once
// Files the harness writes (reports, summaries, traces, checkpoints) appear whole or not at all.
#include <string>
#include <string_view>

namespace harness {

// Writes `contents` to `path + ".tmp.<pid>"` in the same directory, flushes it to the disk (fsync),
// then renames it over `path`, so that a reader never sees a half-written file, even after a crash.
// On failure (a full disk, an I/O error) it removes the temporary file and throws InputError
// naming the path, `what` it is ("checkpoint"; nothing by default) and the reason.
void write_file_atomically(const std::string& path, std::string_view contents,
                           const std::string& what = "");

}  // namespace harness

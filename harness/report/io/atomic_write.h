#pragma once
// Files the harness writes (reports, summaries, traces, checkpoints) appear whole or not at all,
// and never in place of something that is not a regular file.
#include <string>
#include <string_view>

namespace harness {

// Writes `contents` to `path`:
//  - "-" is stdout;
//  - a path that is (or whose symlinks lead to) something other than a regular file -- /dev/null,
//    /dev/stdout, a FIFO, a terminal -- is opened and written directly, never replaced;
//  - otherwise (a regular file, or nothing yet) the contents go to `<target>.tmp.<pid>` in the
//    target's directory, are flushed to the disk (fsync) and renamed over the target, so that a
//    reader never sees a half-written file, even after a crash. A symlink is followed: its target
//    is replaced, the link stays.
// On failure (a full disk, an I/O error) it removes the temporary file and throws InputError
// naming the path, `what` it is ("checkpoint"; nothing by default) and the reason.
void write_file_atomically(const std::string& path, std::string_view contents,
                           const std::string& what = "");

// Checks before a run that `path` can be written as write_file_atomically writes it: not a
// directory, its directory exists and a file can be created there (an unwritable or read-only
// directory is found now, not after the run), or it is a writable non-regular file. Throws
// InputError naming `flag` otherwise. Empty: nothing asked for, nothing checked.
void check_writable_destination(const std::string& path, const std::string& flag);

}  // namespace harness

#pragma once
// The git state of the source tree the binary was built from (generated at build time).
namespace harness {
const char* git_sha();
bool git_dirty();
}  // namespace harness

#pragma once
// The contract every fuzz target checks: bytes from outside the process (a file, another rank) are
// either accepted or rejected with the parser's own error type, whose message names the source.
// Any other exception, a crash, a hang or a leak is a bug. Each target defines
// LLVMFuzzerTestOneInput; built with -fsanitize=fuzzer it is a libFuzzer binary (scripts/fuzz.sh),
// linked with replay_main.cpp it replays files (ctest fuzz_replay_*: the seeds and every input a
// fuzzer ever found, tests/fuzz/).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace harness::fuzz {

inline std::string as_text(const uint8_t* data, size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

// Splits `text` at each "\n--8<--\n" line: several documents in one input (the ranks' messages).
inline std::vector<std::string> split_documents(const std::string& text) {
  static const std::string kSeparator = "\n--8<--\n";
  std::vector<std::string> out;
  size_t begin = 0;
  for (size_t at; (at = text.find(kSeparator, begin)) != std::string::npos;
       begin = at + kSeparator.size()) {
    out.push_back(text.substr(begin, at - begin));
  }
  out.push_back(text.substr(begin));
  return out;
}

}  // namespace harness::fuzz

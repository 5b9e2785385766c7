#pragma once
// Files the harness reads from users (gates, baselines, bench compare's and history's reports):
// regular files or stdin only, of a bounded size, as JSON in which no object repeats a key.
#include <cstddef>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace harness {

// The largest input read: far above any real report (a few MiB), far below a machine's memory.
inline constexpr size_t kMaxInputBytes = size_t{256} << 20;

// Reads the whole of `path` ("-": stdin). A FIFO, a device (/dev/zero), a directory or a socket is
// refused at once, without reading or blocking (opened O_NONBLOCK), and so is a file or stdin of
// more than `limit` bytes: InputError "cannot read <what> '<path>': <reason>".
std::string read_input_file(const std::string& path, const std::string& what,
                            size_t limit = kMaxInputBytes);

// A key that occurs twice in one JSON object. nlohmann keeps the last one silently; a gate or a
// report with a repeated key is ambiguous, so it is an error.
struct DuplicateKey : std::runtime_error {
  explicit DuplicateKey(const std::string& key)
      : std::runtime_error("duplicate key '" + key + "'"), key(key) {}
  std::string key;
};

// Json::parse(text), but a key repeated in one object throws DuplicateKey (the parser's callback
// sees every key of every object). Parse errors are Json's exceptions, as from Json::parse.
template <typename Json>
Json parse_json_without_duplicate_keys(const std::string& text) {
  std::vector<std::set<std::string>> open;  // the keys of each object being read, innermost last
  return Json::parse(text, [&](int /*depth*/, typename Json::parse_event_t event, Json& parsed) {
    if (event == Json::parse_event_t::object_start) {
      open.emplace_back();
    } else if (event == Json::parse_event_t::object_end) {
      open.pop_back();
    } else if (event == Json::parse_event_t::key) {
      const auto& key = parsed.template get_ref<const typename Json::string_t&>();
      if (!open.back().insert(key).second) throw DuplicateKey(key);
    }
    return true;
  });
}

}  // namespace harness

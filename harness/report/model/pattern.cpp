#include "harness/report/model/pattern.h"

#include <algorithm>

namespace harness {
namespace {

bool match_from(const std::string& pattern, size_t p, const std::string& text, size_t t,
                std::vector<std::string>& captures) {
  for (; p < pattern.size() && pattern[p] != '*'; ++p, ++t) {
    if (t == text.size() || pattern[p] != text[t]) return false;
  }
  if (p == pattern.size()) return t == text.size();
  for (size_t end = t; end <= text.size(); ++end) {  // pattern[p] is '*': shortest match first
    captures.push_back(text.substr(t, end - t));
    if (match_from(pattern, p + 1, text, end, captures)) return true;
    captures.pop_back();
  }
  return false;
}

}  // namespace

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

size_t wildcard_count(const std::string& pattern) {
  return static_cast<size_t>(std::count(pattern.begin(), pattern.end(), '*'));
}

bool glob_match(const std::string& pattern, const std::string& text,
                std::vector<std::string>* captures) {
  std::vector<std::string> matched;
  if (!match_from(pattern, 0, text, 0, matched)) return false;
  if (captures != nullptr) *captures = std::move(matched);
  return true;
}

std::string substitute_wildcards(const std::string& pattern,
                                 const std::vector<std::string>& captures) {
  std::string out;
  size_t next = 0;
  for (char c : pattern) {
    if (c == '*' && next < captures.size()) {
      out += captures[next++];
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace harness

#pragma once
// Name patterns of gate rules: an exact name, or a glob in which every '*' matches any run of
// characters ('/' included, possibly empty). What each '*' matched can be substituted into another
// pattern, so that "resume_keep_step/*" paired with "fresh/*" compares like with like.
#include <cstddef>
#include <string>
#include <vector>

namespace harness {

size_t wildcard_count(const std::string& pattern);

// True when `text` begins with `prefix` (metric paths: "per_step.", "samples.", "phase[").
bool starts_with(const std::string& text, const std::string& prefix);
// True when `text` ends with `suffix` (metric names: ".count", "capture.blockers").
bool ends_with(const std::string& text, const std::string& suffix);

// True when `text` matches `pattern`. On a match, `captures` (when given) receives the text matched
// by each '*', in order; each '*' takes the shortest text that lets the rest of the pattern match.
bool glob_match(const std::string& pattern, const std::string& text,
                std::vector<std::string>* captures = nullptr);

// `pattern` with its i-th '*' replaced by captures[i]; needs as many captures as wildcards.
std::string substitute_wildcards(const std::string& pattern,
                                 const std::vector<std::string>& captures);

}  // namespace harness

#pragma once
// What the report tests share: a small but complete RunReport (its numbers mirror resume_adam:
// resuming with move_all adds D2H copies and syncs), equality for results, temporary files, and
// checks on error messages.
#include <gtest/gtest.h>

#include <string>

#include "harness/errors.h"
#include "harness/report/model/result.h"

// EXPECT_THAT(text, HasSubstr(part)) without gmock.
#define EXPECT_CONTAINS(text, part) EXPECT_PRED_FORMAT2(::harness::assert_contains, text, part)

namespace harness {

// Scenario "resume_adam" with variants
//   fresh/foreach             d2h 4/step, sync 0/step, 5 timed steps, median 1.234567 ms
//   resume_move_all/foreach   d2h 12/step, sync 8/step, two sync sites
//   resume_keep_step/foreach  d2h 4/step, sync 0/step
//   resume_rebuild/foreach    failed: "checkpoint not found"
//   fresh/forloop             launch 2.4/step (not integral), no correctness check
// plus one ResultTable and a report warning.
RunReport sample_report();

// A file of the source tree: `relative` under HARNESS_SOURCE_DIR, which ctest sets (the path is
// not compiled in, so that a clone elsewhere compiles the same objects and ccache finds them).
std::string source_path(const std::string& relative);

// A mutable variant of the sample (asserts that it exists).
VariantResult& sample_variant(RunReport& report, const std::string& name);

// Field-by-field equality, for round-trip tests.
bool operator==(const Measurement& a, const Measurement& b);
bool operator==(const SyncSite& a, const SyncSite& b);
bool operator==(const VariantResult& a, const VariantResult& b);
bool operator==(const ResultTable& a, const ResultTable& b);
bool operator==(const ScenarioResult& a, const ScenarioResult& b);
bool operator==(const Provenance& a, const Provenance& b);
bool operator==(const RunReport& a, const RunReport& b);

// A fresh, empty directory under the test temp dir, removed with the object.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

std::string read_text(const std::string& path);
void write_text(const std::string& path, const std::string& text);

::testing::AssertionResult assert_contains(const char* text_expr, const char* part_expr,
                                           const std::string& text, const std::string& part);

// The message of the InputError that `fn` throws; "" and a test failure when it throws none.
template <typename Fn>
std::string input_error(Fn fn) {
  try {
    fn();
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no InputError thrown";
  return "";
}

}  // namespace harness

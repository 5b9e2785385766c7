// Inputs from users: regular files or stdin, bounded in size, JSON without repeated keys.
#include "harness/report/io/input_file.h"

#include <sys/stat.h>

#include <chrono>

#include "harness/report/gates/gate.h"
#include "harness/report/io/json_report.h"
#include "test_support.h"

namespace harness {
namespace {

TEST(InputFile, ReadsARegularFile) {
  TempDir dir;
  write_text(dir.path("a.json"), "{\"x\": 1}");
  EXPECT_EQ(read_input_file(dir.path("a.json"), "gate file"), "{\"x\": 1}");
}

TEST(InputFile, RefusesWhatIsNotARegularFileAtOnce) {
  TempDir dir;
  ASSERT_EQ(::mkfifo(dir.path("fifo").c_str(), 0600), 0);
  const auto start = std::chrono::steady_clock::now();
  // No writer ever opens the FIFO: a blocking open or read would hang here.
  EXPECT_CONTAINS(input_error([&] { read_input_file(dir.path("fifo"), "gate file"); }),
                  "cannot read gate file '" + dir.path("fifo") +
                      "': is a FIFO; give a regular file, or - for stdin");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_CONTAINS(input_error([&] { read_input_file("/dev/zero", "report"); }),
                  "'/dev/zero': is a character device");
  EXPECT_CONTAINS(input_error([&] { read_input_file(dir.dir(), "report"); }), "is a directory");
  EXPECT_CONTAINS(input_error([&] { read_input_file(dir.path("absent"), "report"); }),
                  "No such file or directory");
}

TEST(InputFile, RefusesMoreThanTheLimit) {
  TempDir dir;
  write_text(dir.path("big.json"), std::string(11, ' '));
  EXPECT_CONTAINS(input_error([&] { read_input_file(dir.path("big.json"), "report", 10); }),
                  "'" + dir.path("big.json") + "': larger than 10 bytes");
  EXPECT_EQ(read_input_file(dir.path("big.json"), "report", 11).size(), 11u);
  EXPECT_EQ(kMaxInputBytes, size_t{256} << 20);
}

TEST(InputFile, ADuplicateKeyInAGateIsNamed) {
  const std::string rule =
      R"({"scenario": "s", "variant": "v", "metric": "per_step.sync.count", "max": 1)";
  // The same key in two sibling objects is fine.
  EXPECT_EQ(
      parse_gate_text(R"({"gate_version": 1, "rules": [)" + rule + "}, " + rule + "}]}", "g.json")
          .rules.size(),
      2u);
  EXPECT_CONTAINS(input_error([&] {
                    parse_gate_text(R"({"gate_version": 1, "rules": [)" + rule + R"(, "max": 2}]})",
                                    "g.json");
                  }),
                  "gate file 'g.json': duplicate key 'max'");
  EXPECT_CONTAINS(input_error([&] {
                    parse_gate_text(
                        R"({"gate_version": 1, "rules": [)" + rule + R"(}], "gate_version": 1})",
                        "g.json");
                  }),
                  "duplicate key 'gate_version'");
}

TEST(InputFile, ADuplicateKeyInAReportIsNamed) {
  std::string text = to_json(sample_report()).dump();
  ASSERT_EQ(text.front(), '{');
  text.insert(1, R"("warnings": [], )");  // a second "warnings" at the top level
  EXPECT_CONTAINS(input_error([&] { parse_report_text(text, "r.json"); }),
                  "report 'r.json': duplicate key 'warnings'");
}

}  // namespace
}  // namespace harness

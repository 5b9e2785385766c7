#pragma once
// Aligned plain-text tables for terminal output (the console reporter and gate outcomes).
#include <string>
#include <vector>

namespace harness {

// Owns the cells of one table and lays them out in columns two spaces apart. Each column is left-
// ('l') or right-aligned ('r'). A row with fewer cells than columns lets its last cell run on past
// the columns (for example "FAILED: <error>"); such a cell does not widen its column. Widths count
// UTF-8 characters, not bytes, so "µs" aligns. Control characters in a cell show as \xNN
// (printable(), format.h): a cell never breaks its line.
class TextTable {
 public:
  // `alignment` has one letter per column; `header` is empty (no header) or one cell per column.
  TextTable(std::vector<std::string> header, std::string alignment);

  void add_row(std::vector<std::string> cells);
  bool empty() const { return rows_.empty(); }

  // Every line starts with `indent`; a header is underlined with dashes. No trailing spaces.
  std::string render(const std::string& indent = "") const;

 private:
  std::string alignment_;
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace harness

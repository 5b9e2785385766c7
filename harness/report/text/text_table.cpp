#include "harness/report/text/text_table.h"

#include <algorithm>
#include <utility>

#include "harness/report/text/format.h"

namespace harness {
namespace {

// Characters, not bytes: UTF-8 continuation bytes (10xxxxxx) do not count.
size_t display_width(const std::string& text) {
  return static_cast<size_t>(std::count_if(text.begin(), text.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  }));
}

// Every cell as printable() shows it: a cell is one line of the table, whatever it holds.
std::vector<std::string> printable_cells(std::vector<std::string> cells) {
  for (std::string& cell : cells) cell = printable(cell);
  return cells;
}

}  // namespace

TextTable::TextTable(std::vector<std::string> header, std::string alignment)
    : alignment_(std::move(alignment)), header_(printable_cells(std::move(header))) {}

void TextTable::add_row(std::vector<std::string> cells) {
  rows_.push_back(printable_cells(std::move(cells)));
}

std::string TextTable::render(const std::string& indent) const {
  std::vector<const std::vector<std::string>*> lines;
  if (!header_.empty()) lines.push_back(&header_);
  for (const auto& row : rows_) lines.push_back(&row);

  const size_t columns = alignment_.size();
  std::vector<size_t> width(columns, 0);
  for (const auto* cells : lines) {
    const bool short_row = cells->size() < columns;
    for (size_t i = 0; i < std::min(cells->size(), columns); ++i) {
      if (short_row && i + 1 == cells->size()) break;  // runs on: does not size its column
      width[i] = std::max(width[i], display_width((*cells)[i]));
    }
  }

  std::string out;
  auto emit = [&](const std::vector<std::string>& cells) {
    std::string line = indent;
    for (size_t i = 0; i < cells.size(); ++i) {
      const std::string& cell = cells[i];
      const bool runs_on = i >= columns || (cells.size() < columns && i + 1 == cells.size());
      const size_t pad = runs_on ? 0 : width[i] - std::min(width[i], display_width(cell));
      if (i > 0) line += "  ";
      if (!runs_on && alignment_[i] == 'r') line.append(pad, ' ');
      line += cell;
      if (!runs_on && alignment_[i] != 'r') line.append(pad, ' ');
    }
    line.erase(line.find_last_not_of(' ') + 1);
    out += line + "\n";
  };
  for (const auto* cells : lines) {
    emit(*cells);
    if (cells == &header_) {
      size_t total = 0;
      for (size_t w : width) total += w;
      out += indent + std::string(total + 2 * (columns - 1), '-') + "\n";
    }
  }
  return out;
}

}  // namespace harness

#pragma once
// bench history add / check / show: runs kept in an SQLite file over many commits, and the changes
// along them (harness/report/history/). Exit codes: add and show 0; check 0, or 1 when the newest
// runs start a regression; 2 bad input (a corrupt or foreign database file included).
#include <string>
#include <vector>

#include "harness/errors.h"
#include "harness/report/history/check.h"
#include "harness/report/history/store.h"

namespace harness {

struct HistoryOptions {
  std::string db;
  std::vector<std::string> reports;  // add
  history::RunLabels labels;         // add
  history::SeriesFilter filter;      // check, show
  history::CheckOptions check;       // check, show
  std::string format = "text";       // check: text, json; show: text, json, html
  std::string out;                   // show: empty is stdout
};

ExitCode run_history_add(const HistoryOptions& options);
ExitCode run_history_check(const HistoryOptions& options);
ExitCode run_history_show(const HistoryOptions& options);

}  // namespace harness

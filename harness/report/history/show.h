#pragma once
// bench history show: the history's series with their change points, as text, JSON (layout in
// reports/schema/history-v1.md) or one self-contained HTML page of trend charts (show_html.cpp).
#include <string>
#include <vector>

#include "harness/report/history/check.h"
#include "harness/report/history/store.h"
#include "harness/report/io/json_report.h"

namespace harness::history {

inline constexpr const char* kHistoryShowVersion = "1.3.0";

// Each takes the history's machine series (SeriesSet::Machine), and shows the changes check
// finds (check.h: all_findings).

// One line per series: its runs, first and last value, range, and each change with its commit.
std::string show_text(const std::vector<Series>& series, size_t runs, const CheckOptions& options,
                      const std::vector<Series>& machine = {});
// `sites`: the sites' series (SeriesSet::Sites): a count change point lists the lines it came
// with as "sites" (since 1.2.0).
ReportJson show_json(const std::vector<Series>& series, size_t runs, const CheckOptions& options,
                     const std::vector<Series>& sites = {}, const std::vector<Series>& machine = {});
// Per scenario, a chart per metric with one line per variant over the runs (commits on the x
// axis), change points marked; counts that never changed are listed, not drawn.
std::string show_html(const std::vector<Series>& series, size_t runs, const CheckOptions& options,
                      const std::string& source, const std::vector<Series>& machine = {});

}  // namespace harness::history

#pragma once
// The section of one scenario in the HTML report (html_report.h): its charts and tables. Internal
// to the report library; html_report.cpp assembles the page around it.
#include <string>
#include <vector>

#include "harness/report/model/result.h"

namespace harness::html {

// `base`: the same scenario in the base report (nullptr: none). `paired`: the page compares two
// reports, so rows say which side they are (a scenario only head has is still marked "head").
std::string scenario_section(const ScenarioResult& head, const ScenarioResult* base, bool paired);

// An HTML table, cells escaped; `alignment[i]` 'r': column i right-aligned (as TextTable).
std::string html_table(const std::vector<std::string>& header,
                       const std::vector<std::vector<std::string>>& rows,
                       const std::string& alignment = "");

}  // namespace harness::html

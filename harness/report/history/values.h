#pragma once
// What a history accepts, checked before anything is written: dates that exist, commits and
// branches without control characters, and report values that can be (counts and times finite,
// not negative, below 2^63; every scenario's variant once). Each refusal is an InputError naming
// the value.
#include <string>

#include "harness/report/history/store.h"
#include "harness/report/model/result.h"

namespace harness::history {

// The largest value kept: a 64-bit signed count, or a time in integer nanoseconds (292 years).
inline constexpr double kMaxHistoryValue = 9223372036854775807.0;

// An ISO 8601 date or date-time, with or without a UTC offset, as "YYYY-MM-DDTHH:MM:SSZ" (the
// form runs are ordered by); "" stays "". Throws InputError when it is not one, or names a day,
// hour, minute, second or offset that does not exist (2026-02-30, 24:00, 23:59:60, +25:00).
std::string utc_date(const std::string& iso);

// `text` with every control character (below 0x20, and 0x7f) as \xNN: for messages and output.
std::string escaped(const std::string& text);

// The run a report makes: commit and date from `labels` over its provenance, checked (a commit or
// branch with a control character, a missing or impossible date: InputError naming it).
Run run_of(const RunReport& report, const RunLabels& labels, const std::string& source);

// Throws InputError naming the report, scenario, variant, metric and value when a value
// history_metrics keeps cannot be (negative, not finite, kMaxHistoryValue or more), or when a
// scenario's variant (or a scenario) occurs twice.
void check_report_values(const RunReport& report, const std::string& source);

}  // namespace harness::history

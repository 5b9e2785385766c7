// What a history accepts (see values.h).
#include "harness/report/history/values.h"

#include <cmath>
#include <cstdio>
#include <ctime>
#include <set>
#include <sstream>
#include <utility>

#include "harness/errors.h"
#include "harness/report/text/format.h"

namespace harness::history {
namespace {

// The number written by text[pos, pos + n), all digits; -1 when it is not.
int digits(const std::string& text, size_t pos, size_t n) {
  if (pos + n > text.size()) return -1;
  int out = 0;
  for (size_t i = pos; i < pos + n; ++i) {
    if (text[i] < '0' || text[i] > '9') return -1;
    out = out * 10 + (text[i] - '0');
  }
  return out;
}

bool is_at(const std::string& text, size_t pos, char c) { return pos < text.size() && text[pos] == c; }

int days_in_month(int year, int month) {
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  return month == 2 && leap ? 29 : kDays[month - 1];
}

struct DateTime {
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  int offset_minutes = 0;
};

// "[T| ]HH:MM[:SS[.fraction]][Z|+HH:MM|-HH:MM]" from `pos`; false when it is not that.
bool parse_time(const std::string& iso, size_t pos, DateTime& t) {
  t.hour = digits(iso, pos + 1, 2);
  t.minute = digits(iso, pos + 4, 2);
  if (t.hour < 0 || !is_at(iso, pos + 3, ':') || t.minute < 0) return false;
  pos += 6;
  if (is_at(iso, pos, ':')) {
    if ((t.second = digits(iso, pos + 1, 2)) < 0) return false;
    pos += 3;
    if (is_at(iso, pos, '.')) {  // fractions of a second are dropped
      do ++pos; while (digits(iso, pos, 1) >= 0);
    }
  }
  if (is_at(iso, pos, 'Z')) return pos + 1 == iso.size();
  if (is_at(iso, pos, '+') || is_at(iso, pos, '-')) {
    const int oh = digits(iso, pos + 1, 2), om = digits(iso, pos + 4, 2);
    if (oh < 0 || !is_at(iso, pos + 3, ':') || om < 0 || oh > 23 || om > 59) return false;
    t.offset_minutes = (iso[pos] == '-' ? -1 : 1) * (oh * 60 + om);
    pos += 6;
  }
  return pos == iso.size();
}

std::string number_text(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

// Why `value` of a kept metric cannot be; "" when it can.
std::string impossible(const HistoryMetric& m) {
  if (!m.value) return "";
  const double v = *m.value;
  if (!std::isfinite(v)) return "is not a finite number";
  if (v < 0) return std::string("is negative: a ") + (m.kind == MetricKind::Time ? "time" : "count") +
                    " cannot be";
  if (v >= kMaxHistoryValue) {
    return "is beyond any " + std::string(m.kind == MetricKind::Time ? "time in nanoseconds" : "count") +
           " a run can measure (2^63)";
  }
  return "";
}

}  // namespace

std::string utc_date(const std::string& iso) {
  if (iso.empty()) return iso;
  DateTime t;
  t.year = digits(iso, 0, 4);
  t.month = digits(iso, 5, 2);
  t.day = digits(iso, 8, 2);
  bool ok = t.year >= 1 && is_at(iso, 4, '-') && is_at(iso, 7, '-') && t.month >= 1 &&
            t.month <= 12 && t.day >= 1 && t.day <= days_in_month(t.year, t.month);
  if (ok && iso.size() > 10) ok = (iso[10] == 'T' || iso[10] == ' ') && parse_time(iso, 10, t);
  if (!ok || t.hour > 23 || t.minute > 59 || t.second > 59) {
    throw InputError("date '" + escaped(iso) +
                     "' is not a date that exists in ISO 8601 (YYYY-MM-DD[THH:MM[:SS]][Z|+HH:MM])");
  }
  std::tm tm{};
  tm.tm_year = t.year - 1900;
  tm.tm_mon = t.month - 1;
  tm.tm_mday = t.day;
  tm.tm_hour = t.hour;
  tm.tm_min = t.minute;
  tm.tm_sec = t.second;
  const std::time_t utc_time = timegm(&tm) - static_cast<std::time_t>(t.offset_minutes) * 60;
  std::tm utc{};
  gmtime_r(&utc_time, &utc);
  char out[32];
  std::strftime(out, sizeof out, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return out;
}

std::string escaped(const std::string& text) { return printable(text); }

Run run_of(const RunReport& report, const RunLabels& labels, const std::string& source) {
  const Provenance& p = report.provenance;
  Run run;
  run.commit = labels.commit.empty() ? p.git_sha : labels.commit;
  run.branch = labels.branch;
  if (run.commit.empty()) {
    throw InputError("report '" + source + "' names no commit (no git sha in its provenance): give --commit");
  }
  for (const auto& [what, value] : {std::pair{"commit", run.commit}, std::pair{"branch", run.branch}}) {
    if (escaped(value) != value) {
      throw InputError(std::string(what) + " '" + escaped(value) + "' of report '" + source +
                       "' holds a control character (a newline, an escape): not a " + what);
    }
  }
  if (labels.date.empty() && p.started_at.empty()) {
    throw InputError("report '" + source + "' has no start time in its provenance: give --date");
  }
  run.date = utc_date(labels.date.empty() ? p.started_at : labels.date);
  return run;
}

void check_report_values(const RunReport& report, const std::string& source) {
  std::set<std::pair<std::string, std::string>> seen;
  for (const ScenarioResult& s : report.scenarios) {
    for (const VariantResult& v : s.variants) {
      if (!seen.insert({s.name, v.name}).second) {
        throw InputError("report '" + source + "' holds variant '" + escaped(v.name) +
                         "' of scenario '" + escaped(s.name) + "' twice: which one to keep?");
      }
      if (!v.ran) continue;  // nothing of it is kept
      for (const HistoryMetric& m : history_metrics(v)) {
        const std::string why = impossible(m);
        if (why.empty()) continue;
        throw InputError("report '" + source + "': " + escaped(s.name) + " " + escaped(v.name) +
                         " " + escaped(m.metric) + " = " + number_text(*m.value) + " " + why);
      }
    }
  }
}

}  // namespace harness::history

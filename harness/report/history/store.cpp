// The SQLite history file (see store.h and reports/schema/history-v1.md).
#include "harness/report/history/store.h"

#include <sqlite3.h>

#include <cctype>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <set>
#include <sys/stat.h>

#include "harness/errors.h"
#include "harness/report/compare/site_diff.h"
#include "harness/report/model/pattern.h"

namespace harness::history {
namespace {

constexpr int kBusyTimeoutMs = 30000;

constexpr const char* kSchema = R"(
CREATE TABLE runs (
  id INTEGER PRIMARY KEY,
  identity TEXT NOT NULL UNIQUE,
  commit_sha TEXT NOT NULL,
  branch TEXT NOT NULL,
  date TEXT NOT NULL,
  started_at TEXT NOT NULL,
  git_dirty INTEGER NOT NULL,
  device TEXT NOT NULL,
  instrument TEXT NOT NULL,
  build_type TEXT NOT NULL,
  tool_version TEXT NOT NULL,
  hostname TEXT NOT NULL,
  source TEXT NOT NULL
);
CREATE INDEX runs_by_date ON runs (date, id);
CREATE TABLE metrics (
  run_id INTEGER NOT NULL REFERENCES runs (id),
  scenario TEXT NOT NULL,
  variant TEXT NOT NULL,
  metric TEXT NOT NULL,
  unit TEXT NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN ('count', 'time')),
  value REAL,
  PRIMARY KEY (scenario, variant, metric, run_id)
) WITHOUT ROWID;
)";

bool starts(const std::string& text, const char* prefix) { return starts_with(text, prefix); }

class Statement {
 public:
  Statement(sqlite3* db, const std::string& sql, const std::string& path) : db_(db), path_(path) {
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt_, nullptr) != SQLITE_OK) fail();
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& bind(int i, const std::string& text) {
    sqlite3_bind_text(stmt_, i, text.c_str(), -1, SQLITE_TRANSIENT);
    return *this;
  }
  Statement& bind(int i, int64_t value) {
    sqlite3_bind_int64(stmt_, i, value);
    return *this;
  }
  Statement& bind(int i, std::optional<double> value) {
    if (value) {
      sqlite3_bind_double(stmt_, i, *value);
    } else {
      sqlite3_bind_null(stmt_, i);
    }
    return *this;
  }
  bool step() {  // true: a row
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc != SQLITE_DONE) fail();
    return false;
  }
  void run() {
    step();
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
  std::string text(int col) const {
    const unsigned char* t = sqlite3_column_text(stmt_, col);
    return t ? reinterpret_cast<const char*>(t) : "";
  }
  int64_t integer(int col) const { return sqlite3_column_int64(stmt_, col); }
  std::optional<double> number(int col) const {
    if (sqlite3_column_type(stmt_, col) == SQLITE_NULL) return std::nullopt;
    return sqlite3_column_double(stmt_, col);
  }

 private:
  [[noreturn]] void fail() const {
    throw InputError("history database '" + path_ + "': " + sqlite3_errmsg(db_));
  }
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
  std::string path_;
};

// The first 16 bytes of every SQLite database file.
bool has_sqlite_header(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[16] = {};
  in.read(magic, sizeof magic);
  return in.gcount() == 16 && std::string(magic, 16) == std::string("SQLite format 3\0", 16);
}

}  // namespace

std::string utc_date(const std::string& iso) {
  if (iso.empty()) return iso;
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, sec = 0, used = 0;
  const char* text = iso.c_str();
  const int fields = std::sscanf(text, "%4d-%2d-%2d%n", &y, &mo, &d, &used);
  auto bad = [&]() -> InputError {
    return InputError("date '" + iso + "' is not ISO 8601 (YYYY-MM-DD[THH:MM[:SS]][Z|+HH:MM])");
  };
  if (fields != 3 || used != 10 || mo < 1 || mo > 12 || d < 1 || d > 31) throw bad();
  size_t pos = 10;
  int offset_min = 0;
  if (pos < iso.size() && (iso[pos] == 'T' || iso[pos] == ' ')) {
    int n = 0;
    if (std::sscanf(text + pos + 1, "%2d:%2d%n", &h, &mi, &n) != 2 || n != 5) throw bad();
    pos += 6;
    if (pos < iso.size() && iso[pos] == ':') {
      if (std::sscanf(text + pos + 1, "%2d%n", &sec, &n) != 1 || n != 2) throw bad();
      pos += 3;
      if (pos < iso.size() && iso[pos] == '.') {  // fractions of a second are dropped
        ++pos;
        while (pos < iso.size() && std::isdigit(static_cast<unsigned char>(iso[pos]))) ++pos;
      }
    }
    if (pos < iso.size() && iso[pos] == 'Z') {
      ++pos;
    } else if (pos < iso.size() && (iso[pos] == '+' || iso[pos] == '-')) {
      int oh = 0, om = 0;
      if (std::sscanf(text + pos + 1, "%2d:%2d%n", &oh, &om, &n) != 2 || n != 5) throw bad();
      offset_min = (iso[pos] == '-' ? -1 : 1) * (oh * 60 + om);
      pos += 6;
    }
  }
  if (pos != iso.size() || h > 23 || mi > 59 || sec > 60) throw bad();
  std::tm tm{};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = sec;
  const std::time_t t = timegm(&tm) - static_cast<std::time_t>(offset_min) * 60;
  std::tm utc{};
  gmtime_r(&t, &utc);
  char out[32];
  std::strftime(out, sizeof out, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return out;
}

const char* to_string(MetricKind kind) { return kind == MetricKind::Count ? "count" : "time"; }

std::vector<HistoryMetric> history_metrics(const VariantResult& variant) {
  std::vector<HistoryMetric> out;
  for (const Measurement& m : variant.per_step) {
    if (m.unit == "ns" || m.unit == "ratio" || m.unit == "rank") continue;
    if (starts(m.name, "host_memory.")) continue;
    out.push_back({"per_step." + m.name, m.unit, MetricKind::Count, m.value});
  }
  for (const Measurement& m : variant.total) {
    if (starts(m.name, "memory.")) out.push_back({"total." + m.name, m.unit, MetricKind::Count, m.value});
  }
  for (const Measurement& m : variant.timing) {
    if (m.name == "step_time.median" || m.name == "step_cpu_time.median") {
      out.push_back({"timing." + m.name, "ns", MetricKind::Time, m.value});
    }
  }
  for (const SiteRow& r : site_rows(variant)) {
    out.push_back({std::string(kSiteSeriesPrefix) + (r.sync ? "sync" : "copy") + "\t" + r.phase +
                       "\t" + r.what + "\t" + r.frame + "\t" + r.library + "\t" + r.allowed,
                   "count", MetricKind::Count, r.per_step});
  }
  return out;
}

std::string report_identity(const std::string& compact_json) {
  uint64_t hash = 14695981039346656037ull;
  for (unsigned char c : compact_json) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(hash));
  return out;
}

Store::Store(const std::string& path, bool writable) : path_(path) {
  struct stat st {};
  const bool exists = ::stat(path.c_str(), &st) == 0;
  if (exists && S_ISDIR(st.st_mode)) throw InputError("history database '" + path + "' is a directory");
  if (!exists && !writable) {
    throw InputError("history database '" + path + "' does not exist (bench history add makes it)");
  }
  // Checked before SQLite opens it for writing: nothing is written to a file that is not one.
  if (exists && st.st_size > 0 && !has_sqlite_header(path)) {
    throw InputError("'" + path + "' is not a bench history database (not an SQLite file)");
  }
  const int flags = writable ? SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE : SQLITE_OPEN_READONLY;
  if (sqlite3_open_v2(path.c_str(), &db_, flags | SQLITE_OPEN_NOMUTEX, nullptr) != SQLITE_OK) {
    const std::string why = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    db_ = nullptr;
    throw InputError("cannot open history database '" + path + "': " + why);
  }
  sqlite3_busy_timeout(db_, kBusyTimeoutMs);
  try {
    // Reads only, until the file is known to be ours; in one read transaction, so that a writer
    // creating the schema at the same time is seen either not at all or whole.
    Statement(db_, "BEGIN", path_).run();
    int64_t app = 0, schema = 0, objects = 0;
    try {
      app = single_integer("PRAGMA application_id");
      schema = single_integer("PRAGMA user_version");
      objects = single_integer("SELECT count(*) FROM sqlite_schema");
    } catch (...) {
      sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
      throw;
    }
    Statement(db_, "COMMIT", path_).run();
    if (app == 0 && objects == 0) {
      if (!writable) throw InputError("history database '" + path + "' is empty");
      create_schema_if_empty();
    } else if (app != kHistoryApplicationId) {
      throw InputError("'" + path + "' is not a bench history database (an SQLite database of "
                       "another application)");
    } else if (schema != kHistorySchemaVersion) {
      throw InputError("history database '" + path + "' has schema version " +
                       std::to_string(schema) + "; this bench reads version " +
                       std::to_string(kHistorySchemaVersion));
    }
    if (writable) {
      std::string verdict;
      {
        Statement check(db_, "PRAGMA quick_check", path_);
        if (check.step()) verdict = check.text(0);
      }
      if (verdict != "ok") throw InputError("history database '" + path + "' is corrupt: " + verdict);
      Statement(db_, "PRAGMA journal_mode = WAL", path_).run();
    }
  } catch (...) {
    sqlite3_close(db_);
    db_ = nullptr;
    throw;
  }
}

Store::~Store() { sqlite3_close(db_); }

void Store::create_schema_if_empty() {
  // Immediate: of two writers creating the file at once, the second waits and finds it made. The
  // schema and the application id are written before the switch to WAL, in the file itself.
  Statement(db_, "BEGIN IMMEDIATE", path_).run();
  try {
    if (single_integer("SELECT count(*) FROM sqlite_schema") == 0) {
      char* error = nullptr;
      if (sqlite3_exec(db_, kSchema, nullptr, nullptr, &error) != SQLITE_OK) {
        const std::string why = error ? error : "";
        sqlite3_free(error);
        throw InputError("history database '" + path_ + "': " + why);
      }
      Statement(db_, "PRAGMA application_id = " + std::to_string(kHistoryApplicationId), path_).run();
      Statement(db_, "PRAGMA user_version = " + std::to_string(kHistorySchemaVersion), path_).run();
    }
    Statement(db_, "COMMIT", path_).run();
  } catch (...) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

Store::Added Store::add(const RunReport& report, const std::string& identity,
                        const RunLabels& labels, const std::string& source) {
  const Provenance& p = report.provenance;
  Added out;
  out.run.commit = labels.commit.empty() ? p.git_sha : labels.commit;
  out.run.branch = labels.branch;
  out.run.date = utc_date(labels.date.empty() ? p.started_at : labels.date);
  if (out.run.commit.empty()) {
    throw InputError("report '" + source + "' names no commit (no git sha in its provenance): give --commit");
  }
  if (out.run.date.empty()) {
    throw InputError("report '" + source + "' has no start time in its provenance: give --date");
  }
  Statement(db_, "BEGIN IMMEDIATE", path_).run();
  try {
    bool found = false;
    {
      Statement existing(db_, "SELECT id, commit_sha, branch, date FROM runs WHERE identity = ?",
                         path_);
      existing.bind(1, identity);
      if ((found = existing.step())) {
        out.run = {existing.integer(0), existing.text(1), existing.text(2), existing.text(3)};
        out.run_id = out.run.id;
      }
    }
    if (found) {
      Statement(db_, "ROLLBACK", path_).run();
      return out;
    }
    Statement run(db_,
                  "INSERT INTO runs (identity, commit_sha, branch, date, started_at, git_dirty, "
                  "device, instrument, build_type, tool_version, hostname, source) "
                  "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                  path_);
    run.bind(1, identity).bind(2, out.run.commit).bind(3, out.run.branch).bind(4, out.run.date);
    run.bind(5, p.started_at).bind(6, int64_t{p.git_dirty}).bind(7, p.device).bind(8, p.instrument);
    run.bind(9, p.build_type).bind(10, p.tool_version).bind(11, p.hostname).bind(12, source);
    run.run();
    out.run_id = out.run.id = sqlite3_last_insert_rowid(db_);
    Statement metric(db_,
                     "INSERT INTO metrics (run_id, scenario, variant, metric, unit, kind, value) "
                     "VALUES (?, ?, ?, ?, ?, ?, ?)",
                     path_);
    for (const ScenarioResult& s : report.scenarios) {
      for (const VariantResult& v : s.variants) {
        if (!v.ran) continue;  // a failed variant has no figures to trend
        std::set<std::string> seen;
        for (const HistoryMetric& m : history_metrics(v)) {
          if (!seen.insert(m.metric).second) continue;
          metric.bind(1, out.run_id).bind(2, s.name).bind(3, v.name).bind(4, m.metric);
          metric.bind(5, m.unit).bind(6, std::string(to_string(m.kind))).bind(7, m.value);
          metric.run();
        }
      }
    }
    Statement(db_, "COMMIT", path_).run();
  } catch (...) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
  out.added = true;
  return out;
}

int64_t Store::single_integer(const std::string& sql) const {
  Statement query(db_, sql, path_);
  if (!query.step()) return 0;
  return query.integer(0);
}

size_t Store::run_count() const { return static_cast<size_t>(single_integer("SELECT count(*) FROM runs")); }

std::vector<Series> Store::series(const SeriesFilter& filter, bool sites) const {
  Statement rows(db_,
                 "SELECT m.scenario, m.variant, m.metric, m.unit, m.kind, m.value, r.id, "
                 "r.commit_sha, r.branch, r.date FROM metrics m JOIN runs r ON r.id = m.run_id "
                 "WHERE (?1 = '' OR m.scenario = ?1) AND (?2 = '' OR r.branch = ?2) "
                 "ORDER BY m.scenario, m.variant, m.metric, r.date, r.id",
                 path_);
  rows.bind(1, filter.scenario).bind(2, filter.branch);
  std::vector<Series> out;
  while (rows.step()) {
    const std::string scenario = rows.text(0), variant = rows.text(1), metric = rows.text(2);
    if (starts(metric, kSiteSeriesPrefix) != sites) continue;
    if (!filter.metric_glob.empty() && !glob_match(filter.metric_glob, metric) &&
        !glob_match(filter.metric_glob, metric.substr(metric.find('.') + 1))) {
      continue;
    }
    if (out.empty() || out.back().scenario != scenario || out.back().variant != variant ||
        out.back().metric != metric) {
      Series s;
      s.scenario = scenario;
      s.variant = variant;
      s.metric = metric;
      s.unit = rows.text(3);
      s.kind = rows.text(4) == "time" ? MetricKind::Time : MetricKind::Count;
      out.push_back(std::move(s));
    }
    out.back().points.push_back(
        {Run{rows.integer(6), rows.text(7), rows.text(8), rows.text(9)}, rows.number(5)});
  }
  return out;
}

}  // namespace harness::history

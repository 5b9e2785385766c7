// The SQLite history file (see store.h and reports/schema/history-v1.md).
#include "harness/report/history/store.h"

#include <sqlite3.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

#include "harness/errors.h"
#include "harness/report/compare/site_diff.h"
#include "harness/report/history/values.h"
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

// The first 100 bytes of an SQLite database file: its header; empty when shorter.
std::string sqlite_header(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char header[100] = {};
  in.read(header, sizeof header);
  return in.gcount() == sizeof header ? std::string(header, sizeof header) : std::string();
}

bool has_sqlite_header(const std::string& header) {
  return header.compare(0, 16, std::string("SQLite format 3\0", 16)) == 0;
}

// Journalled in WAL mode: the header's read and write versions are 2.
bool in_wal_mode(const std::string& header) { return header.size() > 19 && header[18] == 2; }

// Why a path that exists cannot be a history database, or "".
std::string not_a_database_file(mode_t mode) {
  if (S_ISDIR(mode)) return "is a directory";
  if (S_ISFIFO(mode)) return "is a FIFO";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "is a device";
  if (S_ISSOCK(mode)) return "is a socket";
  if (!S_ISREG(mode)) return "is not a regular file";
  return "";
}

// The directory a file lies in.
std::string directory_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

off_t size_or_zero(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? st.st_size : 0;
}

// An SQLite URI of `path` that reads it as immutable: no locks, no side files.
std::string immutable_uri(const std::string& path) {
  std::string out = "file:";
  for (const char c : path) {
    if (c == '%' || c == '?' || c == '#') {
      char hex[4];
      std::snprintf(hex, sizeof hex, "%%%02X", static_cast<unsigned char>(c));
      out += hex;
    } else {
      out += c;
    }
  }
  return out + "?immutable=1";
}

}  // namespace

bool is_machine_metric(const std::string& metric) {
  return metric == kMachineProbeMetric || metric == kCpuWaitMetric;
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
    const std::string path = "timing." + m.name;
    if (m.name == "step_time.median" || m.name == "step_cpu_time.median" || path == kMachineProbeMetric) {
      out.push_back({path, "ns", MetricKind::Time, m.value});
    } else if (path == kCpuWaitMetric) {
      out.push_back({path, "ratio", MetricKind::Time, m.value});
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
  const std::string not_file = exists ? not_a_database_file(st.st_mode) : "";
  if (!not_file.empty()) throw InputError("history database '" + path + "' " + not_file);
  if (!exists && !writable) {
    throw InputError("history database '" + path + "' does not exist (bench history add makes it)");
  }
  // Checked before SQLite opens it for writing: nothing is written to a file that is not one.
  if (exists && st.st_size > 0 && !has_sqlite_header(sqlite_header(path))) {
    throw InputError("'" + path + "' is not a bench history database (not an SQLite file)");
  }
  open(writable);
  try {
    check_ours(writable);
  } catch (...) {
    sqlite3_close(db_);
    db_ = nullptr;
    throw;
  }
}

void Store::open(bool writable) {
  std::string name = path_;
  int flags = writable ? SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE : SQLITE_OPEN_READONLY;
  // A reader of a history an older bench left in WAL mode needs its -shm file, made beside it;
  // where it cannot be made, the database file alone is the history when its WAL holds nothing.
  if (!writable && in_wal_mode(sqlite_header(path_)) && ::access((path_ + "-shm").c_str(), F_OK) != 0 &&
      ::access(directory_of(path_).c_str(), W_OK) != 0) {
    if (size_or_zero(path_ + "-wal") > 0) {
      throw InputError("history database '" + path_ + "' has writes in its WAL file that cannot be "
                       "read from this read-only directory (bench history add there applies them)");
    }
    name = immutable_uri(path_);
    flags |= SQLITE_OPEN_URI;
  }
  // A write stopped mid-way (a `history add` killed at a CI job's time limit) leaves a hot
  // journal, which SQLite rolls back at the next read -- a write: a reader that may write opens
  // the file for writing for that (nothing else is written); one that may not is told what to do.
  const std::string journal = path_ + "-journal";
  if (!writable && size_or_zero(journal) > 0) {
    if (::access(path_.c_str(), W_OK) == 0 && ::access(directory_of(path_).c_str(), W_OK) == 0) {
      flags = SQLITE_OPEN_READWRITE;
    } else {
      throw InputError("history database '" + path_ + "' has an unfinished write (its journal '" +
                       journal + "', left by a `bench history add` that stopped while writing): "
                       "reading it rolls that write back, which needs write access to the file "
                       "and its directory; run `bench history check` there once as a user who "
                       "may write it");
    }
  }
  if (sqlite3_open_v2(name.c_str(), &db_, flags | SQLITE_OPEN_NOMUTEX, nullptr) != SQLITE_OK) {
    const std::string why = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    db_ = nullptr;
    throw InputError("cannot open history database '" + path_ + "': " + why);
  }
  sqlite3_busy_timeout(db_, kBusyTimeoutMs);
}

void Store::check_ours(bool writable) {
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
    if (!writable) throw InputError("history database '" + path_ + "' is empty");
    create_schema_if_empty();
  } else if (app != kHistoryApplicationId) {
    throw InputError("'" + path_ + "' is not a bench history database (an SQLite database of "
                     "another application)");
  } else if (schema != kHistorySchemaVersion) {
    throw InputError("history database '" + path_ + "' has schema version " +
                     std::to_string(schema) + "; this bench reads version " +
                     std::to_string(kHistorySchemaVersion));
  }
  if (!writable) return;
  std::string verdict;
  {
    Statement check(db_, "PRAGMA quick_check", path_);
    if (check.step()) verdict = check.text(0);
  }
  if (verdict != "ok") throw InputError("history database '" + path_ + "' is corrupt: " + verdict);
  // The rollback journal (a history written in WAL mode by an older bench is turned back; while
  // another connection holds it, SQLite refuses, and a later add does it).
  sqlite3_exec(db_, "PRAGMA journal_mode = DELETE", nullptr, nullptr, nullptr);
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
  out.run = run_of(report, labels, source);
  check_report_values(report, source);
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

std::vector<Series> Store::series(const SeriesFilter& filter, SeriesSet set) const {
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
    const SeriesSet of = starts(metric, kSiteSeriesPrefix) ? SeriesSet::Sites
                         : is_machine_metric(metric)        ? SeriesSet::Machine
                                                            : SeriesSet::Judged;
    if (of != set) continue;
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

#pragma once
// The history of runs: one SQLite file (schema: reports/schema/history-v1.md) that `bench history
// add` fills from reports and `check` / `show` read as series, one per (scenario, variant, metric).
//
// What is kept of a report: its provenance (commit, branch, date, device, ...), and for every
// variant that ran, its per-step counts and device memory levels (exact: any change is a change)
// and its median step times (noisy: change points decide). Host memory levels are left out: they
// vary from run to run of one build.
//
// A file that is not a history database (not SQLite, corrupt, or another application's, a FIFO or
// a device) is an InputError and is never written: it is checked before the first write, and
// without blocking. Writers are safe side by side: a busy timeout, one immediate transaction per
// add. The journal is SQLite's rollback journal, so that a reader only reads: no side files, and
// a history in a read-only directory can be read (a history that an older bench left in WAL mode
// is turned back by its next add; until then, where its side files cannot be made, it is read as
// immutable when its WAL holds nothing).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "harness/report/model/result.h"

struct sqlite3;

namespace harness::history {

inline constexpr int kHistorySchemaVersion = 1;            // PRAGMA user_version
inline constexpr int32_t kHistoryApplicationId = 0x626E6368;  // PRAGMA application_id: "bnch"

enum class MetricKind { Count, Time };
const char* to_string(MetricKind kind);  // "count", "time"

// What `add` takes from the command line over the report's provenance.
struct RunLabels {
  std::string commit;  // empty: the report's git sha
  std::string branch;
  std::string date;  // ISO 8601; empty: the report's started_at
};

struct Run {
  int64_t id = 0;
  std::string commit;
  std::string branch;
  std::string date;
};

struct Point {
  Run run;
  std::optional<double> value;  // null: not measured in that run
};

struct Series {
  std::string scenario;
  std::string variant;
  std::string metric;  // a report metric path: "per_step.d2h.count", "timing.step_time.median"
  std::string unit;
  MetricKind kind = MetricKind::Count;
  std::vector<Point> points;  // oldest first: by date, then by the order they were added
};

// A variant's sites by line (site_diff.h) are kept as count series too, one per site, named
// "sites.<sync|copy>\t<phase>\t<what>\t<frame>\t<library>\t<allowed>" with the count per step: `check`
// names the lines a count change came with. They are not series of their own to judge or show.
inline constexpr const char* kSiteSeriesPrefix = "sites.";

// The machine's state during each variant, from its report (report schema 1.4 and 1.6): the
// median of its machine probe and the share of time its threads waited for a CPU. `check` reads
// them to tell a step time the machine explains from the code's; not series to judge or show.
inline constexpr const char* kMachineProbeMetric = "timing.machine_probe.median";
inline constexpr const char* kCpuWaitMetric = "timing.cpu_wait.share";
bool is_machine_metric(const std::string& metric);

// Which series Store::series reads.
enum class SeriesSet {
  Judged,   // the metrics check and show judge
  Sites,    // kSiteSeriesPrefix
  Machine,  // kMachineProbeMetric, kCpuWaitMetric
};

struct SeriesFilter {
  std::string scenario;     // empty: all
  std::string metric_glob;  // empty: all (pattern.h's glob)
  std::string branch;       // empty: all
};

// The measurements of a variant the history keeps, as (metric path, unit, kind, value).
struct HistoryMetric {
  std::string metric;
  std::string unit;
  MetricKind kind;
  std::optional<double> value;
};
std::vector<HistoryMetric> history_metrics(const VariantResult& variant);

class Store {
 public:
  // Read-only: the file must exist. Writable: it is created when missing (or empty).
  // Throws InputError naming the file when it is not a history database of this schema.
  Store(const std::string& path, bool writable);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  struct Added {
    int64_t run_id = 0;
    bool added = false;  // false: this report (same identity) was already there
    Run run;
  };
  // Adds the report as one run; `identity` names the report's content (see report_identity).
  // Throws InputError, writing nothing, when a value cannot be (values.h).
  Added add(const RunReport& report, const std::string& identity, const RunLabels& labels,
            const std::string& source);

  size_t run_count() const;
  std::vector<Series> series(const SeriesFilter& filter, SeriesSet set = SeriesSet::Judged) const;

 private:
  void open(bool writable);
  void check_ours(bool writable);
  void create_schema_if_empty();
  int64_t single_integer(const std::string& sql) const;  // the first column of the first row
  std::string path_;
  sqlite3* db_ = nullptr;
};

// A report's identity: 64-bit FNV-1a of its compact JSON as hex, so that the same report added
// twice is recognised however it was indented.
std::string report_identity(const std::string& compact_json);

}  // namespace harness::history

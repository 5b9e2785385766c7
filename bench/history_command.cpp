#include "bench/history_command.h"

#include <iostream>

#include "harness/report/history/show.h"
#include "harness/report/history/values.h"
#include "harness/report/io/input_file.h"
#include "harness/report/io/json_report.h"

namespace harness {
namespace {

struct ReadReport {
  std::string path;
  RunReport report;
  std::string identity;
};

ReadReport read_report(const std::string& path) {
  const std::string text = read_input_file(path, "report");
  ReadReport out{path, parse_report_text(text, path), ""};
  out.identity = history::report_identity(ReportJson::parse(text).dump());
  return out;
}

}  // namespace

ExitCode run_history_add(const HistoryOptions& o) {
  // Every report is read and checked, its labels and values, before the database is opened for
  // writing: a refused one leaves nothing written, not even a new file.
  std::vector<ReadReport> reports;
  for (const std::string& path : o.reports) reports.push_back(read_report(path));
  history::RunLabels labels = o.labels;
  labels.date = history::utc_date(labels.date);
  for (const ReadReport& r : reports) {
    history::run_of(r.report, labels, r.path);
    history::check_report_values(r.report, r.path);
  }
  history::Store store(o.db, /*writable=*/true);
  for (const ReadReport& r : reports) {
    const history::Store::Added added = store.add(r.report, r.identity, labels, r.path);
    std::cerr << "bench history add: " << r.path << (added.added ? " -> run " : " already in the history as run ")
              << added.run_id << " (commit " << added.run.commit.substr(0, 12)
              << (added.run.branch.empty() ? "" : " on " + added.run.branch) << ", "
              << added.run.date << ")\n";
  }
  return ExitCode::Ok;
}

ExitCode run_history_check(const HistoryOptions& o) {
  const history::Store store(o.db, /*writable=*/false);
  const std::vector<history::Series> series = store.series(o.filter);
  if (series.empty()) {
    throw InputError("history database '" + o.db + "' has no series" +
                     (o.filter.scenario.empty() && o.filter.metric_glob.empty() ? "" : " matching the filters"));
  }
  history::SeriesFilter of_variants = o.filter;  // every site of the variants checked
  of_variants.metric_glob.clear();
  const std::vector<history::Series> sites = store.series(of_variants, history::SeriesSet::Sites);
  const std::vector<history::Series> machine = store.series(of_variants, history::SeriesSet::Machine);
  const history::CheckResult result =
      history::check_history(series, store.run_count(), o.check, sites, machine);
  if (o.format == "json") {
    ReportJson out = history::show_json(series, result.runs, o.check, sites, machine);
    out["failed"] = result.failed();
    std::cout << out.dump(2) << "\n";
  } else {
    std::cout << history::check_text(result, o.check) << std::flush;
  }
  return result.failed() ? ExitCode::GateFailed : ExitCode::Ok;
}

ExitCode run_history_show(const HistoryOptions& o) {
  check_writable_destination(o.out, "--out");
  const history::Store store(o.db, /*writable=*/false);
  const std::vector<history::Series> series = store.series(o.filter);
  history::SeriesFilter of_variants = o.filter;
  of_variants.metric_glob.clear();
  const std::vector<history::Series> machine = store.series(of_variants, history::SeriesSet::Machine);
  const size_t runs = store.run_count();
  std::string text;
  if (o.format == "json") {
    text = history::show_json(series, runs, o.check, {}, machine).dump(2) + "\n";
  } else if (o.format == "html") {
    text = history::show_html(series, runs, o.check, o.db, machine);
  } else {
    text = history::show_text(series, runs, o.check, machine);
  }
  if (o.out.empty()) {
    std::cout << text << std::flush;
  } else {
    write_file_atomically(o.out, text);
    std::cerr << "bench history show: " << series.size() << " series written to " << o.out << "\n";
  }
  return ExitCode::Ok;
}

}  // namespace harness

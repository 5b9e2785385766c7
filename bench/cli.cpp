#include "bench/cli.h"

#include <CLI/CLI.hpp>
#include <c10/util/Exception.h>

#include <sys/stat.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "bench/compare_command.h"
#include "bench/history_command.h"
#include "bench/merge_command.h"
#include "bench/run.h"
#include "harness/errors.h"
#include "harness/interrupt.h"
#include "harness/scenario.h"
#include "harness/variant_runner.h"

namespace harness {
namespace {

// "zero_broadcast: 2, engine_reuse: 2, ...; the others 1", from the registered scenarios.
std::string default_ranks() {
  std::string out;
  for (const ScenarioInfo* info : ScenarioRegistry::instance().all()) {
    const int world = info->factory()->default_world_size();
    if (world > 1) out += (out.empty() ? "" : ", ") + info->name + ": " + std::to_string(world);
  }
  return out.empty() ? "1 for every scenario" : out + "; the others 1";
}

// An empty path would silently mean no output (or no input): refused, as `python -m
// harness_sim run` refuses it ("--out: an empty path").
const CLI::Validator kNotEmpty(
    [](std::string& path) { return path.empty() ? std::string("an empty path") : std::string(); },
    "", "not empty");

// A number flag's value must be a finite number: CLI11's Range lets NaN through (every comparison
// with it is false), and a NaN threshold passes every regression.
const CLI::Validator kFinite(
    [](std::string& text) {
      char* end = nullptr;
      const double value = std::strtod(text.c_str(), &end);
      return end != text.c_str() && std::isfinite(value) ? std::string()
                                                          : "'" + text + "' is not a finite number";
    },
    "", "finite");

// What names one output file: "-" (stdout), or the path made absolute with its symlinks resolved;
// "" for a device (/dev/null), which any number of outputs may share.
std::string output_identity(const std::string& path) {
  if (path == "-") return path;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISCHR(st.st_mode)) return "";
  namespace fs = std::filesystem;
  std::error_code error;
  fs::path at = fs::absolute(path, error);
  // A symlink names its target, whether the target exists yet or not (a dangling link is
  // written through too, see write_file_atomically).
  for (int hops = 0; hops < 40 && fs::is_symlink(at, error); ++hops) {
    const fs::path target = fs::read_symlink(at, error);
    if (error) break;
    at = target.is_absolute() ? target : at.parent_path() / target;
  }
  const fs::path resolved = fs::weakly_canonical(at, error);
  return error ? at.lexically_normal().string() : resolved.string();
}

// Two outputs on one path would silently replace one with the other: refused before anything runs
// (InputError, exit 2), in the words of `python -m harness_sim run`.
void check_distinct_outputs(const std::vector<std::pair<const char*, std::string>>& outputs) {
  std::vector<std::pair<const char*, std::string>> seen;  // option, identity
  for (const auto& [option, path] : outputs) {
    if (path.empty()) continue;
    const std::string identity = output_identity(path);
    if (identity.empty()) continue;
    for (const auto& [other, other_identity] : seen) {
      if (other_identity == identity) {
        throw InputError(std::string(other) + " and " + option + " name one file, " + path +
                         ": each output needs its own");
      }
    }
    seen.emplace_back(option, identity);
  }
}

void define_flags(CLI::App& app, BenchOptions& o) {
  app.add_option("-s,--scenario", o.scenarios, "Scenario to run (repeatable; `all`: every one); --list shows them");
  app.add_option("-d,--device", o.device, "auto (cuda if usable, else sim), sim, cuda or cpu")
      ->check(CLI::IsMember({"auto", "sim", "cuda", "cpu"}))
      ->capture_default_str();
  app.add_option("--compute", o.compute,
                 "values (default): sim computes every op; shapes: sim runs each op's meta "
                 "function only (no memory behind tensors; values read by the host are zeros), "
                 "counted the same: for models at full size (docs/full-size.md)")
      ->check(CLI::IsMember({"values", "shapes"}))
      ->capture_default_str();
  app.add_option("-p,--preset", o.run.preset,
                 "small (CI-sized), seed (the original report's sizes), large (1 GiB of "
                 "parameters: sharded_setup), llama_tiny and llama3_8b (a Llama-shaped "
                 "transformer: sharded_setup, engine_reuse; llama3_8b on sim with --compute "
                 "shapes)")
      ->check(CLI::IsMember({"small", "seed", "large", "llama_tiny", "llama3_8b"}))
      ->capture_default_str();
  app.add_option("-v,--variant", o.run.variant_filters,
                 "Only variants matching this glob, e.g. 'resume_*/foreach' (repeatable)");
  app.add_option("--steps", o.run.steps, "Measured steps (default: the preset's)")
      ->check(CLI::Range(1, 1000000));
  app.add_option("-o,--out", o.json_out, "Write the JSON report (schema v1) to this file")
      ->check(kNotEmpty);
  app.add_option("--markdown", o.markdown_out, "Write a markdown summary to this file")
      ->check(kNotEmpty);
  app.add_option("--html", o.html_out,
                 "Write a self-contained HTML page (charts of counts by phase, scaling, step "
                 "times, memory; gate outcomes; with --baseline, base and head side by side) to "
                 "this file")
      ->check(kNotEmpty);
  app.add_option("--trace", o.trace_out,
                 "Write a trace (phases, variants, steps, device events) to this file (chrome) or "
                 "directory (kineto)")
      ->check(kNotEmpty);
  app.add_option("--trace-format", o.trace_format,
                 "chrome: one Chrome/Perfetto trace file, ranks merged; kineto: one file per "
                 "rank in the --trace directory, shaped as PyTorch's profiler writes (for HTA)")
      ->check(CLI::IsMember({"chrome", "kineto"}));
  app.add_option("--gbench-out", o.gbench_out,
                 "Write the run in Google Benchmark's JSON format (compare.py, "
                 "github-action-benchmark, Bencher) to this file")
      ->check(kNotEmpty);
  app.add_flag("--gbench-repetitions", o.gbench_repetitions,
               "In --gbench-out, one entry per measured step plus mean/median/stddev aggregates "
               "(for compare.py's U test)");
  app.add_option("-g,--gate", o.gates, "Evaluate this gate file; exit 1 if a rule fails (repeatable)")
      ->check(kNotEmpty);
  app.add_option("--expect", o.expect,
                 "Check the run's sync and copy sites by line against this expectations file "
                 "(docs/expectations.md); exit 1 on a site not in it or above its count")
      ->check(kNotEmpty)
      ->check(CLI::ExistingFile);
  app.add_option("--write-expectations", o.write_expectations,
                 "Write the run's sync and copy sites by line, with their counts per step, as an "
                 "expectations file to edit and commit")
      ->check(kNotEmpty);
  app.add_option("--baseline", o.baseline,
                 "Baseline report for the gates' baseline rules (and --html's side-by-side "
                 "charts)")
      ->check(kNotEmpty);
  app.add_flag("--strict", o.strict,
               "A statistical time rule that cannot decide (too few samples) fails its gate");
  app.add_flag("--allow-missing", o.allow_missing,
               "A gate rule for a scenario or variant this run left out is skipped (by default it "
               "fails: a gate passes only on what was counted)");
  app.add_option("--nproc", o.nproc,
                 "Start this many local ranks (torchrun-style) for every scenario; default: each "
                 "scenario at its own world size (" + default_ranks() + ")")
      ->check(CLI::Range(1, 64));
  app.add_option("--timeout", o.timeout_s,
                 "Seconds a rank waits for the others (rendezvous, each collective) before it "
                 "fails the run")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str();
  app.add_option("--repetitions", o.repetitions,
                 "Run the scenarios this many times, each in a fresh process, and report every "
                 "step of all (counts: the first's). bench compare and baseline time rules decide "
                 "a time between two runs only with 3 or more a side: one process's steps cannot "
                 "show the shift between runs (memory layout, clocks, caches)")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  app.add_flag("--instrument-overhead", o.run.instrument_overhead,
               "Run every second measured step with the instrument off and report both step "
               "times and their ratio, with a 95% interval (counts then cover the instrumented "
               "steps only; the training scenarios measure 60 steps unless --steps is given)");
  app.add_flag("--nvtx-only", o.nvtx_only,
               "Count nothing and leave CUPTI to the profiler this runs under (nsys profile): "
               "phases, variants and steps are still NVTX ranges; counts are reported as null")
      ->excludes("--instrument-overhead");
  app.add_flag("-l,--list", o.list, "List scenarios and their variants");
  app.add_flag("--phases", o.phases,
               "Also show, per variant, each phase's counts per step and median host time");
  app.add_flag("-q,--quiet", o.run.quiet, "No progress lines on stderr");
  app.set_version_flag("--version", std::string("bench ") + HARNESS_VERSION);
}

CLI::App* define_compare(CLI::App& app, CompareOptions& o) {
  CLI::App* compare = app.add_subcommand(
      "compare",
      "Compare two reports: every count and time of every variant side by side, what changed and "
      "the verdict. Exit codes: 0 nothing regressed, 1 a regression (or a failing gate), 2 bad "
      "input.");
  compare->add_option("base", o.base, "The base report (e.g. from the target branch)")
      ->required()
      ->check(kNotEmpty);
  compare->add_option("head", o.head, "The head report (e.g. from the pull request)")
      ->required()
      ->check(kNotEmpty);
  compare->add_option("-f,--format", o.format,
                      "text, markdown (for $GITHUB_STEP_SUMMARY), json or html (the --html page, "
                      "base and head side by side)")
      ->check(CLI::IsMember({"text", "markdown", "json", "html"}))
      ->capture_default_str();
  compare->add_option("-o,--out", o.out, "Write to this file (atomically) instead of stdout")
      ->check(kNotEmpty);
  compare->add_option("--html", o.html,
                      "Also write the HTML page (base and head side by side in every chart, what "
                      "changed, the gates) to this file")
      ->check(kNotEmpty);
  compare->add_option("-g,--gate", o.gates,
                      "Evaluate this gate file on the pair: head is the run, base the baseline "
                      "(repeatable)")
      ->check(kNotEmpty);
  compare->add_flag("--strict", o.strict, "Inconclusive time comparisons fail too");
  compare->add_flag("--allow-missing", o.allow_missing,
                    "A gate rule for a scenario or variant head left out is skipped (by default "
                    "it fails)");
  compare->add_flag("--all", o.all, "Text: show unchanged rows too");
  compare->add_flag("--phase-times", o.phase_times,
                    "Also test each phase's host time and the sync wait time per step "
                    "(diagnostic: short phases and waits are mostly timer noise)");
  compare->add_flag("--host-memory", o.host_memory,
                    "Also give host memory levels of scenarios on ranks a verdict (by default "
                    "informational: Gloo's and autograd's threads make them vary from run to run)");
  compare->add_option("--alpha", o.time.alpha, "Significance of the time test")
      ->check(kFinite)->check(CLI::Range(1e-9, 0.5))
      ->capture_default_str();
  compare->add_option("--max-ratio", o.time.max_ratio,
                      "A time regresses when slower than this ratio (and significant)")
      ->check(kFinite)->check(CLI::Range(1.0, 1000.0))
      ->capture_default_str();
  compare->add_option("--min-samples", o.time.min_samples,
                      "Timed steps each side needs, else the time is inconclusive")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  compare->add_option("--min-processes", o.time.min_processes,
                      "Fresh processes each side needs (bench --repetitions) for a time verdict, "
                      "else inconclusive: one process's steps cannot show the shift between runs")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  return compare;
}

struct HistoryCommands {
  CLI::App* add = nullptr;
  CLI::App* check = nullptr;
  CLI::App* show = nullptr;
};

HistoryCommands define_history(CLI::App& app, HistoryOptions& o) {
  CLI::App* history = app.add_subcommand(
      "history",
      "Runs over many commits in one SQLite file, and what changed along them: counts at any "
      "change, median step times by change-point detection (E-Divisive with a t-test, as Apache "
      "Otava).");
  history->require_subcommand(1);
  HistoryCommands c;
  c.add = history->add_subcommand(
      "add", "Add reports as runs (the same report twice is a no-op). Exit codes: 0, 2 bad input "
             "(a corrupt or foreign database file is never written).");
  c.add->add_option("reports", o.reports, "Report files (JSON, schema v1)")
      ->required()
      ->check(kNotEmpty);
  c.add->add_option("--commit", o.labels.commit, "The runs' commit (default: the report's git sha)");
  c.add->add_option("--branch", o.labels.branch, "The runs' branch");
  c.add->add_option("--date", o.labels.date,
                    "The runs' date, ISO 8601 (default: the report's start time); runs are "
                    "ordered by it");
  c.check = history->add_subcommand(
      "check", "Find the changes along each series. Exit codes: 0, 1 the newest runs start a "
               "regression, 2 bad input.");
  c.show = history->add_subcommand("show", "Every series with its changes: text, JSON or an HTML "
                                           "page of trend charts.");
  for (CLI::App* sub : {c.add, c.check, c.show}) {
    sub->add_option("--db", o.db, "The history file (SQLite)")->required()->check(kNotEmpty);
  }
  for (CLI::App* sub : {c.check, c.show}) {
    sub->add_option("--scenario", o.filter.scenario, "Only this scenario's series");
    sub->add_option("--metric", o.filter.metric_glob,
                    "Only metrics matching this glob, e.g. 'per_step.sync.*' or 'timing.*'");
    sub->add_option("--branch", o.filter.branch, "Only runs of this branch");
    sub->add_option("--since", o.check.since,
                    "A regression fails the check when it starts in the newest N runs of its "
                    "series; older changes are listed")
        ->check(CLI::Range(1, 1000000))
        ->capture_default_str();
    sub->add_option("--max-pvalue", o.check.change_points.max_pvalue,
                    "Significance of a change in step time (t-test)")
        ->check(kFinite)->check(CLI::Range(1e-12, 0.5))
        ->capture_default_str();
    sub->add_option("--min-magnitude", o.check.change_points.min_magnitude,
                    "A change in step time smaller than this relative change is dropped")
        ->check(kFinite)->check(CLI::Range(0.0, 100.0))
        ->capture_default_str();
    sub->add_option("--fdr", o.check.fdr,
                    "False discovery rate of step-time changes over all series of the check "
                    "(Benjamini-Hochberg)")
        ->check(kFinite)->check(CLI::Range(1e-12, 0.5))
        ->capture_default_str();
    sub->add_option("--min-runs", o.check.min_runs,
                    "Runs at a new step time, not explained by the machine probe or a wait for "
                    "a CPU, that a step-time regression needs")
        ->check(CLI::Range(1, 1000))
        ->capture_default_str();
    sub->add_option("--window", o.check.change_points.window, "Runs per change-point window")
        ->check(CLI::Range(4, 100000))
        ->capture_default_str();
  }
  c.check->add_option("-f,--format", o.format, "text or json")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  c.show->add_option("-f,--format", o.format, "text, json or html (trend charts)")
      ->check(CLI::IsMember({"text", "json", "html"}))
      ->capture_default_str();
  c.show->add_option("-o,--out", o.out, "Write to this file (atomically) instead of stdout")
      ->check(kNotEmpty);
  return c;
}

}  // namespace

int bench_main(int argc, char** argv) {
  BenchOptions options;
  options.argv.assign(argv, argv + argc);
  CLI::App app{"bench: counts the copies, syncs, launches and collectives of training scenarios, "
               "writes versioned reports and evaluates CI gates.\n"
               "Exit codes: 0 gates pass, 1 a gate failed, 2 bad usage or input, 3 a scenario "
               "failed, 130 / 143 stopped by SIGINT / SIGTERM (no report written)."};
  app.footer(
      "Examples:\n  bench --scenario resume_adam --device sim --gate reports/gates/resume_adam.json\n"
      "  bench --scenario fused_adam --device sim --html fused_adam.html\n"
      "  bench compare base.json head.json --format markdown >> \"$GITHUB_STEP_SUMMARY\"\n"
      "  bench history add report.json --db history.db && bench history check --db history.db");
  define_flags(app, options);
  CompareOptions compare_options;
  CLI::App* compare = define_compare(app, compare_options);
  MergeOptions merge_options;
  CLI::App* merge = app.add_subcommand(
      "merge",
      "Merge reports of one command run in separate processes into one, as --repetitions does "
      "(to interleave two builds process by process, then compare). Exit codes: 0, 2 bad input.");
  merge->add_option("out", merge_options.out, "The merged report")->required()->check(kNotEmpty);
  merge->add_option("reports", merge_options.reports, "The reports, in the order they ran")
      ->required();
  HistoryOptions history_options;
  const HistoryCommands history = define_history(app, history_options);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    std::cerr << "bench: error: " << e.what() << "\nRun 'bench --help' for usage.\n";
    return static_cast<int>(ExitCode::BadInput);
  }
  try {
    if (compare->parsed()) {
      check_distinct_outputs({{"--out", compare_options.out}, {"--html", compare_options.html}});
      return static_cast<int>(run_compare(compare_options));
    }
    if (merge->parsed()) return static_cast<int>(run_merge(merge_options));
    if (history.add->parsed()) return static_cast<int>(run_history_add(history_options));
    if (history.check->parsed()) return static_cast<int>(run_history_check(history_options));
    if (history.show->parsed()) return static_cast<int>(run_history_show(history_options));
    check_distinct_outputs({{"--out", options.json_out},
                            {"--markdown", options.markdown_out},
                            {"--html", options.html_out},
                            {"--trace", options.trace_out},
                            {"--gbench-out", options.gbench_out},
                            {"--write-expectations", options.write_expectations}});
    install_stop_handlers();
    return static_cast<int>(run_bench(options));
  } catch (const Interrupted& stop) {
    std::cerr << "bench: interrupted by " << signal_name(stop.signal)
              << "; stopped without writing a report\n";
    return stop.exit_code();
  } catch (const InputError& e) {
    std::cerr << "bench: error: " << e.what() << "\n";
    return static_cast<int>(ExitCode::BadInput);
  } catch (const c10::Error& e) {
    std::cerr << "bench: error: " << first_line(e.what()) << "\n";
    return static_cast<int>(ExitCode::ScenarioFailed);
  } catch (const std::exception& e) {
    std::cerr << "bench: error: " << e.what() << "\n";
    return static_cast<int>(ExitCode::ScenarioFailed);
  }
}

}  // namespace harness

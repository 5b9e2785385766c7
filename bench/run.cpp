#include "bench/run.h"

#include <ATen/Parallel.h>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>

#include "bench/gbench_context.h"
#include "bench/launcher.h"
#include "bench/provenance.h"
#include "bench/repetitions.h"
#include "bench/temp_dir.h"
#include "bench/trace_output.h"
#include "harness/instrument/instrument.h"
#include "harness/instrument/phase.h"
#include "harness/instrument/sim/sim_device.h"
#include "harness/interrupt.h"
#include "harness/measure.h"
#include "harness/report/gates/expectations.h"
#include "harness/report/gates/gate.h"
#include "harness/report/io/gbench_json.h"
#include "harness/report/html/html_report.h"
#include "harness/report/io/json_report.h"
#include "harness/report/model/pattern.h"
#include "harness/report/model/rank_merge.h"
#include "harness/report/text/reporter.h"
#include "harness/runtime/dist/communicator.h"
#include "harness/runtime/dist/rank_env.h"
#include "harness/variant_runner.h"

namespace harness {
namespace {


std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

using ChosenScenarios = std::vector<std::pair<const ScenarioInfo*, std::unique_ptr<Scenario>>>;

// Every --variant filter must match some variant of the chosen scenarios.
void check_variant_filters(const BenchOptions& o, const ChosenScenarios& chosen) {
  for (const std::string& filter : o.run.variant_filters) {
    std::vector<std::string> known;
    bool matched = false;
    for (const auto& [info, scenario] : chosen) {
      for (const std::string& name : scenario->variant_names(o.run)) {
        matched = matched || glob_match(filter, name);
        known.push_back(name);
      }
    }
    if (!matched) {
      throw InputError("--variant '" + filter + "' matches no variant (variants: " + join(known) +
                       ")");
    }
  }
}

// Ranks other than 0 hand their result to rank 0 through the rendezvous store; rank 0 merges
// them (see rank_merge.h). Returns the merged result on rank 0, the rank's own elsewhere.
ScenarioResult gather_rank_results(runtime::Communicator& comm, const RunReport& shell,
                                   const ScenarioResult& mine, size_t index) {
  const std::string key = "result/" + std::to_string(index) + "/rank";
  if (comm.rank() != 0) {
    RunReport one = shell;
    one.scenarios = {mine};
    comm.store_set(key + std::to_string(comm.rank()), to_json(one).dump());
    return mine;
  }
  std::vector<ScenarioResult> per_rank = {mine};
  for (int r = 1; r < comm.world_size(); ++r) {
    const std::string source = "rank " + std::to_string(r) + "'s result";
    per_rank.push_back(parse_rank_result(comm.store_get(key + std::to_string(r)), source));
  }
  return merge_rank_results(per_rank);
}

// The ranks bench starts for these scenarios when --nproc does not say: the largest default world
// size. Scenarios of one process run on rank 0 alone; any other world size must be that one.
int scenario_world_size(const ChosenScenarios& chosen) {
  int world = 1;
  for (const auto& [info, scenario] : chosen) world = std::max(world, scenario->default_world_size());
  for (const auto& [info, scenario] : chosen) {
    const int own = scenario->default_world_size();
    if (own != 1 && own != world) {
      throw InputError("scenario " + info->name + " runs on " + std::to_string(own) +
                       " ranks and another chosen one on " + std::to_string(world) +
                       ": run them in separate commands, or give --nproc for all of them");
    }
  }
  return world;
}

int list_scenarios(const RunOptions& run) {
  for (const ScenarioInfo* info : ScenarioRegistry::instance().all()) {
    std::cout << info->name << "\n  " << info->description << "\n  variants:";
    for (const std::string& v : info->factory()->variant_names(run)) std::cout << " " << v;
    std::cout << "\n";
  }
  return 0;
}

// What a run reads before it starts: the scenarios and every input file.
struct RunInputs {
  ChosenScenarios chosen;
  GateCatalog catalog;  // what the gates may name
  std::vector<GateFile> gates;
  std::optional<ExpectationsFile> expectations;
  std::optional<RunReport> baseline;
};

// Every input, read and checked before anything runs.
RunInputs check_inputs(const BenchOptions& o, ScenarioRegistry& registry) {
  RunInputs inputs;
  ChosenScenarios& chosen = inputs.chosen;
  std::vector<std::string> names;  // "all": every registered scenario
  for (const std::string& name : o.scenarios) {
    std::vector<std::string> these = {name};
    if (name == "all") {
      these.clear();
      for (const ScenarioInfo* info : registry.all()) these.push_back(info->name);
    }
    for (const std::string& n : these) {
      if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
    }
  }
  for (const std::string& name : names) {
    const ScenarioInfo* info = registry.find(name);
    if (info == nullptr) {
      std::vector<std::string> known;
      for (const ScenarioInfo* i : registry.all()) known.push_back(i->name);
      throw InputError("unknown scenario '" + name + "' (known: " + join(known) + ")");
    }
    chosen.emplace_back(info, info->factory());
  }
  check_variant_filters(o, chosen);
  test_step_slowdown();  // a malformed HARNESS_TEST_SLOW_STEPS is bad input, said now
  for (const std::string& path : o.gates) inputs.gates.push_back(parse_gate_file(path));
  if (!inputs.gates.empty()) inputs.catalog = known_scenarios(o.run, o.nproc);
  for (const GateFile& gate : inputs.gates) check_gate_names(gate, inputs.catalog);
  if (!o.expect.empty()) inputs.expectations = parse_expectations_file(o.expect);
  check_writable_destination(o.write_expectations, "--write-expectations");
  if (!o.baseline.empty()) inputs.baseline = read_report_file(o.baseline);
  check_writable_destination(o.json_out, "--out");
  check_writable_destination(o.markdown_out, "--markdown");
  check_writable_destination(o.html_out, "--html");
  RunTrace::check_destination(o);
  check_writable_destination(o.gbench_out, "--gbench-out");
  if (o.gbench_repetitions && o.gbench_out.empty()) {
    throw InputError("--gbench-repetitions needs --gbench-out FILE");
  }

  return inputs;
}

// What follows a run, on the leader, once its report is complete: the other outputs, the gates
// and expectations, the list of what was written, and the exit code.
ExitCode finish_run(const BenchOptions& o, const RunReport& report, RunInputs& inputs,
                    std::ostream& console) {
  std::vector<GateFile>& gates = inputs.gates;
  std::optional<ExpectationsFile>& expectations = inputs.expectations;
  std::optional<RunReport>& baseline = inputs.baseline;
  if (!o.gbench_out.empty()) {
    write_file_atomically(
        o.gbench_out,
        gbench_json(report, machine_gbench_context(report.provenance), o.gbench_repetitions)
                .dump(2) +
            "\n");
  }

  bool gates_passed = true;
  std::vector<GateOutcome> outcomes;
  for (const GateFile& gate : gates) {
    outcomes.push_back(evaluate_gate(gate, report, baseline ? &*baseline : nullptr,
                                     GateScope{&inputs.catalog, o.allow_missing}));
    console << format_gate_outcome(outcomes.back(), o.strict);
    gates_passed = gates_passed && outcomes.back().passed(o.strict);
  }
  if (expectations) {
    const ExpectationCheck check = check_expectations(*expectations, report);
    console << check.text(o.strict);
    gates_passed = gates_passed && !check.failed(o.strict);
  }
  if (!o.write_expectations.empty()) {
    write_file_atomically(o.write_expectations,
                          expectations_json(report, "written by bench from a run; give each "
                                                    "site a reason").dump(2) + "\n");
  }
  if (!o.markdown_out.empty()) {  // after the gates, whose outcomes it ends with
    std::string markdown = render_markdown(report);
    for (const GateOutcome& g : outcomes) markdown += format_gate_outcome_markdown(g, o.strict);
    write_file_atomically(o.markdown_out, markdown);
  }
  if (!o.html_out.empty()) {  // after the gates, whose outcomes it shows
    HtmlPage page;
    page.head = &report;
    page.base = baseline ? &*baseline : nullptr;
    page.head_source = o.json_out.empty() ? "this run" : o.json_out;
    page.base_source = o.baseline;
    page.gates = std::move(outcomes);
    page.strict = o.strict;
    write_file_atomically(o.html_out, render_html(page));
  }

  // What was written, as bench compare says it (an output that failed has thrown before this).
  std::vector<std::string> written;
  for (const std::string* out : {&o.json_out, &o.markdown_out, &o.html_out, &o.trace_out,
                                 &o.gbench_out, &o.write_expectations}) {
    if (!out->empty()) written.push_back(*out == "-" ? "stdout" : *out);
  }
  // (A repetition's report is the first process's to announce, merged.)
  if (!written.empty() && !repetition_options(o)) {
    std::cerr << "bench: wrote " << join(written) << "\n";
  }

  std::vector<std::string> failed;
  for (const ScenarioResult& s : report.scenarios) {
    for (const VariantResult& v : s.variants) {
      if (!v.ran && !v.failed_as_expected()) failed.push_back(s.name + " " + v.name + ": " + v.error);
    }
  }
  if (!failed.empty()) {
    std::cerr << "bench: " << failed.size() << " variant(s) failed to run:\n";
    for (const std::string& f : failed) std::cerr << "  " << f << "\n";
    return ExitCode::ScenarioFailed;
  }
  return gates_passed ? ExitCode::Ok : ExitCode::GateFailed;
}
// An output written to stdout (`-o -`) has stdout to itself: the table and gate lines go to
// stderr then.
std::ostream& console_stream(const BenchOptions& o) {
  const bool stdout_taken = o.json_out == "-" || o.markdown_out == "-" || o.html_out == "-" ||
                            o.trace_out == "-" || o.gbench_out == "-";
  return stdout_taken ? std::cerr : std::cout;
}

// --repetitions N: the command in N fresh processes (repetitions.h), then the console table,
// the report and every other output from their merged report.
ExitCode report_repetitions(const BenchOptions& o, RunInputs& inputs) {
  const RunReport report = run_repetitions(o);
  std::ostream& console = console_stream(o);
  MultiReporter reporters;
  reporters.add(std::make_unique<ConsoleReporter>(console, o.phases));
  if (!o.json_out.empty()) reporters.add(std::make_unique<JsonReporter>(o.json_out));
  reporters.on_run_start(report.provenance);
  for (const ScenarioResult& scenario : report.scenarios) {
    reporters.on_scenario_start(scenario.name, scenario.variants.size());
    for (const VariantResult& v : scenario.variants) reporters.on_variant_done(scenario.name, v);
    reporters.on_scenario_done(scenario);
  }
  reporters.on_run_done(report);
  return finish_run(o, report, inputs, console);
}

}  // namespace

// Under --compute shapes no value was computed: a variant's correctness check compared
// placeholders, so it says nothing (reported as not checked, with why); a variant that failed
// may have failed on a placeholder (an object sent through a collective and read back), which
// its error says.
void mark_shapes_only(ScenarioResult& result) {
  for (VariantResult& v : result.variants) {
    if (!v.ran && !v.error.empty()) {
      v.error += " [--compute shapes: every value read back from the device is a placeholder "
                 "zero; a variant that needs one fails: run it with --compute values]";
    }
    if (!v.correctness.checked) continue;
    v.correctness = {false, false, "not checked: values not computed (--compute shapes); the "
                                   "check: " + v.correctness.detail};
  }
}

GateCatalog known_scenarios(const RunOptions& run, int nproc) {
  GateCatalog catalog;
  for (const ScenarioInfo* info : ScenarioRegistry::instance().all()) {
    const std::unique_ptr<Scenario> scenario = info->factory();
    std::vector<std::string>& names = catalog[info->name];
    names = scenario->variant_names(run);
    const int world = nproc > 0 ? nproc : scenario->default_world_size();
    if (world <= 1) continue;
    const size_t own = names.size();
    for (int r = 0; r < world; ++r) {
      for (size_t i = 0; i < own; ++i) names.push_back("rank" + std::to_string(r) + "/" + names[i]);
    }
  }
  return catalog;
}

ExitCode run_bench(const BenchOptions& given) {
  const BenchOptions o = repetition_options(given).value_or(given);
  ScenarioRegistry& registry = ScenarioRegistry::instance();
  if (!registry.duplicates().empty()) {
    throw InputError("scenario names registered more than once: " + join(registry.duplicates()));
  }
  if (o.list) return static_cast<ExitCode>(list_scenarios(o.run));
  if (o.scenarios.empty()) {
    throw InputError("no scenario given (--scenario NAME; --list shows the scenarios)");
  }

  // Everything that can be checked before running is checked now.
  RunInputs inputs = check_inputs(o, registry);
  ChosenScenarios& chosen = inputs.chosen;

  // Ranks: this process is one when torchrun's variables are set (by torchrun or by our own
  // launcher); otherwise it starts them when asked to or when a scenario needs them.
  const std::optional<runtime::RankEnv> rank_env = runtime::rank_env_from_environment();
  if (o.repetitions > 1) {
    if (rank_env) {
      throw InputError("--repetitions starts fresh processes of bench, and this process is rank " +
                       std::to_string(rank_env->rank) + " of " +
                       std::to_string(rank_env->world_size) +
                       " (WORLD_SIZE is set): repeat the torchrun command instead");
    }
    return report_repetitions(o, inputs);
  }
  if (!rank_env) {
    const int world = scenario_world_size(chosen);
    if (o.nproc > 0 || world > 1) {
      const int nproc = o.nproc > 0 ? o.nproc : world;
      const int devices = runtime::rank_device_count(o.device);
      if (devices > 0 && nproc > devices) {
        throw InputError((o.nproc > 0 ? "--nproc " : "the scenarios' ") + std::to_string(nproc) +
                         " ranks: each rank owns one device and --device " + o.device + " has " +
                         std::to_string(devices) + " on this host");
      }
      return launch_local_ranks(without_nproc(o.argv), nproc,
                                /*world_from_scenarios=*/o.nproc == 0);
    }
  } else if (o.nproc > 0) {
    throw InputError("--nproc is for starting ranks; this process already is rank " +
                     std::to_string(rank_env->rank) + " of " +
                     std::to_string(rank_env->world_size) + " (WORLD_SIZE is set)");
  }
  const bool leader = !rank_env || rank_env->is_leader();

  if (o.compute == "shapes") {
    if (o.device != "sim") {
      throw InputError("--compute shapes is a mode of the sim device: give --device sim (--device " +
                       o.device + " computes every op)");
    }
    sim::set_compute(sim::Compute::kShapes);  // before the first sim tensor
  }
  const runtime::DeviceSelection device = runtime::select_device(o.device);
  if (o.nvtx_only && !phases_are_nvtx_ranges()) {
    throw InputError("--nvtx-only: this build has no NVTX (configure it where the nvtx3 headers "
                     "are: a CUDA toolkit, or scripts/setup.sh fetches them)");
  }
  const std::unique_ptr<Instrument> instrument =
      make_instrument(device.kind, o.nvtx_only ? CountingMode::NvtxOnly : CountingMode::On);
  std::unique_ptr<runtime::Communicator> comm;
  if (rank_env) {
    comm = runtime::connect(*rank_env, device,
                            {std::chrono::milliseconds(int64_t{o.timeout_s} * 1000), ""});
  }

  RunReport report;
  report.provenance = make_provenance(o, device, *instrument);
  report.provenance.world_size = rank_env ? rank_env->world_size : 1;
  // Without LOCAL_WORLD_SIZE (a torchrun-like launcher that does not set it), every rank is taken
  // to be on this host.
  report.provenance.ranks_per_host =
      !rank_env ? 1 : rank_env->local_world_size > 0 ? rank_env->local_world_size : rank_env->world_size;
  report.provenance.cpu_count = usable_cpus();
  report.provenance.intra_op_threads = at::get_num_threads();
  report.warnings = trust_warnings(o, device, *instrument);
  const std::string crowded = oversubscription(report.provenance, report.provenance.world_size);
  if (!crowded.empty()) {
    report.warnings.push_back(crowded + " (the scenarios on ranks; bench compare: inconclusive)");
  }

  std::ostream& console = console_stream(o);
  MultiReporter reporters;
  if (leader) {
    reporters.add(std::make_unique<ConsoleReporter>(console, o.phases));
    if (!o.json_out.empty()) reporters.add(std::make_unique<JsonReporter>(o.json_out));
    // The markdown summary is written after the gates, whose outcomes it ends with.
  }
  reporters.on_run_start(report.provenance);

  // With ranks every rank records its own trace (process "rank <r>").
  std::optional<RunTrace> trace;
  if (!o.trace_out.empty()) trace.emplace(o, *instrument, device, rank_env, comm.get());
  const TempDir scratch("harness-");
  std::string shared_dir = scratch.path();
  if (comm) {
    if (comm->rank() == 0) comm->store_set("shared_dir", shared_dir);
    shared_dir = comm->store_get("shared_dir");
  }
  Progress progress(o.run.quiet || !leader);
  // Each scenario runs at its own world size when the ranks' number came from the scenarios'
  // defaults: those of one process run on rank 0 alone, after the others (so that no rank waits
  // in a collective while rank 0 is busy alone). --nproc or torchrun set it for every scenario.
  const char* from_scenarios = std::getenv(kWorldFromScenariosVariable);
  const bool solo_below = rank_env && from_scenarios && std::string(from_scenarios) == "1";
  std::vector<size_t> order;  // indices into `chosen`: every rank's scenarios first
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < chosen.size(); ++i) {
      const bool solo = solo_below && chosen[i].second->default_world_size() == 1;
      if (solo == (pass == 1)) order.push_back(i);
    }
  }
  std::vector<std::optional<ScenarioResult>> results(chosen.size());
  size_t gather_index = 0;
  for (size_t i : order) {
    throw_if_stopped();
    auto& [info, scenario] = chosen[i];
    const bool solo = solo_below && scenario->default_world_size() == 1;
    if (solo && !leader) {
      // This rank's part is over: rank 0 runs the rest alone (and merges chrome traces).
      if (trace) trace->finish(report.provenance, comm.get(), leader);
      break;
    }
    RunContext context{device, *instrument, o.run, progress, scratch.path(),
                       trace ? &trace->recorder() : nullptr};
    context.comm = solo ? nullptr : comm.get();
    context.shared_dir = shared_dir;
    context.rank = rank_env ? rank_env->rank : 0;
    context.local_rank = rank_env ? rank_env->local_rank : 0;
    reporters.on_scenario_start(info->name, scenario->variant_names(o.run).size());
    ScenarioResult result;
    try {
      result = scenario->run(context);
    } catch (const InputError&) {
      throw;
    } catch (const std::exception& e) {
      result.name = info->name;
      result.description = info->description;
      VariantResult failed;
      failed.name = "(scenario)";
      failed.error = first_line(e.what());
      result.variants.push_back(failed);
    }
    if (o.compute == "shapes") mark_shapes_only(result);
    if (context.comm) result = gather_rank_results(*comm, report, result, gather_index++);
    result.world_size = context.comm ? context.comm->world_size() : 1;
    if (!leader) continue;
    for (const VariantResult& v : result.variants) reporters.on_variant_done(result.name, v);
    reporters.on_scenario_done(result);
    results[i] = std::move(result);
  }
  throw_if_stopped();  // a stop during the last step: no report (nothing half-meant either)
  // The report lists the scenarios in the order they were asked for.
  for (auto& r : results) {
    if (r) report.scenarios.push_back(std::move(*r));
  }
  if (trace) trace->finish(report.provenance, comm.get(), leader);
  if (!leader) return ExitCode::Ok;  // rank 0 reports, for every rank
  reporters.on_run_done(report);
  return finish_run(o, report, inputs, console);
}

}  // namespace harness

// Sites by line between two runs (site_diff.h), the expectations contract (expectations.h) and
// the gate metric sync_sites.new: a line added, a line that moved, a count that rose, an entry
// that no longer occurs.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "harness/errors.h"
#include "harness/report/compare/site_diff.h"
#include "harness/report/gates/expectations.h"
#include "harness/report/gates/gate.h"

namespace harness {
namespace {

SyncSite item_at(const std::string& frame, int64_t count) {
  SyncSite s{"train.step", "aten::_local_scalar_dense", "item", count};
  s.frame = frame;
  s.library = "torch/_tensor.py:10 in item";
  return s;
}

RunReport run_of(std::vector<SyncSite> syncs, std::vector<CopySite> copies = {}) {
  VariantResult v;
  v.name = "steps";
  v.ran = true;
  v.measured_steps = 5;
  v.sync_sites = std::move(syncs);
  v.copy_sites = std::move(copies);
  ScenarioResult s;
  s.name = "train";
  s.variants.push_back(v);
  RunReport r;
  r.scenarios.push_back(s);
  return r;
}

TEST(SiteDiff, ANewLineIsAddedAMovedLineIsNotAChange) {
  const RunReport base = run_of({item_at("train.py:40 in step", 5)});
  // The line moved from 40 to 44 (code above it grew), and a new .item() at 47.
  const RunReport head = run_of({item_at("train.py:44 in step", 5), item_at("train.py:47 in step", 5)});
  const std::vector<SiteChange> changes = diff_sites(base, head);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].kind, SiteChange::Added);
  EXPECT_EQ(describe(changes[0]),
            "+1 sync/step at train.py:47 in step (torch/_tensor.py:10 in item) "
            "(aten::_local_scalar_dense, item) in train.step: new");
}

TEST(SiteDiff, SameLinePairsFirstThenLineOrder) {
  const RunReport base = run_of({item_at("train.py:40 in step", 5), item_at("train.py:60 in step", 5)});
  const RunReport head = run_of({item_at("train.py:60 in step", 10), item_at("train.py:41 in step", 5)});
  const std::vector<SiteChange> changes = diff_sites(base, head);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].kind, SiteChange::Changed);
  EXPECT_EQ(changes[0].frame, "train.py:60 in step");
  EXPECT_EQ(changes[0].base, 1);
  EXPECT_EQ(changes[0].head, 2);
}

TEST(SiteDiff, AnotherFunctionIsAnotherSiteAndCopiesAreSites) {
  const RunReport base = run_of({item_at("train.py:40 in step", 5)},
                                {{"train.step", "H2D", "blocking", "train.py:30 in step", "", 5, 80}});
  const RunReport head = run_of({item_at("train.py:40 in log", 5)});
  std::vector<std::string> described;
  for (const SiteChange& c : diff_sites(base, head)) described.push_back(describe(c));
  EXPECT_EQ(described,
            (std::vector<std::string>{
                "-1 copy/step at train.py:30 in step (blocking H2D) in train.step: gone",
                "+1 sync/step at train.py:40 in log (torch/_tensor.py:10 in item) "
                "(aten::_local_scalar_dense, item) in train.step: new",
                "-1 sync/step at train.py:40 in step (torch/_tensor.py:10 in item) "
                "(aten::_local_scalar_dense, item) in train.step: gone"}));
}

TEST(Expectations, UnexpectedAboveStaleAndAllowed) {
  const ExpectationsFile file = parse_expectations_text(R"({
    "expectations_version": 1,
    "sites": [
      {"scenario": "train", "variant": "steps", "site": "sync", "phase": "train.step",
       "what": "aten::_local_scalar_dense, item", "frame": "train.py:40 in step",
       "library": "torch/_tensor.py:10 in item", "per_step": 1, "reason": "the loss, logged"},
      {"scenario": "train", "variant": "steps", "site": "sync", "phase": "train.step",
       "what": "aten::nonzero, count", "frame": "train.py:20 in step", "per_step": 1}]})",
                                                        "expect.json");
  SyncSite allowed = item_at("train.py:90 in step", 50);
  allowed.allowed = "logging";
  // The expected line moved (40 -> 42) and syncs twice as often; one new line; one allowed.
  const RunReport head = run_of({item_at("train.py:42 in step", 10), item_at("train.py:50 in step", 5),
                                 allowed});
  const ExpectationCheck check = check_expectations(file, head);
  EXPECT_TRUE(check.failed(false));
  EXPECT_EQ(check.checked, 2u);
  EXPECT_EQ(check.allowed, 1u);
  ASSERT_EQ(check.unexpected.size(), 1u);
  EXPECT_NE(check.unexpected[0].find("1 sync/step at train.py:50 in step"), std::string::npos)
      << check.unexpected[0];
  ASSERT_EQ(check.above.size(), 1u);
  EXPECT_NE(check.above[0].find("2 sync/step at train.py:42 in step"), std::string::npos);
  EXPECT_NE(check.above[0].find("expected 1 (the loss, logged)"), std::string::npos);
  ASSERT_EQ(check.stale.size(), 1u);
  EXPECT_NE(check.stale[0].find("train.py:20 in step"), std::string::npos);

  // What the run writes passes against itself; only the stale entry fails when strict.
  const ExpectationsFile written =
      parse_expectations_text(expectations_json(head, "").dump(), "written.json");
  EXPECT_EQ(written.entries.size(), 2u);  // the allowed site is the program's to allow
  EXPECT_FALSE(check_expectations(written, head).failed(true));
}

TEST(Expectations, BadFilesNameTheProblem) {
  const auto message = [](const std::string& text) {
    try {
      parse_expectations_text(text, "e.json");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("{").find("not valid JSON"), std::string::npos);
  EXPECT_NE(message(R"({"sites": []})").find("expectations_version"), std::string::npos);
  EXPECT_NE(message(R"({"expectations_version": 1, "sites": [{"scenario": "a"}]})")
                .find("sites[0]: missing 'variant'"),
            std::string::npos);
  EXPECT_NE(message(R"({"expectations_version": 1, "sites": [{"scenario": "a", "variant": "b",
      "site": "sync", "phase": "p", "what": "w", "per_step": -1}]})")
                .find("'per_step' must be a number >= 0"),
            std::string::npos);
}

TEST(GateNewSites, FailsOnANewSyncSiteNamingItsLine) {
  const GateFile gate = parse_gate_text(R"({"gate_version": 1, "rules": [
      {"scenario": "*", "variant": "*", "metric": "sync_sites.new", "baseline": true}]})",
                                        "g.json");
  const RunReport base = run_of({item_at("train.py:40 in step", 5)});
  const RunReport same = run_of({item_at("train.py:41 in step", 5)});
  const RunReport more = run_of({item_at("train.py:40 in step", 5), item_at("train.py:47 in step", 5)});
  EXPECT_TRUE(evaluate_gate(gate, same, &base).passed());
  const GateOutcome failed = evaluate_gate(gate, more, &base);
  EXPECT_FALSE(failed.passed());
  ASSERT_EQ(failed.outcomes.size(), 1u);
  EXPECT_NE(failed.outcomes[0].message.find("1 new sync site: +1 sync/step at train.py:47 in step"),
            std::string::npos)
      << failed.outcomes[0].message;
  EXPECT_THROW(parse_gate_text(R"({"gate_version": 1, "rules": [
      {"scenario": "*", "variant": "*", "metric": "sync_sites.new", "max": 0}]})",
                               "g.json"),
               InputError);
}

EventSite event_at(const char* kind, const std::string& what, const std::string& frame,
                   int64_t count) {
  return {kind, "train.step", what, frame, "", count};
}

RunReport run_with_events(std::vector<SyncSite> syncs, std::vector<EventSite> events) {
  RunReport r = run_of(std::move(syncs));
  r.scenarios[0].variants[0].event_sites = std::move(events);
  r.scenarios[0].variants[0].per_step = {
      {"capture.blockers", static_cast<double>(r.scenarios[0].variants[0].sync_sites.size()),
       "count", ""},
      {"graph_break.count", static_cast<double>(r.scenarios[0].variants[0].event_sites.size()),
       "count", ""}};
  return r;
}

TEST(SiteDiff, ANewGraphBreakIsALineOfTheDiff) {
  const RunReport base = run_with_events({}, {});
  const RunReport head =
      run_with_events({}, {event_at(kGraphBreak, "Tensor.item()", "train.py:12 in fwd", 5)});
  const std::vector<SiteChange> changes = diff_sites(base, head);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(describe(changes[0]),
            "+1 graph_break/step at train.py:12 in fwd (Tensor.item()) in train.step: new");
  EXPECT_EQ(site_family(changes[0].sync, changes[0].event), "graph_break");
}

TEST(GateLines, ACaptureRuleThatFailsNamesTheLinesThatBlockCapture) {
  const GateFile gate = parse_gate_text(R"({"gate_version": 1, "rules": [
      {"scenario": "*", "variant": "*", "metric": "per_step.capture.blockers", "max": 0},
      {"scenario": "*", "variant": "*", "metric": "per_step.graph_break.count", "max": 0}]})",
                                        "g.json");
  EXPECT_TRUE(evaluate_gate(gate, run_with_events({}, {}), nullptr).passed());
  const GateOutcome failed = evaluate_gate(
      gate,
      run_with_events({item_at("train.py:40 in step", 5)},
                      {event_at(kGraphBreak, "Tensor.item()", "train.py:40 in step", 5)}),
      nullptr);
  ASSERT_EQ(failed.outcomes.size(), 2u);
  EXPECT_NE(failed.outcomes[0].message.find(
                "; at 1/step sync at train.py:40 in step (torch/_tensor.py:10 in item) "
                "(aten::_local_scalar_dense, item) in train.step"),
            std::string::npos)
      << failed.outcomes[0].message;
  EXPECT_NE(failed.outcomes[1].message.find(
                "; at 1/step graph_break at train.py:40 in step (Tensor.item()) in train.step"),
            std::string::npos)
      << failed.outcomes[1].message;
}

}  // namespace
}  // namespace harness

// bench compare's markdown and text on large and hostile comparisons: the size limit holds for
// every section (notes, regressions, sites, gates), and a name read from a report can neither
// break a line nor become HTML.
#include <gtest/gtest.h>

#include <string>

#include "harness/report/compare/run_compare.h"
#include "harness/report/text/format.h"
#include "harness/report/text/text_table.h"
#include "test_support.h"

namespace harness {
namespace {

ComparedMetric compared_row(const std::string& scenario, const std::string& variant,
                            Change change) {
  ComparedMetric m;
  m.scenario = scenario;
  m.variant = variant;
  m.metric = "per_step.sync.count";
  m.unit = "count";
  m.base = 0;
  m.head = 1;
  m.change = change;
  return m;
}

size_t occurrences(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

// Every section grown past the limit on its own: 400 scenarios' notes, 2000 regressions, 2000
// unchanged rows, 500 changed sites, a gate of 3000 rules, names of 10 kB.
RunComparison huge_comparison() {
  RunComparison c;
  c.base_source = "base.json";
  c.head_source = std::string(10000, 'h') + ".json";
  c.base.hostname = "ci-host";
  c.head.hostname = "runner-2";
  c.environment.push_back({"host", "ci-host", std::string(10000, 'r')});
  for (int s = 0; s < 400; ++s) {
    c.notes.push_back("scenario_" + std::to_string(s) +
                      " ran with another configuration: steps 10 -> 20, preset small -> seed");
  }
  for (int i = 0; i < 2000; ++i) {
    c.rows.push_back(compared_row("s", "regressed_" + std::to_string(i), Change::Regression));
    c.rows.push_back(compared_row("s", "same_" + std::to_string(i), Change::Unchanged));
  }
  c.rows.push_back(compared_row("s", std::string(10000, 'v'), Change::Improvement));
  for (int i = 0; i < 500; ++i) {
    SiteChange site;
    site.scenario = "s";
    site.variant = "v";
    site.kind = SiteChange::Added;
    site.what = "aten::_local_scalar_dense";
    site.frame = "train.py:" + std::to_string(i) + " in step";
    site.head = 1;
    c.sites.push_back(site);
  }
  GateOutcome gate;
  gate.source = "gates/ci.json";
  for (int i = 0; i < 3000; ++i) {
    RuleOutcome o;
    o.rule = "no new syncs";
    o.scenario = "s";
    o.variant = "v" + std::to_string(i);
    o.metric = "per_step.sync.count";
    o.status = i % 10 == 0 ? RuleStatus::Fail : RuleStatus::Pass;
    o.message = "actual 1 <= allowed 1";
    gate.outcomes.push_back(o);
  }
  c.gates.push_back(gate);
  return c;
}

TEST(CompareMarkdown, EverySectionStaysWithinTheLimit) {
  const RunComparison c = huge_comparison();
  const std::string md = comparison_markdown(c, /*strict=*/false);
  EXPECT_LE(md.size(), kMarkdownLimit);
  EXPECT_EQ(md.rfind("## bench compare: 2000 regressions, 1 improvement", 0), 0u) << md.substr(0, 200);
  // Notes: the first ones, then a count of the rest.
  EXPECT_CONTAINS(md, "> scenario_0 ran with another configuration");
  EXPECT_CONTAINS(md, "more notes; `bench compare --format json` lists them all.");
  EXPECT_EQ(md.find("scenario_399 ran"), std::string::npos);
  // Regressions first, the rest counted; long names clipped.
  EXPECT_CONTAINS(md, "| 🔴 | s | regressed_0 |");
  EXPECT_CONTAINS(md, " of them regressions); `bench compare --format json` has them all.");
  EXPECT_EQ(md.find(std::string(400, 'v')), std::string::npos);
  EXPECT_EQ(md.find(std::string(400, 'r')), std::string::npos);
  EXPECT_CONTAINS(md, "500 sites by line changed; `bench compare --format json` lists them.");
  // The gate comes last, its failing rules first; what does not fit is counted.
  const size_t gate_at = md.find("### Gate `gates/ci.json`: **FAILED**");
  ASSERT_NE(gate_at, std::string::npos);
  EXPECT_LT(md.find("rows left out"), gate_at);
  EXPECT_LT(md.find("| FAIL |", gate_at), md.size());
  EXPECT_CONTAINS(md.substr(gate_at), "rules of this gate left out to stay under the size limit");
}

TEST(CompareMarkdown, FailingRulesComeBeforePassingOnesWhenTheRoomIsShort) {
  RunComparison c = huge_comparison();
  c.rows.clear();
  c.notes.clear();
  c.sites.clear();
  const std::string md = comparison_markdown(c, false);
  EXPECT_LE(md.size(), kMarkdownLimit);
  EXPECT_EQ(occurrences(md, "| FAIL |"), 300u);  // every failing rule fits; passing ones fill up
  EXPECT_GT(occurrences(md, "| PASS |"), 0u);
  EXPECT_CONTAINS(md, "rules of this gate left out to stay under the size limit; ");
}

// The first regression is named however small the limit: a red summary always says what.
TEST(CompareMarkdown, TheFirstRegressionIsNamedAtAnyLimit) {
  const RunComparison c = huge_comparison();
  const std::string md = comparison_markdown(c, false, /*max_bytes=*/1000);
  EXPECT_CONTAINS(md, "| 🔴 | s | regressed_0 |");
  EXPECT_EQ(md.find("regressed_1 |"), std::string::npos);
  EXPECT_CONTAINS(md, "(1999 of them regressions)");
  EXPECT_CONTAINS(md, "(300 of them failing)");
}

RunComparison hostile_names() {
  RunComparison c;
  c.base_source = "base.json";
  c.head_source = "head\x1b[2J.json";
  c.head.hostname = std::string("host\0name", 9);
  c.notes.push_back("s ran with another configuration: <b>bold</b>\nnote: forged line");
  c.rows.push_back(compared_row("s\x1b[31m", std::string("fresh\0<b>x</b>\nREGRESSION", 26),
                                Change::Regression));
  c.rows.back().note = "why & <i>";
  SiteChange site;
  site.scenario = "s";
  site.variant = std::string("v\0<b>", 5);
  site.kind = SiteChange::Added;
  site.what = "aten::item";
  site.frame = "train.py:1 in <module>";
  site.head = 1;
  c.sites.push_back(site);
  return c;
}

bool has_control_character(const std::string& text, bool allow_line_breaks) {
  for (const char ch : text) {
    const auto u = static_cast<unsigned char>(ch);
    if (allow_line_breaks && ch == '\n') continue;
    if (u < 0x20 || u == 0x7f) return true;
  }
  return false;
}

TEST(CompareText, ControlCharactersInNamesAreEscaped) {
  const RunComparison c = hostile_names();
  const std::string text = comparison_text(c, /*all=*/true, /*strict=*/false);
  EXPECT_FALSE(has_control_character(text, /*allow_line_breaks=*/true)) << text;
  EXPECT_CONTAINS(text, "fresh\\x00<b>x</b>\\x0aREGRESSION");
  EXPECT_CONTAINS(text, "s\\x1b[31m");
  EXPECT_CONTAINS(text, "head: ");
  EXPECT_CONTAINS(text, "host\\x00name");
  EXPECT_CONTAINS(text, "head\\x1b[2J.json");
  EXPECT_CONTAINS(text, "<b>bold</b>\\x0anote: forged line");
  // Each line is one of the comparison's own: no line starts with the forged text.
  EXPECT_EQ(text.find("\nnote: forged line"), std::string::npos);
  EXPECT_EQ(text.find("\nREGRESSION"), std::string::npos);
}

TEST(CompareMarkdown, ControlCharactersAndHtmlInNamesAreEscaped) {
  const RunComparison c = hostile_names();
  const std::string md = comparison_markdown(c, false);
  EXPECT_FALSE(has_control_character(md, /*allow_line_breaks=*/true)) << md;
  EXPECT_EQ(md.find("<b>"), std::string::npos) << md;
  EXPECT_EQ(md.find("<i>"), std::string::npos) << md;
  EXPECT_CONTAINS(md, "fresh\\x00&lt;b&gt;x&lt;/b&gt; REGRESSION");
  EXPECT_CONTAINS(md, "why &amp; &lt;i&gt;");
  EXPECT_CONTAINS(md, "&lt;b&gt;bold&lt;/b&gt; note: forged line");
  EXPECT_CONTAINS(md, "host\\x00name");
  // In a code span entities would show as written: there only control characters are escaped.
  EXPECT_CONTAINS(md, "- `+1 sync/step at train.py:1 in <module>");
  EXPECT_CONTAINS(md, "**s v\\x00&lt;b&gt;**");
}

TEST(Format, PrintableAndMarkdownEscapes) {
  EXPECT_EQ(printable(std::string("a\0b\x1b\x7f\n\tc", 8)), "a\\x00b\\x1b\\x7f\\x0a\\x09c");
  EXPECT_EQ(printable("µs <b> | ok"), "µs <b> | ok");
  EXPECT_EQ(markdown_cell(std::string("a|b<c>&d\0\ne", 11)), "a\\|b&lt;c&gt;&amp;d\\x00 e");
  EXPECT_EQ(markdown_code("x <y>"), "`x <y>`");
  EXPECT_EQ(markdown_code("a`b"), "``a`b``");
  EXPECT_EQ(markdown_code("`a"), "`` `a ``");
  TextTable table({"name", "n"}, "lr");
  table.add_row({std::string("x\0\ny", 4), "1"});
  const std::string rendered = table.render();
  EXPECT_CONTAINS(rendered, "x\\x00\\x0ay  1");
  EXPECT_EQ(occurrences(rendered, "\n"), 3u);  // header, rule, one row
}

}  // namespace
}  // namespace harness

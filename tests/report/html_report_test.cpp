// The HTML report: well-formed (as XML: every element closed, attributes quoted, text escaped),
// self-contained, every chart mark of every variant present with the report's values in its data
// attributes, gates failing first, base and head side by side, and the same bytes on every render.
#include "harness/report/html/html_report.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "harness/report/gates/gate.h"
#include "harness/report/compare/run_compare.h"
#include "harness/report/html/svg.h"
#include "test_support.h"

namespace harness {
namespace {

struct Element {
  std::string name;
  std::map<std::string, std::string> attrs;  // values unescaped
  std::string text;                          // the text right after the start tag, unescaped
};

// The five entities the writer uses; anything else after '&' is an error.
bool read_entity(const std::string& s, size_t& i, std::string& out) {
  static const std::pair<const char*, char> entities[] = {
      {"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&#39;", '\''}};
  for (const auto& [name, c] : entities) {
    if (s.compare(i, std::string(name).size(), name) == 0) {
      out += c;
      i += std::string(name).size();
      return true;
    }
  }
  return false;
}

// Parses the page as an XML parser would and returns its elements in document order. Every
// problem (an unclosed or mismatched element, an unquoted attribute, a raw '<', '>' or '&' in text
// or values) is a test failure naming where.
std::vector<Element> parse_page(const std::string& html) {
  std::vector<Element> elements;
  std::vector<std::string> open;
  size_t i = 0;
  auto fail = [&](const std::string& why) {
    ADD_FAILURE() << why << " at offset " << i << ": " << html.substr(i, 80);
    i = html.size();
  };
  std::string* text = nullptr;
  while (i < html.size()) {
    if (html.compare(i, 9, "<!DOCTYPE") == 0) {
      i = html.find('>', i) + 1;
    } else if (html.compare(i, 2, "</") == 0) {
      const size_t end = html.find('>', i);
      const std::string name = html.substr(i + 2, end - i - 2);
      if (open.empty() || open.back() != name)
        return fail("closing </" + name + "> unopened"), elements;
      open.pop_back();
      i = end + 1;
      text = nullptr;
    } else if (html[i] == '<') {
      Element e;
      size_t j = i + 1;
      while (j < html.size() &&
             (std::isalnum(static_cast<unsigned char>(html[j])) || html[j] == '-')) {
        e.name += html[j++];
      }
      bool closed = false;
      while (true) {
        while (j < html.size() && html[j] == ' ') ++j;
        if (html.compare(j, 2, "/>") == 0) {
          j += 2;
          closed = true;
          break;
        }
        if (j < html.size() && html[j] == '>') {
          ++j;
          break;
        }
        const size_t eq = html.find('=', j);
        if (eq == std::string::npos || html[eq + 1] != '"')
          return fail("unquoted attribute"), elements;
        const std::string name = html.substr(j, eq - j);
        std::string value;
        j = eq + 2;
        while (j < html.size() && html[j] != '"') {
          if (html[j] == '<' || html[j] == '>') return fail("raw < or > in an attribute"), elements;
          if (html[j] == '&') {
            if (!read_entity(html, j, value)) return fail("bad entity in an attribute"), elements;
          } else {
            value += html[j++];
          }
        }
        ++j;
        if (e.attrs.count(name)) return fail("attribute " + name + " twice"), elements;
        e.attrs[name] = value;
      }
      if (!closed) open.push_back(e.name);
      elements.push_back(std::move(e));
      text = closed ? nullptr : &elements.back().text;
      i = j;
    } else if (html[i] == '&') {
      std::string decoded;
      if (!read_entity(html, i, decoded)) return fail("bad entity in text"), elements;
      if (text) *text += decoded;
    } else if (html[i] == '>') {
      return fail("raw > in text"), elements;
    } else {
      if (text) *text += html[i];
      ++i;
    }
  }
  if (!open.empty()) ADD_FAILURE() << "unclosed <" << open.back() << ">";
  return elements;
}

// The elements that have every one of `attrs`.
std::vector<Element> marks(const std::vector<Element>& elements,
                           const std::map<std::string, std::string>& attrs) {
  std::vector<Element> found;
  for (const Element& e : elements) {
    const bool all = std::all_of(attrs.begin(), attrs.end(), [&](const auto& a) {
      auto it = e.attrs.find(a.first);
      return it != e.attrs.end() && it->second == a.second;
    });
    if (all) found.push_back(e);
  }
  return found;
}

std::string render(const RunReport& report) {
  HtmlPage page;
  page.head = &report;
  return render_html(page);
}

double value_of(const VariantResult& v, const std::string& path) {
  const Measurement* m = find_metric(v, path);
  EXPECT_TRUE(m && m->value) << v.name << " has no " << path;
  return m && m->value ? *m->value : -1;
}

// fused_adam's scale variants: impl x tensors (numel 256), launches 7 per tensor for the loop.
RunReport scaling_report() {
  RunReport r = sample_report();
  ScenarioResult& s = r.scenarios.front();
  for (const char* impl : {"forloop", "fused"}) {
    for (int tensors : {10, 100, 1000}) {
      VariantResult v;
      v.name = std::string("scale/") + impl + "/tensors=" + std::to_string(tensors) + "/numel=256";
      v.axes = {{"impl", impl}, {"tensors", std::to_string(tensors)}, {"numel", "256"}};
      v.ran = true;
      v.measured_steps = 3;
      const double launches = std::string(impl) == "fused" ? 2 : 7.0 * tensors;
      v.per_step = {{"launch.count", launches, "count", ""}};
      v.timing = {{"step_time.median", 1000.0 * tensors, "ns", ""}};
      v.samples["step_time"] = {900.0 * tensors, 1000.0 * tensors, 1100.0 * tensors};
      s.variants.push_back(v);
    }
  }
  return r;
}

TEST(HtmlReport, IsWellFormedAndSelfContained) {
  const std::string html = render(sample_report());
  const std::vector<Element> elements = parse_page(html);
  ASSERT_FALSE(elements.empty());
  EXPECT_EQ(elements.front().name, "html");
  for (const Element& e : elements) {
    EXPECT_EQ(e.attrs.count("src"), 0u) << e.name << " loads something";
    if (e.attrs.count("href"))
      EXPECT_EQ(e.attrs.at("href").rfind('#', 0), 0u) << e.attrs.at("href");
    EXPECT_NE(e.name, "script");
    EXPECT_NE(e.name, "link");
    EXPECT_NE(e.name, "img");
  }
  EXPECT_EQ(html.find("http://"), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_EQ(html.find("url("), std::string::npos);
  EXPECT_EQ(html.find("@import"), std::string::npos);
}

TEST(HtmlReport, ProvenanceAndWarningsComeFirst) {
  const std::string html = render(sample_report());
  const size_t warning = html.find("debug build: times are not representative");
  const size_t provenance = html.find("abc1234 (dirty)");
  const size_t scenario = html.find("<section class=\"scenario\"");
  ASSERT_NE(warning, std::string::npos);
  ASSERT_NE(provenance, std::string::npos);
  EXPECT_LT(warning, scenario);
  EXPECT_LT(provenance, scenario);
  EXPECT_CONTAINS(html, "bench --scenario resume_adam");
  EXPECT_CONTAINS(html, "sim (simulated accelerator, host memory)");
}

TEST(HtmlReport, EscapesEveryText) {
  RunReport report = sample_report();
  const std::string nasty = "<script>alert(\"x\")</script> & 'q'";
  report.scenarios[0].description = nasty;
  report.scenarios[0].variants[0].name = "fresh/<b>&\"";
  report.warnings.push_back(nasty);
  report.provenance.argv.push_back(nasty);
  const std::string html = render(report);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("<b>"), std::string::npos);
  EXPECT_CONTAINS(html, "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;q&#39;");
  const std::vector<Element> elements = parse_page(html);
  EXPECT_FALSE(
      marks(elements, {{"data-variant", "fresh/<b>&\""}, {"data-metric", "per_step.sync.count"}})
          .empty());
}

TEST(HtmlReport, CountChartsHaveEveryVariantWithTheReportsValues) {
  const RunReport report = sample_report();
  const std::vector<Element> elements = parse_page(render(report));
  for (const char* chart : {"launches", "copies", "syncs", "collectives"}) {
    EXPECT_EQ(marks(elements, {{"data-chart", "counts"}, {"data-metric", chart}}).size(), 1u)
        << chart;
  }
  const std::pair<const char*, std::vector<std::string>> metrics[] = {
      {"launch.count", {"launch.count"}},
      {"h2d.count+d2h.count+d2d.count", {"h2d.count", "d2h.count", "d2d.count"}},
      {"sync.count", {"sync.count"}}};
  for (const VariantResult& v : report.scenarios[0].variants) {
    if (!v.ran) continue;
    for (const auto& [key, names] : metrics) {
      std::string path;
      double total = 0;
      for (const std::string& n : names) {
        path += (path.empty() ? "" : "+") + std::string("per_step.") + n;
        total += value_of(v, "per_step." + n);
      }
      const auto bar = marks(elements, {{"data-variant", v.name}, {"data-metric", path}});
      ASSERT_EQ(bar.size(), 1u) << v.name << " " << path;
      EXPECT_EQ(bar[0].attrs.at("data-value"), svg::exact(total));
      EXPECT_EQ(bar[0].attrs.at("data-side"), "head");
      for (const auto& [phase, values] : v.phases) {
        std::string phase_path;
        double window = 0;
        for (const std::string& n : names) {
          phase_path += std::string(phase_path.empty() ? "" : "+") + "phase[" + phase + "]." + n;
          window += value_of(v, "phase[" + phase + "]." + n);
        }
        const auto segment =
            marks(elements, {{"data-variant", v.name}, {"data-metric", phase_path}});
        if (window == 0) {
          EXPECT_TRUE(segment.empty()) << "a zero segment is drawn: " << phase_path;
          continue;
        }
        ASSERT_EQ(segment.size(), 1u) << v.name << " " << phase_path;
        EXPECT_EQ(segment[0].name, "rect");
        EXPECT_EQ(segment[0].attrs.at("data-phase"), phase);
        EXPECT_EQ(segment[0].attrs.at("data-window"), svg::exact(window));
        EXPECT_EQ(segment[0].attrs.at("data-value"), svg::exact(window / v.measured_steps));
      }
    }
  }
  // The failed variant says why instead of a bar; collectives are not in the sample: not measured.
  const std::string html = render(report);
  EXPECT_CONTAINS(html, "FAILED: checkpoint not found");
  EXPECT_CONTAINS(html, "not measured");
  EXPECT_TRUE(marks(elements, {{"data-variant", "resume_rebuild/foreach"}}).empty());
}

TEST(HtmlReport, PhasesCountedApartFromTheStepsAreNotPerStep) {
  RunReport report = sample_report();
  for (VariantResult& v : report.scenarios[0].variants) {
    if (!v.ran) continue;
    for (const char* phase : {"optimizer.step", "train.forward"}) {
      v.phases[phase].push_back({"time.median", 1000.0, "ns", ""});
    }
    v.phases["setup.fit"] = {{"launch.count", 10.0, "count", ""}, {"sync.count", 3.0, "count", ""}};
  }
  const std::vector<Element> elements = parse_page(render(report));
  EXPECT_EQ(marks(elements, {{"data-chart", "counts_apart"}}).size(), 2u);  // launches, syncs
  for (const VariantResult& v : report.scenarios[0].variants) {
    if (!v.ran) continue;
    const auto setup = marks(
        elements, {{"data-variant", v.name}, {"data-metric", "phase[setup.fit].launch.count"}});
    ASSERT_EQ(setup.size(), 1u) << v.name;
    EXPECT_EQ(setup[0].attrs.at("data-value"), "10");  // the window's count, not per step
    EXPECT_EQ(setup[0].attrs.count("data-steps"), 0u);
    const auto step = marks(elements, {{"data-variant", v.name},
                                       {"data-metric", "phase[optimizer.step].launch.count"}});
    ASSERT_EQ(step.size(), 1u);
    EXPECT_EQ(step[0].attrs.at("data-value"),
              svg::exact(value_of(v, "phase[optimizer.step].launch.count") / v.measured_steps));
  }
  EXPECT_EQ(marks(elements, {{"data-legend", "setup.fit"}}).size(), 1u);
}

TEST(HtmlReport, AChartOfZerosIsALine) {
  RunReport report = sample_report();
  for (VariantResult& v : report.scenarios[0].variants) {
    if (v.ran) v.per_step.push_back({"collective.count", 0.0, "count", ""});
  }
  const std::vector<Element> elements = parse_page(render(report));
  const auto figure = marks(elements, {{"data-chart", "counts"}, {"data-metric", "collectives"}});
  ASSERT_EQ(figure.size(), 1u);
  EXPECT_EQ(figure[0].name, "figure");
  EXPECT_EQ(figure[0].attrs.at("data-all-zero"), "true");
}

TEST(HtmlReport, StepTimeStripHasEveryMeasuredStep) {
  const RunReport report = sample_report();
  const std::vector<Element> elements = parse_page(render(report));
  ASSERT_EQ(marks(elements, {{"data-chart", "step_time"}}).size(), 1u);
  for (const VariantResult& v : report.scenarios[0].variants) {
    if (!v.ran) continue;
    const std::vector<double>& samples = v.samples.at("step_time");
    const auto dots =
        marks(elements, {{"data-variant", v.name}, {"data-metric", "samples.step_time"}});
    ASSERT_EQ(dots.size(), samples.size()) << v.name;
    for (size_t k = 0; k < samples.size(); ++k) {
      EXPECT_EQ(dots[k].attrs.at("data-index"), std::to_string(k));
      EXPECT_EQ(dots[k].attrs.at("data-value"), svg::exact(samples[k]));
    }
    const auto median =
        marks(elements, {{"data-variant", v.name}, {"data-metric", "timing.step_time.median"}});
    ASSERT_EQ(median.size(), 1u);
    EXPECT_EQ(median[0].attrs.at("data-value"), svg::exact(value_of(v, "timing.step_time.median")));
  }
}

TEST(HtmlReport, ScalingVariantsAreLinesAgainstTensorsNotBars) {
  const RunReport report = scaling_report();
  const std::vector<Element> elements = parse_page(render(report));
  const auto charts = marks(elements, {{"data-chart", "scaling"}, {"data-group", "numel=256"}});
  ASSERT_EQ(charts.size(), 2u);  // launches and step time
  for (const VariantResult& v : report.scenarios[0].variants) {
    if (!v.axes.count("tensors")) continue;
    const auto launches =
        marks(elements, {{"data-variant", v.name}, {"data-metric", "per_step.launch.count"}});
    ASSERT_EQ(launches.size(), 1u) << v.name;
    EXPECT_EQ(launches[0].name, "circle");
    EXPECT_EQ(launches[0].attrs.at("data-x"), v.axes.at("tensors"));
    EXPECT_EQ(launches[0].attrs.at("data-value"), svg::exact(value_of(v, "per_step.launch.count")));
    const auto median =
        marks(elements, {{"data-variant", v.name}, {"data-metric", "timing.step_time.median"}});
    ASSERT_EQ(median.size(), 1u);
    EXPECT_EQ(median[0].attrs.at("data-value"), svg::exact(value_of(v, "timing.step_time.median")));
    EXPECT_EQ(
        marks(elements, {{"data-variant", v.name}, {"data-metric", "samples.step_time"}}).size(),
        3u);
    // Not in the per-variant charts.
    EXPECT_TRUE(marks(elements, {{"data-variant", v.name}, {"data-metric", "per_step.sync.count"}})
                    .empty());
  }
  const std::string html = render(report);
  EXPECT_CONTAINS(html, "<text x=");  // legend entries name the implementations
  EXPECT_CONTAINS(html, ">forloop</text>");
  EXPECT_CONTAINS(html, ">fused</text>");
  EXPECT_CONTAINS(html, ">10000</text>");  // the launch axis reaches 7000 in decades
}

TEST(HtmlReport, MemoryByPhaseOnlyWhereTheReportHasIt) {
  RunReport report = sample_report();
  EXPECT_TRUE(marks(parse_page(render(report)), {{"data-chart", "memory"}}).empty());
  VariantResult& v = sample_variant(report, "fresh/foreach");
  v.total.push_back({"memory.peak_bytes", 265740.0, "bytes", ""});
  v.phases["optimizer.step"].push_back({"memory.peak_bytes", 260836.0, "bytes", ""});
  v.phases["train.forward"].push_back({"memory.peak_bytes", std::nullopt, "bytes", ""});
  sample_variant(report, "resume_keep_step/foreach")
      .phases["train.forward"]
      .push_back({"memory.peak_bytes", 1024.0, "bytes", ""});
  const std::vector<Element> elements = parse_page(render(report));
  ASSERT_EQ(
      marks(elements, {{"data-chart", "memory"}, {"data-metric", "memory.peak_bytes"}}).size(), 1u);
  EXPECT_TRUE(marks(elements, {{"data-chart", "memory"}, {"data-metric", "host_memory.peak_bytes"}})
                  .empty());
  const auto window = marks(
      elements, {{"data-variant", "fresh/foreach"}, {"data-metric", "total.memory.peak_bytes"}});
  ASSERT_EQ(window.size(), 1u);
  EXPECT_EQ(window[0].attrs.at("data-value"), "265740");
  const auto step = marks(elements, {{"data-variant", "fresh/foreach"},
                                     {"data-metric", "phase[optimizer.step].memory.peak_bytes"}});
  ASSERT_EQ(step.size(), 1u);
  EXPECT_EQ(step[0].attrs.at("data-value"), "260836");
  const auto unmeasured =
      marks(elements, {{"data-variant", "fresh/foreach"},
                       {"data-metric", "phase[train.forward].memory.peak_bytes"}});
  ASSERT_EQ(unmeasured.size(), 1u);
  EXPECT_EQ(unmeasured[0].attrs.at("data-value"), "");
}

TEST(HtmlReport, GatesShowFailingRulesFirst) {
  const RunReport report = sample_report();
  const GateFile gate = parse_gate_json(nlohmann::json::parse(R"({"gate_version": 1, "rules": [
        {"name": "few launches", "scenario": "resume_adam", "variant": "*",
         "metric": "per_step.launch.count", "max": 100},
        {"name": "no syncs", "scenario": "resume_adam", "variant": "*",
         "metric": "per_step.sync.count", "max": 0}]})"),
                                        "gate.json");
  HtmlPage page;
  page.head = &report;
  page.gates = {evaluate_gate(gate, report, nullptr)};
  const std::vector<Element> elements = parse_page(render_html(page));
  const auto section = marks(elements, {{"data-gate", "gate.json"}});
  ASSERT_EQ(section.size(), 1u);
  EXPECT_EQ(section[0].attrs.at("data-passed"), "false");
  std::vector<std::string> statuses;
  for (const Element& e : elements) {
    if (e.name == "tr" && e.attrs.count("data-status"))
      statuses.push_back(e.attrs.at("data-status"));
  }
  ASSERT_FALSE(statuses.empty());
  EXPECT_EQ(statuses.front(), "FAIL");
  EXPECT_TRUE(std::is_sorted(
      statuses.begin(), statuses.end(),
      [](const std::string& a, const std::string& b) { return a == "FAIL" && b != "FAIL"; }));
  // resume_move_all has 8 syncs; resume_rebuild failed to run, which fails both rules.
  EXPECT_EQ(std::count(statuses.begin(), statuses.end(), "FAIL"), 3);
}

TEST(HtmlReport, BaseAndHeadSideBySide) {
  const RunReport base = sample_report();
  RunReport head = sample_report();
  sample_variant(head, "resume_move_all/foreach").per_step[5].value = 3;  // sync.count
  head.scenarios[0].variants.push_back(head.scenarios[0].variants[0]);
  head.scenarios[0].variants.back().name = "new/variant";
  HtmlPage page;
  page.head = &head;
  page.base = &base;
  page.base_source = "base.json";
  page.head_source = "head.json";
  const std::string html = render_html(page);
  const std::vector<Element> elements = parse_page(html);
  const auto syncs = [&](const std::string& variant, const std::string& side) {
    return marks(
        elements,
        {{"data-variant", variant}, {"data-side", side}, {"data-metric", "per_step.sync.count"}});
  };
  ASSERT_EQ(syncs("resume_move_all/foreach", "base").size(), 1u);
  ASSERT_EQ(syncs("resume_move_all/foreach", "head").size(), 1u);
  EXPECT_EQ(syncs("resume_move_all/foreach", "base")[0].attrs.at("data-value"), "8");
  EXPECT_EQ(syncs("resume_move_all/foreach", "head")[0].attrs.at("data-value"), "3");
  EXPECT_EQ(syncs("new/variant", "head").size(), 1u);
  EXPECT_TRUE(syncs("new/variant", "base").empty());
  EXPECT_CONTAINS(html, "not in base");
  EXPECT_CONTAINS(html, "base (base.json)");
  EXPECT_CONTAINS(html, "Benchmark comparison");
  // Both runs' step times, each in its own rows.
  EXPECT_EQ(marks(elements, {{"data-variant", "fresh/foreach"},
                             {"data-side", "base"},
                             {"data-metric", "samples.step_time"}})
                .size(),
            5u);
}

TEST(HtmlReport, ComparisonPageSaysWhatChanged) {
  const RunReport base = sample_report();
  RunReport head = sample_report();
  sample_variant(head, "resume_move_all/foreach").per_step[5].value = 9;
  const RunComparison comparison = compare_reports(base, head, TimeTestOptions{});
  HtmlPage page;
  page.head = &head;
  page.base = &base;
  page.comparison = &comparison;
  const std::string html = render_html(page);
  parse_page(html);
  EXPECT_CONTAINS(html, "What changed");
  EXPECT_CONTAINS(html, comparison.tally());
  EXPECT_CONTAINS(html, "<td>regression</td>");
}

TEST(HtmlReport, SameBytesEveryTime) {
  const RunReport report = scaling_report();
  EXPECT_EQ(render(report), render(report));
}

TEST(Svg, EscapesAndWritesNumbersTheSameWayEverywhere) {
  EXPECT_EQ(svg::escape("a<b>&\"c'\x01"), "a&lt;b&gt;&amp;&quot;c&#39;?");
  EXPECT_EQ(svg::escape("µs\ttab"), "µs\ttab");
  EXPECT_EQ(svg::coord(12.5), "12.5");
  EXPECT_EQ(svg::coord(3.0), "3");
  EXPECT_EQ(svg::coord(-0.001), "0");
  EXPECT_EQ(svg::coord(1.005), "1");  // 2 decimals at most (1.00499... in binary)
  EXPECT_EQ(svg::exact(20), "20");
  EXPECT_EQ(svg::exact(2.4), "2.4");
  EXPECT_EQ(svg::exact(1234567.5), "1234567.5");
  EXPECT_EQ(svg::exact(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(svg::exact(1.0 / 0.0), "");
}

TEST(Svg, TicksAreRoundAndCoverTheData) {
  EXPECT_EQ(svg::linear_ticks(0, 20, 5), (std::vector<double>{0, 5, 10, 15, 20}));
  EXPECT_EQ(svg::linear_ticks(0, 22, 5), (std::vector<double>{0, 5, 10, 15, 20, 25}));
  EXPECT_EQ(svg::linear_ticks(0, 110, 5), (std::vector<double>{0, 50, 100, 150}));
  EXPECT_EQ(svg::linear_ticks(0, 0, 5).back(), 1);  // an empty range: a 0..1 axis
  EXPECT_EQ(svg::linear_ticks(1.2e6, 2e6, 6),
            (std::vector<double>{1.2e6, 1.4e6, 1.6e6, 1.8e6, 2e6}));
  EXPECT_EQ(svg::decade_ticks(2, 7000), (std::vector<double>{1, 10, 100, 1000, 10000}));
  EXPECT_EQ(svg::decade_ticks(10, 1000), (std::vector<double>{10, 100, 1000}));
  const svg::Scale log = svg::Scale::log10(10, 1000, 0, 200);
  EXPECT_DOUBLE_EQ(log(100), 100);
  const svg::Scale y = svg::Scale::linear(0, 10, 100, 0);
  EXPECT_DOUBLE_EQ(y(2.5), 75);
}

}  // namespace
}  // namespace harness

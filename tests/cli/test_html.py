"""bench --html and bench compare --format html / --html on the real binary: the page is
well-formed (it parses as XML), self-contained, and every chart mark carries the report's value.

Environment: BENCH (path of the bench binary), SOURCE_DIR (the repository root).
"""
import json
import os
import subprocess
import tempfile
import unittest
import xml.etree.ElementTree as ET

BENCH = os.environ["BENCH"]
SOURCE_DIR = os.environ["SOURCE_DIR"]
RESUME_GATE = os.path.join(SOURCE_DIR, "reports", "gates", "resume_adam.json")


def bench(*args):
    return subprocess.run([BENCH, *args], capture_output=True, text=True, timeout=600,
                          stdin=subprocess.DEVNULL)


def page(path):
    """The page's elements, parsed strictly as XML (an error fails the test)."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    return text, list(ET.fromstring(text.split("\n", 1)[1]).iter())  # past <!DOCTYPE html>


def marks(elements, **attrs):
    want = {"data-" + k.replace("_", "-"): v for k, v in attrs.items()}
    return [e for e in elements if all(e.get(k) == v for k, v in want.items())]


def metric(variant, path):
    """A report value by metric path: per_step.x, timing.x, total.x, phase[p].x."""
    if path.startswith("phase["):
        phase, name = path[len("phase["):].split("].", 1)
        return variant["phases"][phase][name]
    section, name = path.split(".", 1)
    return variant[section][name]


def charted(variant):
    return variant["status"] == "ok" and "tensors" not in variant["axes"] and \
        "rank" not in variant["axes"]


class HtmlPage(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        d = cls.tmp.name
        cls.ra_json, cls.ra_html = os.path.join(d, "ra.json"), os.path.join(d, "ra.html")
        r = bench("--scenario", "resume_adam", "--device", "sim", "--steps", "5", "--quiet",
                  "--out", cls.ra_json, "--html", cls.ra_html, "--gate", RESUME_GATE)
        assert r.returncode == 0, r.stdout + r.stderr
        cls.fa_json, cls.fa_html = os.path.join(d, "fa.json"), os.path.join(d, "fa.html")
        r = bench("--scenario", "fused_adam", "--device", "sim", "--steps", "5", "--quiet",
                  "--out", cls.fa_json, "--html", cls.fa_html)
        assert r.returncode == 0, r.stdout + r.stderr
        with open(cls.ra_json) as f:
            cls.ra = json.load(f)
        with open(cls.fa_json) as f:
            cls.fa = json.load(f)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def check_self_contained(self, path):
        text, elements = page(path)
        for e in elements:
            tag = e.tag.split("}")[-1]
            self.assertNotIn(tag, ("script", "link", "img", "iframe", "object"), path)
            self.assertIsNone(e.get("src"), path)
            href = e.get("href")
            self.assertTrue(href is None or href.startswith("#"), href)
        self.assertNotIn("http://", text)
        self.assertNotIn("https://", text)
        return text, elements

    def test_pages_are_well_formed_and_self_contained(self):
        for path in (self.ra_html, self.fa_html):
            with self.subTest(path=os.path.basename(path)):
                text, _ = self.check_self_contained(path)
                self.assertTrue(text.startswith("<!DOCTYPE html>\n<html"))

    def test_provenance_warnings_and_gate_at_the_top(self):
        text, elements = page(self.ra_html)
        first_scenario = text.index('<section class="scenario"')
        self.assertLess(text.index("simulated device"), first_scenario)
        self.assertLess(text.index(self.ra["provenance"]["git_sha"]), first_scenario)
        gate = marks(elements, gate=RESUME_GATE)
        self.assertEqual(len(gate), 1)
        self.assertEqual(gate[0].get("data-passed"), "true")
        self.assertLess(text.index('data-gate="'), first_scenario)

    def check_counts(self, report, elements):
        scenario = report["scenarios"][0]
        for chart in ("launches", "copies", "syncs"):
            self.assertEqual(len(marks(elements, chart="counts", metric=chart)), 1, chart)
        kinds = {"launches": ["launch.count"], "copies": ["h2d.count", "d2h.count", "d2d.count"],
                 "syncs": ["sync.count"]}
        checked = 0
        for v in filter(charted, scenario["variants"]):
            for names in kinds.values():
                path = "+".join("per_step." + n for n in names)
                bar = marks(elements, variant=v["name"], metric=path)
                self.assertEqual(len(bar), 1, (v["name"], path))
                self.assertEqual(float(bar[0].get("data-value")),
                                 sum(metric(v, "per_step." + n) for n in names))
                for phase in v["phases"]:
                    window = sum(metric(v, "phase[%s].%s" % (phase, n)) for n in names)
                    path = "+".join("phase[%s].%s" % (phase, n) for n in names)
                    segment = marks(elements, variant=v["name"], metric=path)
                    if window == 0:
                        self.assertEqual(segment, [])
                        continue
                    self.assertEqual(len(segment), 1, (v["name"], path))
                    self.assertEqual(float(segment[0].get("data-window")), window)
                    self.assertEqual(float(segment[0].get("data-value")),
                                     window / v["measured_steps"])
                    checked += 1
        self.assertGreater(checked, 0)

    def check_step_times(self, report, elements):
        for v in filter(charted, report["scenarios"][0]["variants"]):
            dots = marks(elements, variant=v["name"], metric="samples.step_time")
            self.assertEqual([float(d.get("data-value")) for d in dots], v["samples"]["step_time"])
            median = marks(elements, variant=v["name"], metric="timing.step_time.median")
            self.assertEqual(len(median), 1)
            self.assertEqual(float(median[0].get("data-value")), v["timing"]["step_time.median"])

    def test_resume_adam_charts_hold_the_reports_values(self):
        _, elements = page(self.ra_html)
        self.check_counts(self.ra, elements)
        self.check_step_times(self.ra, elements)
        # The pathology and its fixes: only move_all syncs.
        for v in self.ra["scenarios"][0]["variants"]:
            bar = marks(elements, variant=v["name"], metric="per_step.sync.count")[0]
            self.assertEqual(float(bar.get("data-value")) > 0, v["name"].startswith("resume_move_all"))
        # Memory by phase, as the report has it.
        for kind in ("memory.peak_bytes", "host_memory.peak_bytes"):
            self.assertEqual(len(marks(elements, chart="memory", metric=kind)), 1, kind)
        v = self.ra["scenarios"][0]["variants"][1]
        cell = marks(elements, variant=v["name"], metric="phase[optimizer.step].memory.peak_bytes")
        self.assertEqual(float(cell[0].get("data-value")),
                         v["phases"]["optimizer.step"]["memory.peak_bytes"])

    def test_fused_adam_scaling_has_a_line_per_implementation(self):
        _, elements = page(self.fa_html)
        self.check_counts(self.fa, elements)
        self.check_step_times(self.fa, elements)
        scale = [v for v in self.fa["scenarios"][0]["variants"] if "tensors" in v["axes"]]
        self.assertEqual(len(scale), 24)
        for numel in sorted({v["axes"]["numel"] for v in scale}):
            group = "numel=" + numel
            self.assertEqual(len(marks(elements, chart="scaling", group=group)), 2, group)
        for v in scale:
            for path in ("per_step.launch.count", "timing.step_time.median"):
                point = marks(elements, variant=v["name"], metric=path)
                self.assertEqual(len(point), 1, (v["name"], path))
                self.assertEqual(point[0].get("data-x"), v["axes"]["tensors"])
                self.assertEqual(float(point[0].get("data-value")), metric(v, path))
            self.assertEqual(len(marks(elements, variant=v["name"], metric="samples.step_time")),
                             len(v["samples"]["step_time"]))
            # Scale variants are points of the scaling charts, not bars.
            self.assertEqual(marks(elements, variant=v["name"], metric="per_step.sync.count"), [])

    def test_baseline_and_compare_put_base_and_head_side_by_side(self):
        d = self.tmp.name
        head_json, head_html = os.path.join(d, "head.json"), os.path.join(d, "head.html")
        r = bench("--scenario", "resume_adam", "--device", "sim", "--steps", "5", "--quiet",
                  "--variant", "fresh/*", "--variant", "resume_move_all/*",
                  "--out", head_json, "--html", head_html, "--baseline", self.ra_json)
        self.assertEqual(r.returncode, 0, r.stderr)
        compare_html, compare_out = os.path.join(d, "compare.html"), os.path.join(d, "c.html")
        r = bench("compare", self.ra_json, head_json, "--html", compare_html)
        self.assertIn(r.returncode, (0, 1), r.stderr)
        self.assertIn("compare:", r.stdout)  # the text still goes to stdout
        r = bench("compare", self.ra_json, head_json, "--format", "html", "--out", compare_out)
        self.assertIn(r.returncode, (0, 1), r.stderr)
        with open(compare_html, "rb") as a, open(compare_out, "rb") as b:
            self.assertEqual(a.read(), b.read())
        r = bench("compare", self.ra_json, head_json, "--format", "html")
        with open(compare_html) as f:
            self.assertEqual(r.stdout, f.read())
        for path in (head_html, compare_html):
            with self.subTest(page=os.path.basename(path)):
                text, elements = self.check_self_contained(path)
                for name in ("fresh/foreach", "resume_move_all/forloop"):
                    for side in ("base", "head"):
                        self.assertEqual(len(marks(elements, variant=name, side=side,
                                                   metric="per_step.sync.count")), 1)
                # Only base has keep_step: its head row says so.
                self.assertEqual(len(marks(elements, variant="resume_keep_step/foreach",
                                           side="base", metric="per_step.sync.count")), 1)
                self.assertIn("not in head", text)
        self.assertIn("What changed", open(compare_html).read())

    def test_an_unwritable_page_is_refused_before_the_run(self):
        missing = os.path.join(self.tmp.name, "no", "such", "dir", "r.html")
        r = bench("--scenario", "resume_adam", "--device", "sim", "--html", missing)
        self.assertEqual(r.returncode, 2)
        self.assertIn("--html", r.stderr)
        self.assertEqual(r.stdout, "")  # nothing ran
        r = bench("compare", self.ra_json, self.ra_json, "--html", missing)
        self.assertEqual(r.returncode, 2)
        self.assertIn("--html", r.stderr)
        r = bench("compare", self.ra_json, self.ra_json, "--format", "svg")
        self.assertEqual(r.returncode, 2)

    def test_help_documents_the_flag(self):
        r = bench("--help")
        self.assertIn("--html", r.stdout)
        r = bench("compare", "--help")
        self.assertIn("html", r.stdout)


if __name__ == "__main__":
    unittest.main()

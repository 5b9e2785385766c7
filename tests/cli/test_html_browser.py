"""The HTML report in a real browser: Debian's chromium, headless, renders the pages of real
`bench --html` runs (resume_adam, fused_adam) and of `bench compare --format html` to PNG
screenshots without a console message, and its DOM, after loading, still holds every chart mark
of every variant.

Exits 77 (ctest's SKIP_RETURN_CODE) when chromium is not installed (Debian: apt install chromium;
scripts/setup.sh installs it with HARNESS_WITH_TEST_TOOLS=1).

Environment: BENCH (path of the bench binary), OUT_DIR (where the pages and screenshots are kept).
"""
import html.parser
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest

BENCH = os.environ["BENCH"]
OUT_DIR = os.environ["OUT_DIR"]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
WIDTH, HEIGHT = 1400, 4000


def bench(*args):
    r = subprocess.run([BENCH, *args], capture_output=True, text=True, timeout=600,
                       stdin=subprocess.DEVNULL)
    return r


def chromium(profile, *args):
    """Runs headless chromium; returns (stdout, the page's console lines)."""
    r = subprocess.run([CHROMIUM, "--headless", "--disable-gpu", "--no-sandbox",
                        "--enable-logging=stderr", "--v=0", "--hide-scrollbars",
                        "--user-data-dir=" + profile, *args],
                       capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        raise AssertionError("chromium exited %d: %s" % (r.returncode, r.stderr[-2000:]))
    console = [line for line in r.stderr.splitlines() if ":CONSOLE" in line]
    return r.stdout, console


class Marks(html.parser.HTMLParser):
    """Every element's attributes, from chromium's serialised DOM."""

    def __init__(self):
        super().__init__()
        self.elements = []

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))


class Browser(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        os.makedirs(OUT_DIR, exist_ok=True)
        cls.profile = tempfile.TemporaryDirectory()
        cls.pages = {}
        for scenario in ("resume_adam", "fused_adam"):
            report = os.path.join(OUT_DIR, scenario + ".json")
            page = os.path.join(OUT_DIR, scenario + ".html")
            r = bench("--scenario", scenario, "--device", "sim", "--steps", "5", "--quiet",
                      "--out", report, "--html", page)
            assert r.returncode == 0, r.stdout + r.stderr
            with open(report) as f:
                cls.pages[scenario] = (page, json.load(f))
        head = os.path.join(OUT_DIR, "resume_adam-head.json")
        r = bench("--scenario", "resume_adam", "--device", "sim", "--steps", "5", "--quiet",
                  "--out", head)
        assert r.returncode == 0, r.stdout + r.stderr
        compare = os.path.join(OUT_DIR, "compare.html")
        r = bench("compare", cls.pages["resume_adam"][0][:-5] + ".json", head, "--format", "html",
                  "--out", compare)
        assert r.returncode in (0, 1), r.stdout + r.stderr
        with open(head) as f:
            cls.pages["compare"] = (compare, json.load(f))

    @classmethod
    def tearDownClass(cls):
        cls.profile.cleanup()

    def test_screenshots_without_console_messages(self):
        for name, (page, _) in self.pages.items():
            with self.subTest(page=name):
                png = os.path.join(OUT_DIR, name + ".png")
                if os.path.exists(png):
                    os.remove(png)
                _, console = chromium(self.profile.name, "--screenshot=" + png,
                                      "--window-size=%d,%d" % (WIDTH, HEIGHT), "file://" + page)
                self.assertEqual(console, [], "the page logged to the console")
                with open(png, "rb") as f:
                    header = f.read(24)
                self.assertEqual(header[:8], b"\x89PNG\r\n\x1a\n")
                self.assertEqual(struct.unpack(">II", header[16:24]), (WIDTH, HEIGHT))
                self.assertGreater(os.path.getsize(png), 50_000)  # drawn, not blank
                print("screenshot: " + png, file=sys.stderr)

    def test_the_rendered_dom_has_every_chart_of_every_variant(self):
        for name, (page, report) in self.pages.items():
            with self.subTest(page=name):
                dom, console = chromium(self.profile.name, "--dump-dom", "file://" + page)
                self.assertEqual(console, [])
                parser = Marks()
                parser.feed(dom)
                svgs = [a for tag, a in parser.elements if tag == "svg"]
                self.assertTrue(svgs)
                self.assertTrue(all(a.get("role") == "img" and a.get("aria-label") for a in svgs))

                def has(**attrs):
                    return any(all(a.get("data-" + k) == v for k, v in attrs.items())
                               for _, a in parser.elements)

                for v in report["scenarios"][0]["variants"]:
                    if v["status"] != "ok" or "rank" in v["axes"]:
                        continue
                    if "tensors" in v["axes"]:
                        self.assertTrue(has(variant=v["name"], metric="per_step.launch.count"))
                        self.assertTrue(has(variant=v["name"], metric="timing.step_time.median"))
                        continue
                    for metric in ("per_step.launch.count", "per_step.sync.count",
                                   "per_step.h2d.count+per_step.d2h.count+per_step.d2d.count",
                                   "timing.step_time.median", "samples.step_time",
                                   "total.memory.peak_bytes"):
                        self.assertTrue(has(variant=v["name"], side="head", metric=metric),
                                        (name, v["name"], metric))
                    if name == "compare":
                        self.assertTrue(has(variant=v["name"], side="base",
                                            metric="per_step.sync.count"))


if __name__ == "__main__":
    if CHROMIUM is None:
        print("SKIP: chromium is not installed (Debian: apt install chromium; "
              "HARNESS_WITH_TEST_TOOLS=1 scripts/setup.sh installs it)")
        sys.exit(77)
    unittest.main()

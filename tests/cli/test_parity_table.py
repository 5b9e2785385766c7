"""scripts/parity_table.py on real sim reports: equal counts pass, a changed count is named and
exits 1, bad input exits 2. (On a GPU machine the same script compares cuda with sim.)

Environment: BENCH (the bench binary), SOURCE_DIR (the repository root).
"""
import copy
import json
import os
import subprocess
import sys
import tempfile
import unittest

BENCH = os.environ["BENCH"]
SCRIPT = os.path.join(os.environ["SOURCE_DIR"], "scripts", "parity_table.py")


def parity(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)


class ParityTable(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.sim = os.path.join(cls.tmp.name, "sim.json")
        done = subprocess.run([BENCH, "--scenario", "resume_adam", "--device", "sim", "--quiet",
                               "--variant", "fresh/*", "--variant", "resume_move_all/*",
                               "--out", cls.sim], capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr
        with open(cls.sim) as f:
            cls.report = json.load(f)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def write(self, name, report):
        path = os.path.join(self.tmp.name, name)
        with open(path, "w") as f:
            json.dump(report, f)
        return path

    def test_equal_counts_pass_with_launch_ratio(self):
        md = os.path.join(self.tmp.name, "parity.md")
        r = parity(self.sim, self.sim, "--markdown", md)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("| resume_adam | resume_move_all/foreach | 2 | 20 | 0 | 20 |", r.stdout)
        self.assertIn("1.00 |", r.stdout)
        with open(md) as f:
            self.assertEqual(f.read(), r.stdout)

    def test_a_changed_copy_count_is_named_and_exits_1(self):
        gpu = copy.deepcopy(self.report)
        v = gpu["scenarios"][0]["variants"][0]
        v["per_step"]["d2h.count"] += 1
        v["per_step"]["launch.count"] *= 2  # launches may differ: not a failure
        r = parity(self.write("gpu.json", gpu), self.sim)
        self.assertEqual(r.returncode, 1)
        self.assertIn("differs: resume_adam %s: d2h.count" % v["name"], r.stderr)
        self.assertIn("2.00 |", r.stdout)
        self.assertNotIn("launch.count", r.stderr)

    def test_unmeasured_counts_are_bad_input(self):
        gpu = copy.deepcopy(self.report)
        gpu["provenance"]["instrument_status"] = "unavailable: cuptiSubscribe: CUPTI_ERROR_UNKNOWN"
        r = parity(self.write("unmeasured.json", gpu), self.sim)
        self.assertEqual(r.returncode, 2)
        self.assertIn("not measured", r.stderr)

    def test_not_a_report_and_missing_file(self):
        r = parity(self.write("list.json", [1, 2]), self.sim)
        self.assertEqual(r.returncode, 2)
        self.assertIn("not a harness report", r.stderr)
        r = parity(os.path.join(self.tmp.name, "absent.json"), self.sim)
        self.assertEqual(r.returncode, 2)
        self.assertIn("absent.json", r.stderr)


if __name__ == "__main__":
    unittest.main()

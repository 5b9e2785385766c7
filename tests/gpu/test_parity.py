"""GPU parity: copies and syncs per measured step on `cuda` equal those on `sim`.

Registered in ctest only where a GPU is usable and the build drives CUDA (HARNESS_WITH_CUDA=ON).
Runs the real bench binary once per device (separate processes, so that the sim backend does not
take over pinned memory of the CUDA run) and compares them with scripts/parity_table.py: H2D / D2H /
D2D copies and syncs per measured step must be equal; launch counts differ by design and are
printed side by side with their ratio.

Environment: BENCH (the bench binary), SOURCE_DIR (the repository root), OUT_DIR (where the
reports and tables are kept).
"""
import os
import subprocess
import sys
import unittest

BENCH = os.environ["BENCH"]
OUT_DIR = os.environ.get("OUT_DIR", ".")
PARITY_TABLE = os.path.join(os.environ["SOURCE_DIR"], "scripts", "parity_table.py")


def run(scenario, device):
    path = os.path.join(OUT_DIR, "%s-%s.json" % (scenario, device))
    args = [BENCH, "--scenario", scenario, "--device", device, "--out", path, "-q"]
    done = subprocess.run(args, capture_output=True, text=True, timeout=1200)
    if done.returncode != 0:
        raise AssertionError("%s on %s exited %d:\n%s" % (scenario, device, done.returncode,
                                                         done.stderr))
    return path


class Parity(unittest.TestCase):
    def check(self, scenario):
        cuda, sim = run(scenario, "cuda"), run(scenario, "sim")
        table = os.path.join(OUT_DIR, "%s-parity.md" % scenario)
        done = subprocess.run([sys.executable, PARITY_TABLE, cuda, sim, "--markdown", table],
                              capture_output=True, text=True, timeout=120)
        print(done.stdout)
        self.assertEqual(done.returncode, 0, done.stderr)

    def test_resume_adam(self):
        self.check("resume_adam")

    def test_fused_adam(self):
        self.check("fused_adam")


if __name__ == "__main__":
    unittest.main()

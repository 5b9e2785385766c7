"""GPU parity: copies and syncs per measured step on `cuda` equal those on `sim`.

Registered in ctest only where a GPU is usable and the build drives CUDA (HARNESS_WITH_CUDA=ON).
Runs the real bench binary once per device (separate processes, so that the sim backend does not
take over pinned memory of the CUDA run) and compares, per variant, H2D / D2H / D2D copies and
syncs per measured step. Launch counts differ by design and are printed side by side.

Environment: BENCH (the bench binary), OUT_DIR (where the reports are kept).
"""
import json
import os
import subprocess
import unittest

BENCH = os.environ["BENCH"]
OUT_DIR = os.environ.get("OUT_DIR", ".")
PARITY = ("h2d.count", "h2d.bytes", "d2h.count", "d2h.bytes", "d2d.count", "sync.count")


def run(scenario, device):
    path = os.path.join(OUT_DIR, "%s-%s.json" % (scenario, device))
    args = [BENCH, "--scenario", scenario, "--device", device, "--out", path, "-q"]
    if scenario == "fused_adam":
        args += ["--variant", "fresh/*", "--variant", "resumed_move_all/*"]
    done = subprocess.run(args, capture_output=True, text=True, timeout=1200)
    if done.returncode != 0:
        raise AssertionError("%s on %s exited %d:\n%s" % (scenario, device, done.returncode,
                                                         done.stderr))
    with open(path) as f:
        report = json.load(f)
    return report, {v["name"]: v for v in report["scenarios"][0]["variants"]}


class Parity(unittest.TestCase):
    def check(self, scenario):
        cuda_report, cuda = run(scenario, "cuda")
        self.assertEqual(cuda_report["provenance"]["instrument_status"], "ok")
        _, sim = run(scenario, "sim")
        print("\n%s: launches per step, cuda vs sim" % scenario)
        for name, c in sorted(cuda.items()):
            s = sim[name]
            for metric in PARITY:
                self.assertEqual(c["per_step"][metric], s["per_step"][metric], (name, metric))
            lc, ls = c["per_step"]["launch.count"], s["per_step"]["launch.count"]
            print("  %-32s %8s %8s  ratio %.2f" % (name, lc, ls, lc / ls if ls else float("nan")))

    def test_resume_adam(self):
        self.check("resume_adam")

    def test_fused_adam(self):
        self.check("fused_adam")


if __name__ == "__main__":
    unittest.main()

#!/usr/bin/env python3
"""What Nsight Systems records of bench: the NVTX ranges, seen through an injection library
(tests/nvtx/nvtx_recorder.cpp) loaded the way nsys loads its own (NVTX_INJECTION64_PATH).

Checks, on sim: every range is pushed and popped in balance on its thread, in the "harness"
domain; one range per variant ("<scenario>/<variant>"), one per measured step ("step N") inside
it, and the phases nested inside the steps."""
import collections
import json
import os
import subprocess
import tempfile
import unittest

BENCH = os.environ["BENCH"]
RECORDER = os.environ["NVTX_RECORDER"]


def record(*args):
    """Runs bench with the recorder; returns (process, [(tid, op, domain, message)])."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "nvtx.tsv")
        env = dict(os.environ, NVTX_INJECTION64_PATH=RECORDER, NVTX_RECORD_OUT=out)
        r = subprocess.run([BENCH, *args], env=env, capture_output=True, text=True, timeout=300)
        calls = []
        if os.path.exists(out):
            with open(out) as f:
                for line in f:
                    parts = line.rstrip("\n").split("\t")
                    calls.append((parts[0], parts[1], parts[2], parts[3] if len(parts) > 3 else ""))
        return r, calls


def ranges(calls):
    """Each range as (domain, path of names from the outermost), checking balance per thread."""
    stacks = collections.defaultdict(list)
    out = []
    for tid, op, domain, message in calls:
        stack = stacks[(tid, domain)]
        if op == "push":
            stack.append(message)
            out.append((domain, tuple(stack)))
        else:
            if not stack:
                raise AssertionError("pop without a push on thread %s, domain %s" % (tid, domain))
            stack.pop()
    for key, stack in stacks.items():
        if stack:
            raise AssertionError("ranges left open on thread %s domain %s: %s" % (key[0], key[1], stack))
    return out


class NvtxRanges(unittest.TestCase):
    def test_variants_steps_and_phases_as_nsys_records_them(self):
        r, calls = record("--scenario", "resume_adam", "--device", "sim", "--variant",
                          "resume_move_all/foreach", "--variant", "fresh/forloop", "--steps", "3",
                          "--quiet")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertTrue(calls, "the injection library recorded nothing: NVTX is not reaching it")
        found = ranges(calls)
        self.assertEqual({domain for domain, _ in found}, {"harness"})
        paths = [path for _, path in found]
        for variant in ("resume_adam/resume_move_all/foreach", "resume_adam/fresh/forloop"):
            self.assertIn((variant,), paths)
            # The measured steps (after a resume from step 3: steps 4..6), inside the variant.
            steps = sorted(p[1] for p in paths if len(p) == 2 and p[0] == variant
                           and p[1].startswith("step "))
            self.assertEqual(steps, ["step 4", "step 5", "step 6"], variant)
            # Phases inside each measured step: the trainer's step and the optimizer's.
            for step in steps:
                self.assertIn((variant, step, "train.step"), paths)
                self.assertIn((variant, step, "train.step", "optimizer.step"), paths)
        # Nothing of a step outside its variant's range.
        self.assertFalse([p for p in paths if p[0].startswith("step ")])

    def test_nvtx_only_emits_the_ranges_and_counts_nothing(self):
        # Under `nsys profile`, --nvtx-only leaves CUPTI to nsys: the same ranges, counts null.
        with tempfile.TemporaryDirectory() as tmp:
            report = os.path.join(tmp, "r.json")
            r, calls = record("--scenario", "resume_adam", "--device", "sim", "--variant",
                              "fresh/forloop", "--steps", "2", "--quiet", "--nvtx-only",
                              "--out", report)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            with open(report) as f:
                doc = json.load(f)
        paths = [path for _, path in ranges(calls)]
        self.assertIn(("resume_adam/fresh/forloop", "step 3", "train.step", "optimizer.step"), paths)
        self.assertEqual(doc["provenance"]["instrument"], "none")
        self.assertTrue(doc["provenance"]["instrument_status"].startswith("off: --nvtx-only"))
        variant = doc["scenarios"][0]["variants"][0]
        for figure in ("sync.count", "h2d.count", "d2h.count", "launch.count"):
            self.assertIsNone(variant["per_step"][figure], figure)
        self.assertIn("counts are null", r.stdout + r.stderr)

    def test_nvtx_only_and_instrument_overhead_exclude_each_other(self):
        r = subprocess.run([BENCH, "--nvtx-only", "--instrument-overhead"], capture_output=True,
                           text=True, timeout=60)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("excludes", r.stderr)


if __name__ == "__main__":
    unittest.main()

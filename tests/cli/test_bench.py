"""Runs the real bench binary: console output, JSON report, gates and exit codes.

Environment: BENCH (path of the bench binary), SOURCE_DIR (the repository root).
"""
import json
import math
import os
import shutil
import statistics
import subprocess
import tempfile
import unittest

BENCH = os.environ["BENCH"]
SOURCE_DIR = os.environ["SOURCE_DIR"]
GATE = os.path.join(SOURCE_DIR, "reports", "gates", "resume_adam.json")


def bench(*args, timeout=600):
    return subprocess.run([BENCH, *args], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def per_step(variant, name):
    return variant["per_step"][name]


class PhaseTimes(unittest.TestCase):
    """--phases: each phase's counts and host time; phase times in the report and in gates."""

    def test_phase_table_report_and_gate(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "r.json")
            gate = os.path.join(tmp, "gate.json")
            with open(gate, "w") as f:
                json.dump({"gate_version": 1, "rules": [
                    {"name": "optimizer.step within its train.step", "scenario": "resume_adam",
                     "variant": "fresh/foreach", "metric": "phase[optimizer.step].time.median",
                     "min": 1, "max": 1e12}]}, f)
            r = bench("--scenario", "resume_adam", "--device", "sim", "--variant", "fresh/foreach",
                      "--phases", "--out", out, "--gate", gate)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn("phases of fresh/foreach", r.stdout)
            self.assertIn("gate: 1 passed, 0 failed", r.stdout)
            with open(out) as f:
                v = json.load(f)["scenarios"][0]["variants"][0]
        step = v["timing"]["step_time.median"]
        for phase in ("train.step", "train.forward", "train.backward", "optimizer.step"):
            t = v["phases"][phase]
            self.assertLessEqual(t["time.min"], t["time.median"])
            self.assertLessEqual(t["time.median"], t["time.max"])
        self.assertLessEqual(v["phases"]["train.step"]["time.median"], step)
        row = next(line for line in r.stdout.splitlines() if line.strip().startswith("optimizer.step"))
        self.assertEqual(row.split()[1:5], ["7", "0", "0", "0"])  # foreach: 7 launches, nothing else
        # Without --phases, no such table.
        plain = bench("--scenario", "resume_adam", "--device", "sim", "--variant", "fresh/foreach")
        self.assertNotIn("phases of", plain.stdout)


class SyncWait(unittest.TestCase):
    """The host time waited in syncs, per sync site and in total; GPU time is null on sim."""

    def test_sync_wait_in_report_console_markdown_gate_and_compare(self):
        # metric_sync's checkpoint makes blocking D2H copies: on sim, their wait is the copy.
        variant = "world1/trainer_default"
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "r.json")
            md = os.path.join(tmp, "r.md")
            gate = os.path.join(tmp, "gate.json")
            with open(gate, "w") as f:
                json.dump({"gate_version": 1, "rules": [
                    {"name": "the checkpoint waits in syncs", "scenario": "metric_sync",
                     "variant": variant, "metric": "per_step.sync.wait_time", "min": 1},
                    {"name": "the optimizer never waits", "scenario": "metric_sync",
                     "variant": variant, "metric": "phase[optimizer.step].sync.wait_time",
                     "max": 0}]}, f)
            r = bench("--scenario", "metric_sync", "--device", "sim", "--variant", variant,
                      "--phases", "--out", out, "--markdown", md, "--gate", gate)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn("gate: 2 passed, 0 failed", r.stdout)
            with open(out) as f:
                report = json.load(f)
            with open(md) as f:
                markdown = f.read()
            self.assertRegex(report["schema_version"], r"^1\.(3|[4-9]|\d\d)\.")
            units = report["measurements"]
            for name in ("sync.wait_time", "gpu_time", "gpu_span"):
                self.assertEqual(units[name]["unit"], "ns")
            (v,) = report["scenarios"][0]["variants"]
            steps = v["measured_steps"]
            # One site per line of the checkpoint's save that copies to the host.
            copies = [s for s in v["sync_sites"] if s["reason"] == "blocking copy D2H"]
            self.assertGreater(len(copies), 1)
            for copy in copies:
                self.assertEqual((copy["phase"], copy["op"]), ("checkpoint.save", "aten::copy_"))
                self.assertIsInstance(copy["wait_ns"], int)
                self.assertGreater(copy["wait_ns"], 0)
                self.assertRegex(copy["frame"],
                                 r"^harness/runtime/checkpoint/checkpoint\.cpp:\d+ in \w+$")
            total = v["total"]["sync.wait_time"]
            # Every sync is in a site: the sites' waits add up to the total, exactly.
            self.assertEqual(sum(s["wait_ns"] for s in v["sync_sites"]), total)
            self.assertEqual(sum(p["sync.wait_time"] for p in v["phases"].values()), total)
            self.assertGreaterEqual(v["phases"]["checkpoint.save"]["sync.wait_time"],
                                    sum(copy["wait_ns"] for copy in copies))
            self.assertEqual(v["phases"]["optimizer.step"]["sync.wait_time"], 0)
            self.assertAlmostEqual(v["per_step"]["sync.wait_time"], total / steps, delta=1e-6 * total)
            samples = v["samples"]["sync.wait_time"]
            self.assertEqual(len(samples), steps)
            self.assertEqual(sum(samples), total)
            # Not measured on sim: null, never 0.
            self.assertIsNone(v["per_step"]["gpu_time"])
            self.assertIsNone(v["total"]["gpu_time"])
            self.assertIsNone(v["phases"]["optimizer.step"]["gpu_time"])
            self.assertIsNone(v["phases"]["optimizer.step"]["gpu_span"])
            self.assertNotIn("gpu_span", v["total"])
            # Console: the sites with their wait; --phases with the sync wait per step.
            self.assertIn("host time waited in the measured window", r.stdout)
            rows = [line for line in r.stdout.splitlines()
                    if "aten::copy_" in line and "blocking copy D2H" in line]
            self.assertEqual(len(rows), len(copies))
            for row in rows:
                self.assertRegex(row, r"blocking copy D2H\s+\d+\s+[0-9.]+ (ns|µs|ms|s)\s+"
                                 r"[0-9.]+ (ns|µs|ms|s)\s+harness/runtime/checkpoint/"
                                 r"checkpoint\.cpp:\d+ in \w+$")
            self.assertIn("sync wait", r.stdout)
            header = next(line for line in r.stdout.splitlines() if "sync wait" in line
                          and "median time" in line)
            self.assertNotIn("GPU", header)  # GPU time and span: not measured on sim
            self.assertIn("| variant | phase | op | reason | count | waited | waited/step | where |",
                          markdown)

            # bench compare: the per-step sync wait is a diagnostic series (--phase-times).
            plain = bench("compare", out, out, "--format", "json")
            self.assertEqual(plain.returncode, 0, plain.stderr)
            self.assertFalse([row for row in json.loads(plain.stdout)["rows"]
                              if row["metric"] == "samples.sync.wait_time"])
            # metric_sync runs 2 ranks, here on 2 CPUs: its times are inconclusive by rule.
            js = bench("compare", out, out, "--format", "json", "--phase-times",
                       "--min-samples", "5")
            self.assertEqual(js.returncode, 0, js.stdout + js.stderr)
            rows = [row for row in json.loads(js.stdout)["rows"]
                    if row["metric"] == "samples.sync.wait_time"]
            self.assertEqual([row["variant"] for row in rows], [variant])
            self.assertEqual((rows[0]["base"], rows[0]["head"]),
                             (statistics.median(v["samples"]["sync.wait_time"]),) * 2)
            self.assertIn(rows[0]["change"], ("unchanged", "inconclusive"))


class ResumeAdamRun(unittest.TestCase):
    """One real run of the main job, shared by the checks below."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.report_path = os.path.join(cls.tmp.name, "report.json")
        cls.md_path = os.path.join(cls.tmp.name, "summary.md")
        cls.result = bench("--scenario", "resume_adam", "--device", "sim", "--out", cls.report_path,
                        "--markdown", cls.md_path, "--gate", GATE)
        with open(cls.report_path) as f:
            cls.report = json.load(f, parse_constant=lambda c: (_ for _ in ()).throw(
                ValueError("non-JSON constant " + c)))
        cls.variants = {v["name"]: v for v in cls.report["scenarios"][0]["variants"]}
        cls.params = int(cls.report["scenarios"][0]["config"]["parameter_tensors"])

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_exit_code_zero_and_gate_passes(self):
        self.assertEqual(self.result.returncode, 0, self.result.stdout + self.result.stderr)
        self.assertIn("gate:", self.result.stdout)
        self.assertNotIn("FAIL", self.result.stdout)

    def test_console_table_lists_every_variant(self):
        for name in self.variants:
            self.assertIn(name, self.result.stdout)
        self.assertIn("***WARNING*** simulated device", self.result.stdout)

    def test_item_waits_are_timed_and_zero_on_sim(self):
        # The sim runs every op as it is launched: nothing is queued before .item()'s read, so
        # its wait is 0, and timed (a number, not null).
        for name in ("resume_move_all/foreach", "fresh/foreach"):
            v = self.variants[name]
            self.assertEqual(v["total"]["sync.wait_time"], 0, name)
            self.assertEqual(v["samples"]["sync.wait_time"], [0] * v["measured_steps"], name)
        item = [s for s in self.variants["resume_move_all/foreach"]["sync_sites"]
                if s["op"] == "aten::_local_scalar_dense"]
        self.assertEqual([(s["reason"], s["wait_ns"]) for s in item], [("item", 0)] * 2)  # 2 lines
        self.assertGreater(item[0]["count"], 0)

    def test_progress_on_stderr(self):
        self.assertIn("[resume_adam 1/8]", self.result.stderr)

    def test_report_header(self):
        r = self.report
        self.assertEqual(r["schema_version"].split(".")[0], "1")
        p = r["provenance"]
        for key in ("tool_version", "git_sha", "git_dirty", "argv", "build_type",
                    "libtorch_version", "device", "instrument", "instrument_status"):
            self.assertIn(key, p)
        self.assertEqual(p["device"], "sim")
        self.assertEqual(p["instrument_status"], "ok")
        self.assertTrue(p["libtorch_version"].startswith("2.11"))

    def test_move_all_costs_items_per_parameter(self):
        for impl, per_param in (("foreach", 2), ("forloop", 1)):
            fresh = self.variants["fresh/" + impl]
            moved = self.variants["resume_move_all/" + impl]
            for metric in ("d2h.count", "sync.count"):
                self.assertEqual(per_step(moved, metric) - per_step(fresh, metric),
                                 per_param * self.params, (impl, metric))
            for policy in ("keep_step", "rebuild"):
                v = self.variants["resume_%s/%s" % (policy, impl)]
                for metric in ("d2h.count", "sync.count", "h2d.count", "launch.count"):
                    self.assertEqual(per_step(v, metric), per_step(fresh, metric),
                                     (impl, policy, metric))

    def test_sync_sites_name_item_in_optimizer_step_by_line(self):
        sites = self.variants["resume_move_all/foreach"]["sync_sites"]
        item = [s for s in sites if s["op"] == "aten::_local_scalar_dense"]
        # foreach Adam reads each step tensor back twice, on two lines (its two bias corrections)
        self.assertEqual(len(item), 2)
        for site in item:
            self.assertEqual(site["phase"], "optimizer.step")
            self.assertEqual(site["count"], self.params * self.variants[
                "resume_move_all/foreach"]["measured_steps"])
            self.assertRegex(site["frame"],
                             r"^harness/runtime/optim/adam_foreach\.cpp:\d+ in multi_tensor_adam$")
        self.assertNotEqual(item[0]["frame"], item[1]["frame"])
        self.assertEqual(self.report["schema_version"], "1.11.0")
        self.assertIn("adam_foreach.cpp:", self.result.stdout)  # the console's where column

    def test_resumed_runs_are_correct(self):
        for name, v in self.variants.items():
            self.assertEqual(v["status"], "ok", name)
            if name.startswith("resume_"):
                self.assertTrue(v["correctness"]["checked"], name)
                self.assertTrue(v["correctness"]["passed"], v["correctness"]["detail"])

    def test_no_nan_and_timing_present(self):
        for v in self.variants.values():
            self.assertGreater(v["timing"]["step_time.median"], 0)
            for value in v["per_step"].values():
                self.assertTrue(value is None or math.isfinite(value))

    def test_says_what_it_wrote(self):
        self.assertIn(f"bench: wrote {self.report_path}, {self.md_path}\n", self.result.stderr)

    def test_markdown_written(self):
        with open(self.md_path) as f:
            text = f.read()
        self.assertIn("resume_move_all/foreach", text)
        # It ends with the gate's outcomes, as the HTML report shows them.
        gate = text[text.index("### Gate `"):]
        self.assertTrue(gate.startswith("### Gate `%s`: passed" % GATE), gate[:200])
        self.assertIn("| PASS | resume_adam | resume_keep_step/foreach | per_step.d2h.count |", gate)

    def test_same_counts_twice(self):
        again_path = os.path.join(self.tmp.name, "again.json")
        run = bench("--scenario", "resume_adam", "--device", "sim", "--out", again_path, "-q")
        self.assertEqual(run.returncode, 0, run.stderr)
        with open(again_path) as f:
            again = {v["name"]: v for v in json.load(f)["scenarios"][0]["variants"]}
        units = self.report["measurements"]
        def counts_only(measurements):  # times (unit ns: phase times, sync waits) are not counts
            return {k: x for k, x in measurements.items() if units[k]["unit"] != "ns"}
        def sites_only(sites):  # the time waited at a site is a time
            return [{k: x for k, x in s.items() if k != "wait_ns"} for s in sites]
        for name, v in self.variants.items():
            for key in ("per_step", "total"):
                self.assertEqual(counts_only(v[key]), counts_only(again[name][key]), (name, key))
            self.assertEqual(v["launches_by_op"], again[name]["launches_by_op"], name)
            self.assertEqual(sites_only(v["sync_sites"]), sites_only(again[name]["sync_sites"]), name)
            self.assertEqual({p: counts_only(m) for p, m in v["phases"].items()},
                             {p: counts_only(m) for p, m in again[name]["phases"].items()}, name)


class FusedAdamRun(unittest.TestCase):
    """The implementation table, the scaling table and the fused_adam gate."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        path = os.path.join(cls.tmp.name, "fused.json")
        cls.result = bench("--scenario", "fused_adam", "--device", "sim", "--out", path, "--gate",
                           os.path.join(SOURCE_DIR, "reports", "gates", "fused_adam.json"))
        with open(path) as f:
            cls.scenario = json.load(f)["scenarios"][0]
        cls.variants = {v["name"]: v for v in cls.scenario["variants"]}

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_gate_passes(self):
        self.assertEqual(self.result.returncode, 0, self.result.stdout + self.result.stderr)
        self.assertIn("optimizer.step alone", self.result.stdout)

    def test_launches_scale_per_parameter_per_op_and_per_group(self):
        per_impl = {"forloop": lambda n: 7 * n, "foreach": lambda n: 7, "fused": lambda n: 2,
                    "capturable": lambda n: 17}
        for impl, expected in per_impl.items():
            for n in (10, 100, 1000):
                for numel in (256, 16384):
                    v = self.variants["scale/%s/tensors=%d/numel=%d" % (impl, n, numel)]
                    self.assertEqual(per_step(v, "launch.count"), expected(n), v["name"])
                    self.assertEqual(per_step(v, "sync.count"), 0, v["name"])

    def test_only_host_step_implementations_sync_after_move_all(self):
        params = int(self.scenario["config"]["parameter_tensors"])
        expected = {"forloop": params, "foreach": 2 * params, "fused": 0, "capturable": 0}
        for impl, syncs in expected.items():
            self.assertEqual(per_step(self.variants["resumed_move_all/" + impl], "sync.count"),
                             syncs, impl)
            self.assertEqual(per_step(self.variants["fresh/" + impl], "sync.count"), 0, impl)
            self.assertTrue(self.variants["resumed_move_all/" + impl]["correctness"]["passed"])

    def test_scaling_table_in_json(self):
        titles = [t["title"] for t in self.scenario["tables"]]
        self.assertTrue(any("optimizer.step alone" in t for t in titles), titles)


class Trace(unittest.TestCase):
    def test_trace_is_chrome_json_with_phases_and_device_events(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "trace.json")
            report_path = os.path.join(tmp, "r.json")
            run = bench("--scenario", "resume_adam", "--device", "sim", "--variant",
                        "resume_move_all/foreach", "--trace", path, "-o", report_path, "-q")
            self.assertEqual(run.returncode, 0, run.stderr)
            with open(path) as f:
                doc = json.load(f)
            with open(report_path) as f:
                variant = json.load(f)["scenarios"][0]["variants"][0]
            self.assertEqual(sorted(os.listdir(tmp)), ["r.json", "trace.json"])  # no temporary
        events = doc["traceEvents"]
        phases = {e["name"] for e in events if e.get("cat") == "phase"}
        for phase in ("train.forward", "train.backward", "optimizer.step", "checkpoint.load"):
            self.assertIn(phase, phases)
        kernels = [e for e in events if e.get("cat") == "kernel"]
        self.assertTrue(kernels and all(e["dur"] >= 0 for e in kernels))
        syncs = [e for e in events if e.get("cat") == "sync"]
        item = [e for e in syncs if e["name"] == "aten::_local_scalar_dense"]
        self.assertEqual(len(item), 200)  # 2 x 10 parameter tensors x 10 measured steps
        self.assertTrue(all(e["args"]["phase"] == "optimizer.step" for e in item))
        self.assertTrue(all(e["args"]["site"].startswith("harness/runtime/optim/adam_foreach.cpp:")
                            for e in item))
        sections = [e["name"] for e in events if e.get("cat") == "variant" and e["ph"] == "B"]
        self.assertIn("resume_adam resume_move_all/foreach", sections)
        # The memory timeline: device and host memory at every phase boundary; its highest peak
        # is the report's.
        device = [e["args"] for e in events if e["ph"] == "C" and e["name"] == "device memory"]
        host = [e["args"] for e in events if e["ph"] == "C" and e["name"] == "host memory"]
        self.assertEqual(len(device), len(host))
        self.assertGreater(len(device), 2 * len(phases))
        self.assertTrue(all(a["peak"] >= a["allocated"] >= 0 for a in device))
        self.assertEqual(max(a["peak"] for a in device), variant["total"]["memory.peak_bytes"])


class Expectations(unittest.TestCase):
    """--write-expectations, then --expect: passes on the same code, fails naming the line when a
    site is above its count, is bad input when the file is."""

    def test_write_then_expect(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "expect.json")
            args = ["--scenario", "resume_adam", "--device", "sim", "--variant",
                    "resume_move_all/foreach", "--steps", "2", "-q"]
            r = bench(*args, "--write-expectations", path)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(path) as f:
                doc = json.load(f)
            items = [e for e in doc["sites"] if e["what"] == "aten::_local_scalar_dense, item"]
            self.assertEqual([e["per_step"] for e in items], [10, 10])
            r = bench(*args, "--expect", path)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn("0 unexpected, 0 above their count, 0 stale", r.stdout)
            items[0]["per_step"] = 9
            items[0]["reason"] = "one fewer, to see it fail"
            with open(path, "w") as f:
                json.dump(doc, f)
            r = bench(*args, "--expect", path)
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            self.assertRegex(r.stdout, r"ABOVE +resume_adam resume_move_all/foreach: 10 sync/step "
                                       r"at harness/runtime/optim/adam_foreach\.cpp:\d+ in "
                                       r"multi_tensor_adam .*expected 9 \(one fewer, to see it fail\)")
            with open(path, "w") as f:
                f.write('{"expectations_version": 2, "sites": []}')
            r = bench(*args, "--expect", path)
            self.assertEqual(r.returncode, 2)
            self.assertIn("expectations_version", r.stderr)


class InstrumentOverhead(unittest.TestCase):
    """--instrument-overhead: every second step uninstrumented, same counts per step."""

    def run_bench(self, *extra):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "r.json")
            r = bench("--scenario", "resume_adam", "--device", "sim", "--variant", "resume_move_all/foreach",
                      "--quiet", "--out", path, *extra)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertEqual("instrument overhead (interleaved steps" in r.stdout,
                             "--instrument-overhead" in extra, r.stdout)
            with open(path) as f:
                return json.load(f)["scenarios"][0]["variants"][0]

    def test_counts_per_step_unchanged_and_both_step_times_reported(self):
        plain = self.run_bench("--steps", "3")
        mixed = self.run_bench("--steps", "6", "--instrument-overhead")
        self.assertEqual(mixed["measured_steps"], 3)
        for metric in ("launch.count", "h2d.count", "d2h.count", "sync.count"):
            self.assertEqual(per_step(mixed, metric), per_step(plain, metric), metric)
        timing = mixed["timing"]
        self.assertEqual(timing["step_time.count"], 3)
        self.assertEqual(timing["step_time_uninstrumented.count"], 3)
        self.assertGreater(timing["instrument_overhead.median_ratio"], 0)
        self.assertNotIn("step_time_uninstrumented.count", plain["timing"])

    def test_without_steps_it_measures_enough_steps_for_an_interval(self):
        mixed = self.run_bench("--instrument-overhead")
        timing = mixed["timing"]
        self.assertEqual(timing["step_time.count"], 30)
        self.assertEqual(timing["step_time_uninstrumented.count"], 30)
        low, ratio, high = (timing["instrument_overhead." + k]
                            for k in ("ratio_low", "ratio", "ratio_high"))
        self.assertIsNotNone(low)
        self.assertLessEqual(low, ratio)
        self.assertLessEqual(ratio, high)


class GateFailures(unittest.TestCase):
    def test_violated_rule_exits_1_and_names_it(self):
        with tempfile.TemporaryDirectory() as tmp:
            gate = os.path.join(tmp, "gate.json")
            with open(gate, "w") as f:
                json.dump({"gate_version": 1, "rules": [
                    {"name": "move_all adds no D2H", "scenario": "resume_adam",
                     "variant": "resume_move_all/*", "metric": "per_step.d2h.count",
                     "relative_to": "fresh/*", "max_ratio": 1.0}]}, f)
            run = bench("--scenario", "resume_adam", "--device", "sim", "--variant", "*/foreach",
                        "--gate", gate, "-q")
            self.assertEqual(run.returncode, 1, run.stdout + run.stderr)
            self.assertIn("FAIL", run.stdout)
            self.assertIn("move_all adds no D2H", run.stdout)
            self.assertIn("resume_move_all/foreach", run.stdout)
            self.assertIn("per_step.d2h.count", run.stdout)


class BadInput(unittest.TestCase):
    def assert_bad_input(self, run, *needles):
        self.assertEqual(run.returncode, 2, run.stdout + run.stderr)
        for needle in needles:
            self.assertIn(needle, run.stderr)

    def test_unknown_scenario(self):
        self.assert_bad_input(bench("--scenario", "nope"), "unknown scenario 'nope'", "resume_adam")

    def test_unknown_flag(self):
        self.assert_bad_input(bench("--scenario", "resume_adam", "--frobnicate"), "frobnicate")

    def test_bad_device(self):
        self.assert_bad_input(bench("--scenario", "resume_adam", "--device", "tpu"), "tpu")

    def test_no_scenario(self):
        self.assert_bad_input(bench(), "no scenario")

    def test_variant_matching_nothing(self):
        self.assert_bad_input(bench("--scenario", "resume_adam", "--variant", "zzz*"), "zzz*")

    def test_malformed_gate_file(self):
        with tempfile.TemporaryDirectory() as tmp:
            gate = os.path.join(tmp, "gate.json")
            with open(gate, "w") as f:
                f.write('{"gate_version": 1, "rules": [ {"metric": ')
            self.assert_bad_input(bench("--scenario", "resume_adam", "--gate", gate), gate)

    def test_missing_gate_file(self):
        self.assert_bad_input(bench("--scenario", "resume_adam", "--gate", "/nonexistent.json"),
                              "/nonexistent.json")

    def test_malformed_baseline(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "base.json")
            with open(path, "w") as f:
                f.write("[1, 2")
            self.assert_bad_input(bench("--scenario", "resume_adam", "--baseline", path), path)

    def test_out_in_missing_directory_writes_nothing(self):
        run = bench("--scenario", "resume_adam", "--out", "/nonexistent-dir/r.json")
        self.assert_bad_input(run, "/nonexistent-dir")

    def test_out_naming_a_directory_is_bad_input(self):
        with tempfile.TemporaryDirectory() as tmp:
            for out in (tmp, tmp + "/"):
                run = bench("--scenario", "resume_adam", "--out", out)
                self.assert_bad_input(run, "is a directory; give a file name")
            self.assertEqual(os.listdir(tmp), [])  # nothing written

    def test_gate_with_a_number_out_of_range_is_bad_input(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "gate.json")
            with open(path, "w") as f:
                f.write('{"gate_version": 1, "rules": [{"scenario": "resume_adam", "variant": "*",'
                        ' "metric": "per_step.sync.count", "max": 1e400}]}')
            self.assert_bad_input(bench("--scenario", "resume_adam", "--gate", path), path)

    def test_cuda_without_a_usable_gpu(self):
        smi = shutil.which("nvidia-smi")
        if smi and subprocess.run([smi, "-L"], capture_output=True).returncode == 0:
            self.skipTest("a GPU answers here")
        run = bench("--scenario", "resume_adam", "--device", "cuda")
        self.assert_bad_input(run, "cuda")
        # A CPU-only build and a CUDA build on a machine without a GPU say different things.
        self.assertRegex(run.stderr, r"--device cuda: (this build has no CUDA support|no GPU is usable)")


class HostileNames(unittest.TestCase):
    """A name read from a report (a variant with a NUL, an escape, a line break, HTML) shows
    escaped in compare's text and markdown: it can neither end nor forge a line, nor become HTML
    (issue 43: before, the NUL went raw into both and <b> into the markdown)."""

    def test_compare_text_and_markdown_escape_names(self):
        with tempfile.TemporaryDirectory() as tmp:
            base, head = os.path.join(tmp, "base.json"), os.path.join(tmp, "head.json")
            run = bench("--scenario", "resume_adam", "--device", "sim", "--steps", "1",
                        "--variant", "fresh/foreach", "--out", base, "--quiet")
            self.assertEqual(run.returncode, 0, run.stderr)
            with open(base) as f:
                report = json.load(f)
            variant = report["scenarios"][0]["variants"][0]
            variant["name"] = "fresh\0<b>x</b>\x1b[2J\nREGRESSION"
            variant["per_step"]["sync.count"] = 0
            with open(base, "w") as f:
                json.dump(report, f)
            variant["per_step"]["sync.count"] = 1
            with open(head, "w") as f:
                json.dump(report, f)
            text = subprocess.run([BENCH, "compare", base, head], capture_output=True,
                                  stdin=subprocess.DEVNULL, timeout=60)
            md = subprocess.run([BENCH, "compare", base, head, "--format", "markdown"],
                                capture_output=True, stdin=subprocess.DEVNULL, timeout=60)
        for run in (text, md):
            self.assertEqual(run.returncode, 1, run.stderr)
            for raw in (b"\0", b"\x1b", b"\nREGRESSION"):
                self.assertNotIn(raw, run.stdout)
        self.assertIn(b"fresh\\x00<b>x</b>\\x1b[2J\\x0aREGRESSION", text.stdout)
        self.assertIn(b"fresh\\x00&lt;b&gt;x&lt;/b&gt;\\x1b[2J REGRESSION", md.stdout)
        self.assertNotIn(b"<b>", md.stdout)


class SimSpeed(unittest.TestCase):
    """benchmarks/sim_speed's progress: a line per round into a file or pipe (a CI log), one line
    rewritten in place on a terminal. Before, a log read "round 1/2round 2/2" (issue 43)."""

    def test_a_line_per_round_when_not_a_terminal(self):
        sim_speed = os.environ.get("SIM_SPEED")
        if not sim_speed:
            self.skipTest("the benchmarks are not built (HARNESS_BUILD_BENCHMARKS=OFF)")
        # Bytes: text mode would read each carriage return as a line break.
        run = subprocess.run([sim_speed, "--rounds", "3", "--case", "add_"], capture_output=True,
                             timeout=300, stdin=subprocess.DEVNULL)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertNotIn(b"\r", run.stderr)
        self.assertEqual([l for l in run.stderr.split(b"\n") if l.startswith(b"round")],
                         [b"round 1/3", b"round 2/3", b"round 3/3"])
        self.assertIn(b"add_", run.stdout)


class Listing(unittest.TestCase):
    def test_list_shows_scenarios_and_variants(self):
        run = bench("--list")
        self.assertEqual(run.returncode, 0)
        self.assertIn("resume_adam", run.stdout)
        self.assertIn("resume_keep_step/foreach", run.stdout)
        self.assertIn("scale/fused/tensors=1000/numel=256", run.stdout)

    def test_help_exits_zero(self):
        self.assertEqual(bench("--help").returncode, 0)

    def test_help_states_each_scenarios_default_ranks(self):
        text = " ".join(bench("--help").stdout.split())  # CLI11 wraps the description
        for scenario in ("zero_broadcast", "engine_reuse", "metric_sync", "sharded_setup"):
            self.assertIn(scenario + ": 2", text)
        self.assertIn("the others 1", text)


if __name__ == "__main__":
    unittest.main()

"""Runs bench with real local ranks (processes on loopback): zero_broadcast on 2 and 4 ranks, the
merged report, the gate, a rank killed mid-run, and bad rank environments.

Environment: BENCH (path of the bench binary), SOURCE_DIR (the repository root).
"""
import json
import os
import signal
import subprocess
import tempfile
import time
import unittest

BENCH = os.environ["BENCH"]
SOURCE_DIR = os.environ["SOURCE_DIR"]
GATE = os.path.join(SOURCE_DIR, "reports", "gates", "zero_broadcast.json")
RANK_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in RANK_ENV}
    env.update(extra)
    return env


def bench(*args, env=None, timeout=300):
    return subprocess.run([BENCH, *args], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL, env=env or clean_env())


def strict_json(path):
    with open(path) as f:
        return json.load(f, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))


class RankTraces(unittest.TestCase):
    """--trace with ranks: every rank's timeline in one file, a process per rank."""

    def test_one_trace_with_a_process_per_rank(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "trace.json")
            r = bench("--scenario", "zero_broadcast", "--device", "sim", "--nproc", "2",
                      "--variant", "param_broadcast/bucketed", "--trace", path, "--quiet")
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            doc = strict_json(path)
            self.assertEqual(sorted(os.listdir(tmp)), ["trace.json"])  # nothing else left
        events = doc["traceEvents"]
        names = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
        self.assertEqual(names, {0: "rank 0", 1: "rank 1"})
        for rank in (0, 1):
            mine = [e for e in events if e["pid"] == rank and e["ph"] != "M"]
            collectives = [e for e in mine if e.get("cat") == "collective"]
            self.assertTrue(collectives, "rank %d has no collectives in the trace" % rank)
            self.assertTrue(any(e["name"] == "train.grad_sync" for e in mine))
        # Both ranks' times are on one clock: their first events are close together.
        first = [min(e["ts"] for e in events if e["pid"] == r and "ts" in e and e["ph"] != "M")
                 for r in (0, 1)]
        self.assertLess(abs(first[0] - first[1]), 30e6)  # microseconds


class ScenariosAtTheirOwnWorldSize(unittest.TestCase):
    """Scenarios of different default world sizes in one command: each runs as it would alone."""

    @staticmethod
    def counts(report):
        return {(s["name"], v["name"]): (s["world_size"], v["per_step"]["launch.count"],
                                         v["per_step"]["sync.count"], v["per_step"]["d2h.count"])
                for s in report["scenarios"] for v in s["variants"]}

    def run_report(self, *args):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "report.json")
            trace = os.path.join(tmp, "trace.json")
            r = bench(*args, "--device", "sim", "--out", out, "--trace", trace, "--quiet")
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            return r, strict_json(out), strict_json(trace)

    def test_three_scenarios_give_the_counts_each_has_alone(self):
        variants = ["--variant", "fresh/forloop", "--variant", "consolidate/tensor"]
        r, together, trace = self.run_report("-s", "fused_adam", "-s", "zero_broadcast",
                                             "-s", "resume_adam", *variants)
        self.assertEqual([s["name"] for s in together["scenarios"]],
                         ["fused_adam", "zero_broadcast", "resume_adam"])  # as asked
        self.assertEqual(together["provenance"]["world_size"], 2)
        self.assertIn("ranks: 2", r.stdout)
        alone = {}
        for name, variant in (("fused_adam", "fresh/forloop"), ("resume_adam", "fresh/forloop"),
                              ("zero_broadcast", "consolidate/tensor")):
            _, report, _ = self.run_report("-s", name, "--variant", variant)
            alone.update(self.counts(report))
        self.assertEqual(self.counts(together), alone)
        got = self.counts(together)
        self.assertEqual(got[("fused_adam", "fresh/forloop")][:2], (1, 100))  # not 200: not summed
        self.assertEqual(got[("resume_adam", "fresh/forloop")][0], 1)
        self.assertEqual(got[("zero_broadcast", "consolidate/tensor")][0], 2)
        # One trace: both ranks' processes, rank 0's holding the scenarios it ran alone too.
        events = trace["traceEvents"]
        names = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
        self.assertEqual(names, {0: "rank 0", 1: "rank 1"})
        rank0 = {e["name"] for e in events if e["pid"] == 0 and e["ph"] != "M"}
        self.assertIn("fused_adam fresh/forloop", rank0)

    def test_nproc_sets_the_world_of_every_scenario(self):
        _, report, _ = self.run_report("-s", "resume_adam", "-s", "zero_broadcast", "--nproc", "2",
                                       "--variant", "fresh/forloop", "--variant",
                                       "consolidate/tensor")
        got = self.counts(report)
        self.assertEqual(got[("resume_adam", "fresh/forloop")][:2], (2, 200))  # summed over 2

    def test_all_runs_every_registered_scenario(self):
        r = bench("--list")
        self.assertEqual(r.returncode, 0, r.stderr)
        registered = [line for line in r.stdout.splitlines() if line and not line[0].isspace()]
        r, report, _ = self.run_report("--scenario", "all", "--variant", "fresh/forloop",
                                       "--variant", "consolidate/tensor")
        self.assertEqual(sorted(s["name"] for s in report["scenarios"]), sorted(registered))


def phase_metric(variant, phase, name):
    return variant["phases"][phase][name]


class ShardedSetupRanks(unittest.TestCase):
    """sharded_setup: what each set-up path copies and broadcasts, per rank, on 2 and 4 ranks."""

    def run_ranks(self, nproc):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "report.json")
            gate = os.path.join(SOURCE_DIR, "reports", "gates", "sharded_setup.json")
            r = bench("--scenario", "sharded_setup", "--device", "sim", "--nproc", str(nproc),
                      "--out", out, "--gate", gate)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn("gate: 17 passed, 0 failed", r.stdout)
            report = strict_json(out)
        scenario = report["scenarios"][0]
        self.assertEqual(scenario["world_size"], nproc)
        self.units = report["measurements"]
        return int(scenario["config"]["parameter_bytes"]), {
            v["name"]: v for v in scenario["variants"]}

    def counts(self, measurements):
        """The counts of a measurement list: times (unit ns, such as sync.wait_time) left out."""
        return {k: x for k, x in measurements.items() if self.units[k]["unit"] != "ns"}

    def check(self, nproc):
        p, v = self.run_ranks(nproc)
        h2d = lambda name: phase_metric(v[name], "setup", "h2d.bytes")
        for r in range(nproc):
            self.assertEqual(h2d("rank%d/full_then_shard" % r), p)  # the whole model, every rank
            self.assertEqual(h2d("rank%d/meta_init" % r), 0)
            self.assertEqual(h2d("rank%d/rank0_broadcast" % r), p if r == 0 else 0)
            self.assertEqual(phase_metric(v["rank%d/rank0_broadcast" % r], "setup",
                                          "collective.broadcast.count"), 5)  # one per unit
            # Memory: the whole model on the host where it is built whole; never on meta.
            host = lambda name: phase_metric(v[name], "setup.model", "host_memory.peak_bytes")
            self.assertEqual(host("rank%d/full_then_shard" % r), p)
            self.assertEqual(host("rank%d/meta_init" % r), 0)
            self.assertEqual(host("rank%d/rank0_broadcast" % r), p if r == 0 else 0)
            peak = lambda name: phase_metric(v[name], "setup", "memory.peak_bytes")
            self.assertGreaterEqual(peak("rank%d/full_then_shard" % r), p)  # all of it at once
            self.assertLess(peak("rank%d/meta_init" % r), peak("rank%d/full_then_shard" % r))
            # Each rank ends its set-up holding its shards: about P / world, each of the 5
            # units' shards in whole 512-byte blocks (as CUDA's caching allocator gives them).
            held = phase_metric(v["rank%d/meta_init" % r], "setup", "memory.allocated_bytes")
            self.assertLess(abs(held - p / nproc), 0.05 * p + 5 * 512)
        for name in ("full_then_shard", "meta_init", "rank0_broadcast"):
            self.assertTrue(v[name]["correctness"]["passed"], v[name]["correctness"])
            # Training steps cost the same after every set-up.
            self.assertEqual(self.counts(v[name]["per_step"]),
                             self.counts(v["full_then_shard"]["per_step"]))
            # Waits for the gathers and reduce-scatters are device-side, as with NCCL: no syncs.
            self.assertEqual(v[name]["per_step"]["sync.count"], 0)
            self.assertEqual(v[name]["per_step"]["collective_wait.count"],
                             v[name]["per_step"]["collective.count"])

    def test_two_ranks(self):
        self.check(2)

    def test_four_ranks(self):
        self.check(4)


class GradAccumulationRanks(unittest.TestCase):
    """grad_accumulation: the gradient reductions of an optimizer step over M micro-batches, per
    rank, with the sync on for every micro-batch and only for the last, under DDP and sharding."""

    def test_reductions_scale_with_the_micro_batches_only_when_the_sync_stays_on(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "report.json")
            gate = os.path.join(SOURCE_DIR, "reports", "gates", "grad_accumulation.json")
            r = bench("--scenario", "grad_accumulation", "--device", "sim", "--out", out,
                      "--gate", gate)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn("gate: 22 passed, 0 failed, 0 skipped", r.stdout)
            report = strict_json(out)
        scenario = report["scenarios"][0]
        widths = [int(w) for w in scenario["config"]["mlp_widths"].split("-")]
        gradient_bytes = 4 * sum(a * b + b for a, b in zip(widths, widths[1:]))  # float32
        v = {x["name"]: x for x in scenario["variants"]}
        for runtime, kind in (("ddp", "all_reduce"), ("sharded", "reduce_scatter")):
            for rank in (0, 1):
                step = lambda name: v["rank%d/%s/%s" % (rank, runtime, name)]["per_step"]
                one = step("micro1")
                count, moved = "collective.%s.count" % kind, "collective.%s.bytes" % kind
                for m in (4, 8):
                    every, last = step("micro%d/sync_every" % m), step("micro%d/sync_last" % m)
                    self.assertEqual(every[count], m * one[count])
                    self.assertEqual(every[moved], m * one[moved])
                    self.assertEqual(last[count], one[count])
                    self.assertEqual(last[moved], one[moved])
                    # M micro-batches' data and forward either way; waits device-side: no sync.
                    self.assertEqual(every["h2d.count"], m * one["h2d.count"])
                    self.assertEqual(every["sync.count"], 0)
                    self.assertEqual(last["sync.count"], 0)
                self.assertEqual(one[moved], gradient_bytes)  # every gradient, once a step
            # Sharded without the sync keeps whole gradients on the rank until the last
            # micro-batch: a higher device peak than reducing each one (FSDP2's trade).
            if runtime == "sharded":
                peak = lambda name: v["rank0/sharded/%s" % name]["total"]["memory.peak_bytes"]
                self.assertGreater(peak("micro4/sync_last"), peak("micro4/sync_every"))
        for name, x in v.items():
            if not name.startswith("rank1/"):
                self.assertTrue(x["correctness"]["passed"], (name, x["correctness"]))


class EngineReuseRanks(unittest.TestCase):
    """engine_reuse: the stage set-ups, the hooks, and the expected #17523 failure."""

    def test_engine_policies_on_two_ranks(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "report.json")
            gate = os.path.join(SOURCE_DIR, "reports", "gates", "engine_reuse.json")
            r = bench("--scenario", "engine_reuse", "--device", "sim", "--out", out, "--gate", gate)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)  # the expected failure is no exit 3
            self.assertIn("gate: 12 passed, 0 failed", r.stdout)
            self.assertNotIn("failed to run", r.stderr)
            self.assertIn("EXPECTED FAILURE", r.stdout)
            report = strict_json(out)
        v = {x["name"]: x for x in report["scenarios"][0]["variants"]}
        crashed = v["new_engine_private_registry"]
        self.assertEqual(crashed["status"], "expected_failure")
        self.assertIn("layer 0 (Linear 32->64) is INFLIGHT", crashed["error"])
        self.assertIn("#17523", crashed["expected_failure"])
        total = lambda name, metric: v[name]["total"][metric]
        # The hooks as DeepSpeed 0.16.9 registers them (counted on sim ranks by
        # examples/programs/lightning_deepspeed.py): the engine's two, one start-of-forward hook
        # and four per module of the tree (the LightningModule root, the layers' Sequential, 5
        # Linear and 4 ReLU layers: 11 modules): 47 an engine. Lightning clears the module's hooks
        # before an evaluation engine only: with an engine per stage, 2 sets during fit, 1 after
        # test.
        per_engine = 2 + 1 + 4 * 11
        for name, engines, left, fit in (("new_engine_per_stage", 3, 1, 2), ("reuse_engine", 1, 1, 1),
                                         ("destroy_between", 3, 1, 1)):
            rank0 = "rank0/" + name
            self.assertEqual(total(rank0, "engines.built"), engines, name)
            self.assertEqual(total(rank0, "hooks.registered"), engines * per_engine, name)
            self.assertEqual(total(rank0, "hooks.removed"), (engines - left) * per_engine, name)
            self.assertEqual(total(rank0, "hooks.installed"), left * per_engine, name)
            self.assertEqual(total(rank0, "hooks.left_behind"), (left - 1) * per_engine, name)
            self.assertEqual(total(rank0, "hooks.after_validate"), per_engine, name)
            self.assertEqual(total(rank0, "hooks.after_fit"), fit * per_engine, name)
            self.assertEqual(total(rank0, "hooks.after_test"), per_engine, name)
            self.assertIn("optimizer state and the hooks of each of the %d engine(s)" % left,
                          v[rank0]["correctness"]["detail"])
        # Every hook on the module runs on every forward: the per-stage engines' hooks cost calls.
        self.assertGreater(total("rank0/new_engine_per_stage", "hooks.calls"),
                           total("rank0/reuse_engine", "hooks.calls"))
        # Switching stages costs the reused engine nothing; a new fit engine gathers again.
        for phase in ("setup.fit", "setup.test"):
            self.assertEqual(phase_metric(v["reuse_engine"], phase, "collective.count"), 0)
            self.assertEqual(phase_metric(v["reuse_engine"], phase, "launch.count"), 0)
        self.assertGreater(phase_metric(v["new_engine_per_stage"], "setup.fit", "collective.count"), 0)
        self.assertGreater(phase_metric(v["new_engine_per_stage"], "setup.fit", "d2h.count"), 0)


    def test_device_memory_after_the_expected_failure_is_the_same_every_run(self):
        # The crashing variant leaves a prefetch in flight; its memory must be freed when the
        # variant ends, not later on Gloo's thread in the next variant's phases (it was: the
        # reused engine's setup.validate peak varied by a gathered unit from run to run).
        peaks = []
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "report.json")
            for _ in range(4):
                r = bench("--scenario", "engine_reuse", "--device", "sim", "--quiet", "--out", out,
                          "--variant", "new_engine_private_registry", "--variant", "reuse_engine")
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
                v = {x["name"]: x for x in strict_json(out)["scenarios"][0]["variants"]}
                peaks.append([phase_metric(v[name], phase, "memory.peak_bytes")
                              for name in ("rank0/reuse_engine", "rank1/reuse_engine")
                              for phase in v[name]["phases"]])
        self.assertEqual(peaks, [peaks[0]] * 4)


class MetricSyncRanks(unittest.TestCase):
    """metric_sync: what a save costs each way, on 1 and 2 ranks, and whether resumes are right."""

    def test_metric_checkpointing_on_one_and_two_ranks(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "report.json")
            gate = os.path.join(SOURCE_DIR, "reports", "gates", "metric_sync.json")
            r = bench("--scenario", "metric_sync", "--device", "sim", "--out", out, "--gate", gate)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn("gate: 11 passed, 0 failed", r.stdout)
            report = strict_json(out)
        v = {x["name"]: x for x in report["scenarios"][0]["variants"]}
        save = lambda name, what: v[name]["total"]["save." + what]
        # The one-process variants ran on rank 0 alone: not summed, no per-rank copies.
        self.assertEqual(v["world1/strategy_owned"]["axes"]["ranks"], "1")
        self.assertNotIn("rank1/world1/strategy_owned", v)
        # Per rank and save, the pre-fix fault-tolerant trainer: 3 states (2 scalar, 1 with dims) -> 3 barriers,
        # 2 + 2 x 1 all_gathers, 1 H2D (the list state's shape).
        for rank in (0, 1):
            name = "rank%d/world2/trainer_fault_tolerant" % rank
            self.assertEqual(phase_metric(v[name], "checkpoint.metric_sync",
                                          "collective.barrier.count"), 2 * 3)  # 2 saves
            self.assertEqual(phase_metric(v[name], "checkpoint.metric_sync",
                                          "collective.all_gather.count"), 2 * 4)
            self.assertEqual(save(name, "h2d.count"), 1)
        for layout in ("world1", "world2", "sharded_checkpoint"):
            for policy in ("strategy_owned", "trainer_default"):
                self.assertEqual(save(layout + "/" + policy, "collective.count"), 0, layout)
        self.assertEqual(save("world1/trainer_fault_tolerant", "collective.count"), 0)
        # Two saves in the window, both counted: the per-save figures divide by them (a merged
        # variant sums its ranks' figures).
        for name in v:
            ranks = 1 if name.startswith(("rank", "world1/")) else 2
            self.assertEqual(v[name]["total"]["saves.counted"], 2 * ranks, name)
        # Right and wrong resumes: the pre-fix trainer's fault-tolerant mode is right (rank 0
        # holds the synced states, the others reset); its default mode loses the other ranks'
        # states (rank 0 saved its own, the others reset); with the fix, DDP's one rank-0 file
        # makes every rank resume with rank 0's states, while per-rank files keep each rank's.
        correct = {name: v[name]["correctness"]["passed"] for name in v if "/" in name
                   and not name.startswith("rank")}
        self.assertEqual(correct, {
            "world1/trainer_default": True, "world1/trainer_fault_tolerant": True,
            "world1/strategy_owned": True,
            "world2/trainer_default": False, "world2/trainer_fault_tolerant": True,
            "world2/strategy_owned": False,
            "sharded_checkpoint/trainer_default": False,
            "sharded_checkpoint/trainer_fault_tolerant": True,
            "sharded_checkpoint/strategy_owned": True})
        self.assertIn("stood in for another's", v["world2/strategy_owned"]["correctness"]["detail"])
        for layout in ("world2", "sharded_checkpoint"):
            self.assertIn("states lost", v[layout + "/trainer_default"]["correctness"]["detail"])

    def test_per_save_figures_divide_by_the_saves_counted(self):
        # With --instrument-overhead every second step runs uncounted: with K = 5 one of the two
        # saves (steps 5 and 10) is counted, and the per-save figures are still those of one save.
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "report.json")
            base = os.path.join(tmp, "base.json")
            args = ("--scenario", "metric_sync", "--device", "sim", "--steps", "5", "--variant",
                    "world1/trainer_fault_tolerant", "--variant", "world2/trainer_fault_tolerant")
            r = bench(*args, "--out", base)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            r = bench(*args, "--instrument-overhead", "--out", out)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            every, half = (
                {x["name"]: x["total"] for x in strict_json(f)["scenarios"][0]["variants"]}
                for f in (base, out))
        for name in ("world1/trainer_fault_tolerant", "rank0/world2/trainer_fault_tolerant",
                     "rank1/world2/trainer_fault_tolerant"):
            self.assertEqual(every[name]["saves.counted"], 2)
            self.assertEqual(half[name]["saves.counted"], 1)
            for what in ("collective.count", "h2d.count", "launch.count"):
                self.assertEqual(half[name]["save." + what], every[name]["save." + what],
                                 name + " " + what)


class ZeroBroadcastRanks(unittest.TestCase):
    def run_ranks(self, nproc):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "report.json")
            r = bench("--scenario", "zero_broadcast", "--device", "sim", "--nproc", str(nproc),
                      "--out", out, "--gate", GATE)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            report = strict_json(out)
        self.assertEqual(report["provenance"]["world_size"], nproc)
        variants = {v["name"]: v for v in report["scenarios"][0]["variants"]}
        return r, variants

    def check(self, nproc):
        r, v = self.run_ranks(nproc)
        self.assertIn("gate: 12 passed, 0 failed", r.stdout)
        merged = ["consolidate/object_list", "consolidate/object", "consolidate/tensor",
                  "param_broadcast/per_param", "param_broadcast/bucketed"]
        for name in merged:
            self.assertIn(name, r.stdout)
            self.assertEqual(v[name]["axes"]["ranks"], str(nproc))
            for rank in range(nproc):
                per_rank = v[f"rank{rank}/{name}"]
                self.assertEqual(per_rank["axes"]["rank"], str(rank))
            # Merged counts are the sum of the ranks' counts.
            for metric in ("sync.count", "collective.count", "h2d.count", "d2h.count"):
                total = sum(v[f"rank{k}/{name}"]["per_step"][metric] for k in range(nproc))
                self.assertEqual(v[name]["per_step"][metric], total, (name, metric))
            self.assertIn("slowest_rank", v[name]["timing"])
        # The pathology, rank by rank: only the object_list receiver on rank 0 crosses devices.
        self.assertGreater(v["rank0/consolidate/object_list"]["per_step"]["cross_device_copy.count"], 0)
        for rank in range(nproc):
            tensor = v[f"rank{rank}/consolidate/tensor"]["per_step"]
            self.assertEqual(tensor["sync.count"], 0)  # its collective waits are device-side
            self.assertEqual(tensor["collective_wait.count"], tensor["collective.broadcast.count"])
            self.assertGreater(tensor["collective.broadcast.count"], 0)
        # Pickling ways: at least one host read per received object, on every receiving rank.
        for rank in range(1, nproc):
            self.assertGreater(v[f"rank{rank}/consolidate/object_list"]["per_step"]["sync.other.count"], 0)
        # Bucketed: one broadcast per rank per step; per parameter: one per parameter tensor.
        params = int(v["param_broadcast/per_param"]["per_step"]["collective.broadcast.count"]) // nproc
        self.assertEqual(params, 10)
        self.assertEqual(v["rank0/param_broadcast/bucketed"]["per_step"]["collective.broadcast.count"], nproc)
        for name in merged:
            self.assertTrue(v[name]["correctness"]["passed"], v[name]["correctness"])

    def test_two_ranks(self):
        self.check(2)

    def test_four_ranks(self):
        self.check(4)

    def test_default_is_two_ranks(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "report.json")
            r = bench("--scenario", "zero_broadcast", "--device", "sim", "--variant",
                      "consolidate/tensor", "--out", out, "-q")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(strict_json(out)["provenance"]["world_size"], 2)

    def test_single_device_scenario_on_ranks(self):
        r = bench("--scenario", "resume_adam", "--device", "sim", "--nproc", "2", "--variant",
                  "fresh/foreach", "-q")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("rank1/fresh/foreach", r.stdout)


class RankThreads(unittest.TestCase):
    """Each rank bench starts gets one intra-op thread unless the caller chose (torchrun's
    default for several ranks on a host): idle OpenMP workers of one rank spun on the cores the
    other ranks needed."""

    def threads(self, *args, env=None):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "r.json")
            r = bench("-s", "zero_broadcast", "-d", "sim", "--steps", "2", "--quiet",
                      "--variant", "consolidate/tensor", "-o", out, *args, env=env)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            return strict_json(out)["provenance"]["intra_op_threads"]

    def test_one_thread_per_rank_unless_the_caller_chose(self):
        self.assertEqual(self.threads("--nproc", "2"), 1)
        self.assertEqual(self.threads("--nproc", "2", env=clean_env(OMP_NUM_THREADS="2")), 2)


class RankFailures(unittest.TestCase):
    def test_killed_rank_ends_run_with_exit_3_and_no_orphans(self):
        proc = subprocess.Popen([BENCH, "--scenario", "zero_broadcast", "--device", "sim",
                                 "--nproc", "2", "--steps", "100000", "--timeout", "20", "-q"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=clean_env(), stdin=subprocess.DEVNULL)
        children = []
        deadline = time.time() + 60
        victim = None
        while victim is None and time.time() < deadline:
            time.sleep(0.5)
            children = [int(p) for p in subprocess.run(
                ["pgrep", "-P", str(proc.pid)], capture_output=True, text=True).stdout.split()]
            for pid in children:
                try:
                    with open(f"/proc/{pid}/environ", "rb") as f:
                        if b"\0RANK=1\0" in b"\0" + f.read():
                            victim = pid
                except OSError:
                    pass
        self.assertIsNotNone(victim, "rank 1 never started")
        time.sleep(1.0)  # well inside the run
        os.kill(victim, signal.SIGKILL)
        killed_at = time.time()
        _, err = proc.communicate(timeout=60)
        self.assertLess(time.time() - killed_at, 30)
        self.assertEqual(proc.returncode, 3, err)
        self.assertIn("rank 1 of 2 was killed by signal 9", err)
        for pid in children:
            self.assertFalse(os.path.exists(f"/proc/{pid}") and
                             open(f"/proc/{pid}/stat").read().split()[2] != "Z",
                             f"rank process {pid} outlived the run")

    def _two_ranks_the_torchrun_way(self, port):
        """Rank 0 and rank 1 started as torchrun starts them (no launcher of bench's to watch
        them), well inside a long run."""
        ranks = [subprocess.Popen(
            [BENCH, "--scenario", "zero_broadcast", "--device", "sim", "--steps", "100000",
             "--timeout", "300", "-q"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True, stdin=subprocess.DEVNULL,
            env=clean_env(RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE="2", LOCAL_WORLD_SIZE="2",
                          MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port)))
            for r in range(2)]
        time.sleep(5)
        self.assertIsNone(ranks[0].poll(), "rank 0 ended early")
        return ranks

    def test_a_peers_death_is_named_within_seconds_not_at_the_timeout(self):
        # Issue 53: rank 0 waited for the dead rank's result until the 300 s timeout.
        ranks = self._two_ranks_the_torchrun_way(29741)
        ranks[1].kill()
        ranks[1].wait()
        died_at = time.time()
        _, err = ranks[0].communicate(timeout=120)
        self.assertLess(time.time() - died_at, 30)
        self.assertEqual(ranks[0].returncode, 3, err)
        self.assertTrue(f"rank 1 (pid {ranks[1].pid}) died" in err or
                        "Connection closed by peer" in err, err[-2000:])

    def test_sigterm_ends_a_rank_whose_peer_died_at_once(self):
        # Issue 53: torchrun's SIGTERM to the survivor was ignored until the store's timeout.
        ranks = self._two_ranks_the_torchrun_way(29743)
        ranks[1].kill()
        ranks[1].wait()
        ranks[0].send_signal(signal.SIGTERM)
        sent_at = time.time()
        _, err = ranks[0].communicate(timeout=120)
        self.assertLess(time.time() - sent_at, 10)
        self.assertIn(ranks[0].returncode, (143, 3), err)  # the stop, or the death seen first
        self.assertNotIn("frame #", err)

    def test_lonely_rank_times_out_with_exit_3(self):
        r = bench("--scenario", "zero_broadcast", "--device", "sim", "--timeout", "2", "-q",
                  env=clean_env(WORLD_SIZE="2", RANK="0", MASTER_ADDR="127.0.0.1",
                                MASTER_PORT="29731"))
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertIn("rank 0: rendezvous at 127.0.0.1:29731 failed", r.stderr)
        self.assertNotIn("frame #", r.stderr)

    def test_malformed_rank_environment_is_bad_input(self):
        r = bench("--scenario", "resume_adam", "--device", "sim", env=clean_env(WORLD_SIZE="two"))
        self.assertEqual(r.returncode, 2)
        self.assertIn("WORLD_SIZE='two'", r.stderr)
        r = bench("--scenario", "resume_adam", "--device", "sim",
                  env=clean_env(WORLD_SIZE="2", RANK="5", MASTER_ADDR="127.0.0.1", MASTER_PORT="1"))
        self.assertEqual(r.returncode, 2)
        self.assertIn("RANK='5'", r.stderr)

    def test_nproc_inside_a_rank_is_bad_input(self):
        r = bench("--scenario", "resume_adam", "--device", "sim", "--nproc", "2",
                  env=clean_env(WORLD_SIZE="1", RANK="0"))
        self.assertEqual(r.returncode, 2)
        self.assertIn("--nproc", r.stderr)

    def test_bad_nproc(self):
        r = bench("--scenario", "zero_broadcast", "--nproc", "0")
        self.assertEqual(r.returncode, 2)

    def test_world_size_one_is_a_group_of_one(self):
        r = bench("--scenario", "zero_broadcast", "--device", "sim",
                  env=clean_env(WORLD_SIZE="1", RANK="0"))
        # World size 1 is allowed: a process group of one rank.
        self.assertEqual(r.returncode, 0, r.stderr)


if __name__ == "__main__":
    unittest.main()

"""bench --compute shapes (issue 52): every scenario counted without computing a value, the same
as when every op is computed.

Run by ctest (cli_compute_shapes) with BENCH set. One run of every scenario in each mode
(--steps 2), shared by the tests: launches by op, copies with bytes, syncs, collectives with
bytes, sync and copy sites and events must be equal, variant by variant, except where a
placeholder value changes what the scenario does (PLACEHOLDER_CHANGES, each with why).
"""
from __future__ import annotations

import json
import os
import subprocess
import tempfile
import unittest

BENCH = os.environ["BENCH"]

# Variants whose code reads a value back from the device and acts on it, so that the placeholder
# (zero) makes them do something else. Each with what it reads.
PLACEHOLDER_CHANGES = {
    # The optimizer state pickled into a device byte tensor, broadcast, read back and unpickled:
    # its size and bytes come back as zeros, the checkpoint reader refuses them.
    ("zero_broadcast", "consolidate/object_list"): "fails",
    ("zero_broadcast", "consolidate/object"): "fails",
    ("zero_broadcast", "rank0/consolidate/object_list"): "fails",
    ("zero_broadcast", "rank0/consolidate/object"): "fails",
    # The metric states' sizes are all-gathered and compared with this rank's: zeros differ, so
    # the states are padded before the gather (one aten::sub more, one aten::eq less per gather).
    **{("metric_sync", f"{rank}{world}/trainer_fault_tolerant"): "differs"
       for rank in ("", "rank0/", "rank1/") for world in ("world2", "sharded_checkpoint")},
}

_NOT_COUNTS = ("time", "host_memory", "cpu", "wait", "memory.")


def _counted(variant: dict) -> dict:
    """What must not depend on the compute mode: counts, bytes, sites (wait times left out)."""
    def figures(measurements: dict) -> dict:
        return {k: v for k, v in measurements.items() if not any(w in k for w in _NOT_COUNTS)}

    def sites(rows: list, drop_kind: str | None = None) -> list:
        return sorted(json.dumps({k: v for k, v in r.items() if "wait" not in k}, sort_keys=True)
                      for r in rows if r.get("kind") != drop_kind)
    return {
        "per_step": figures(variant["per_step"]),
        "total": figures(variant["total"]),
        "launches_by_op": variant["launches_by_op"],
        "sync_sites": sites(variant["sync_sites"]),
        "copy_sites": sites(variant["copy_sites"]),
        "event_sites": sites(variant["event_sites"], drop_kind="value_not_computed"),
    }


def _variants(report: dict) -> dict:
    return {(s["name"], v["name"]): v for s in report["scenarios"] for v in s["variants"]}


class ComputeShapes(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.runs = {}
        for mode in ("values", "shapes"):
            out = os.path.join(cls.tmp.name, f"{mode}.json")
            proc = subprocess.run(
                [BENCH, "-s", "all", "-d", "sim", "--steps", "2", "-q", "--compute", mode,
                 "-o", out], capture_output=True, text=True, timeout=600)
            with open(out) as f:
                cls.runs[mode] = (proc, json.load(f))

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_every_variant_counts_the_same_in_both_modes(self):
        values, shapes = (_variants(self.runs[m][1]) for m in ("values", "shapes"))
        self.assertEqual(set(values), set(shapes))
        compared, differs = 0, []
        for key, computed in values.items():
            if key in PLACEHOLDER_CHANGES:
                continue
            self.assertIn(computed["status"], ("ok", "expected_failure"), key)
            self.assertEqual(shapes[key]["status"], computed["status"],
                             (key, shapes[key].get("error")))
            if computed["status"] != "ok":
                continue
            if _counted(computed) != _counted(shapes[key]):
                differs.append(key)
            compared += 1
        self.assertEqual(differs, [])
        self.assertGreater(compared, 50)

    def test_device_memory_is_the_same_but_for_host_kernels_scratch(self):
        # With values, a CPU kernel's scratch (a reduction's temporaries) is charged to the
        # device as well; a meta function has none. Never more under shapes, and within 1 % or
        # four 512-byte blocks (a few bytes of scratch take a whole block, as any request does).
        values, shapes = (_variants(self.runs[m][1]) for m in ("values", "shapes"))
        for key, computed in values.items():
            if key in PLACEHOLDER_CHANGES or computed["status"] != "ok":
                continue
            peak_values = computed["total"]["memory.peak_bytes"]
            peak_shapes = shapes[key]["total"]["memory.peak_bytes"]
            self.assertLessEqual(peak_shapes, peak_values, key)
            self.assertGreaterEqual(peak_shapes, min(0.99 * peak_values, peak_values - 2048), key)

    def test_a_placeholder_that_changes_a_variant_is_named(self):
        proc, report = self.runs["shapes"]
        self.assertEqual(proc.returncode, 3, proc.stderr[-2000:])  # the variants that fail
        failed = {k for k, v in _variants(report).items() if v["status"] == "failed"}
        self.assertEqual(failed, {k for k, why in PLACEHOLDER_CHANGES.items() if why == "fails"})
        for key in failed:
            self.assertIn("--compute shapes", _variants(report)[key]["error"])
        values = _variants(self.runs["values"][1])
        for key, why in PLACEHOLDER_CHANGES.items():
            if why == "differs":  # listed because it differs: it must still
                self.assertNotEqual(_counted(values[key]), _counted(_variants(report)[key]), key)

    def test_the_report_says_what_was_not_computed(self):
        _, report = self.runs["shapes"]
        self.assertEqual(report["provenance"]["compute"], "shapes")
        self.assertEqual(self.runs["values"][1]["provenance"]["compute"], "values")
        self.assertTrue(any("--compute shapes" in w for w in report["warnings"]))
        variant = _variants(report)[("resume_adam", "resume_move_all/foreach")]
        reads = [e for e in variant["event_sites"] if e["kind"] == "value_not_computed"]
        self.assertTrue(reads, variant["event_sites"])
        self.assertTrue(all(e["what"] == "item" and "adam_foreach.cpp" in e["frame"] for e in reads))
        self.assertEqual(variant["correctness"]["checked"], False)
        self.assertIn("values not computed", variant["correctness"]["detail"])

    def test_shapes_is_a_mode_of_sim_only(self):
        proc = subprocess.run([BENCH, "-s", "resume_adam", "-d", "cpu", "--compute", "shapes"],
                              capture_output=True, text=True, timeout=60)
        self.assertEqual(proc.returncode, 2)
        self.assertIn("--compute shapes is a mode of the sim device", proc.stderr)
        proc = subprocess.run([BENCH, "-s", "resume_adam", "--compute", "sizes"],
                              capture_output=True, text=True, timeout=60)
        self.assertEqual(proc.returncode, 2)
        self.assertIn("--compute", proc.stderr)


# Llama 3 8B's parameters (dim 4096, 32 layers, 32 heads, 8 KV heads, FFN 14336, vocab 128256)
# and its units: the embedding, 32 blocks, the head (final norm and output).
_LLAMA3_8B_UNITS = [128256 * 4096] + [
    2 * 4096 + 2 * 4096 * 4096 + 2 * 1024 * 4096 + 3 * 14336 * 4096] * 32 + [4096 + 128256 * 4096]


def _padded(numel: int, world: int) -> int:
    return -(-numel // world) * world


def _bench(*args: str, timeout: int = 300) -> tuple[subprocess.CompletedProcess, dict | None]:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "r.json")
        proc = subprocess.run([BENCH, *args, "-q", "-o", out], capture_output=True, text=True,
                              timeout=timeout)
        report = None
        if os.path.exists(out):
            with open(out) as f:
                report = json.load(f)
        return proc, report


class LlamaPresets(unittest.TestCase):
    """The sharded scenarios on a Llama-shaped transformer: llama_tiny computed and checked
    against one device, counted the same without computing; llama3_8b at its full size."""

    def test_llama_tiny_counts_the_same_in_both_modes_and_trains_as_one_device(self):
        for scenario in ("sharded_setup", "engine_reuse"):
            runs = {mode: _bench("-s", scenario, "-d", "sim", "--preset", "llama_tiny",
                                 "--steps", "2", "--compute", mode) for mode in ("values", "shapes")}
            values, shapes = (_variants(runs[m][1]) for m in ("values", "shapes"))
            self.assertEqual(set(values), set(shapes))
            for key, computed in values.items():
                self.assertEqual(shapes[key]["status"], computed["status"], key)
                if computed["status"] != "ok":
                    self.assertIn("private_registry", key[1])  # #17523, expected
                    continue
                self.assertEqual(_counted(computed), _counted(shapes[key]), key)
                if computed["correctness"]["checked"]:
                    self.assertTrue(computed["correctness"]["passed"], computed["correctness"])

    def test_llama3_8b_sharded_setup_at_full_size(self):
        world = 2
        proc, report = _bench("-s", "sharded_setup", "-d", "sim", "--compute", "shapes",
                              "--preset", "llama3_8b")
        self.assertEqual(proc.returncode, 0, proc.stderr[-2000:])
        variants = _variants(report)
        params = sum(_LLAMA3_8B_UNITS)
        self.assertEqual(params, 8_030_261_248)
        fp32 = 4 * params
        padded = sum(_padded(n, world) for n in _LLAMA3_8B_UNITS)

        def phase(variant: str, name: str, figure: str) -> float:
            return variants[("sharded_setup", variant)]["phases"][name][figure]

        for rank in range(world):
            full, meta, bcast = (f"rank{rank}/{v}" for v in
                                 ("full_then_shard", "meta_init", "rank0_broadcast"))
            # #8722: every rank holds the whole float32 model on the host, then on the device.
            self.assertEqual(phase(full, "setup.model", "host_memory.peak_bytes"), fp32)
            self.assertEqual(phase(full, "setup", "h2d.bytes"), fp32)
            self.assertGreaterEqual(phase(full, "setup", "memory.peak_bytes"), fp32)
            # On meta: nothing on the host, no copy; a rank's shard and one unit at a time.
            self.assertEqual(phase(meta, "setup.model", "host_memory.peak_bytes"), 0)
            self.assertEqual(phase(meta, "setup", "h2d.bytes"), 0)
            # (the largest unit: the embedding, and its flat copy)
            largest = 4 * max(_LLAMA3_8B_UNITS)
            self.assertAlmostEqual(phase(meta, "setup", "memory.peak_bytes"),
                                   4 * padded // world + 2 * largest, delta=1 << 20)
            # Rank 0 builds and copies; every rank receives the model by broadcast.
            self.assertEqual(phase(bcast, "setup.model", "host_memory.peak_bytes"),
                             fp32 if rank == 0 else 0)
            self.assertEqual(phase(bcast, "setup", "h2d.bytes"), fp32 if rank == 0 else 0)
            self.assertEqual(phase(bcast, "setup", "collective.bytes"), fp32)
            for v in (full, meta, bcast):
                total = variants[("sharded_setup", v)]["total"]
                # FSDP's step: each unit gathered (bf16) for its forward and its backward, its
                # float32 gradient reduce-scattered once.
                self.assertEqual(total["collective.all_gather.count"], 2 * len(_LLAMA3_8B_UNITS))
                self.assertEqual(total["collective.all_gather.bytes"], 2 * 2 * padded // world)
                self.assertEqual(total["collective.reduce_scatter.count"], len(_LLAMA3_8B_UNITS))
                self.assertEqual(total["collective.reduce_scatter.bytes"], 4 * padded)

    def test_llama3_8b_engine_reuse_at_full_size(self):
        proc, report = _bench("-s", "engine_reuse", "-d", "sim", "--compute", "shapes",
                              "--preset", "llama3_8b")
        self.assertEqual(proc.returncode, 0, proc.stderr[-2000:])
        variants = _variants(report)
        self.assertEqual(variants[("engine_reuse", "new_engine_private_registry")]["status"],
                         "expected_failure")
        reused = variants[("engine_reuse", "rank0/reuse_engine")]
        per_stage = variants[("engine_reuse", "rank0/new_engine_per_stage")]
        self.assertEqual(reused["total"]["engines.built"], 1)
        self.assertEqual(per_stage["total"]["engines.built"], 3)
        self.assertGreater(per_stage["total"]["hooks.calls"], reused["total"]["hooks.calls"])
        # The optimizer's set-up (DeepSpeed's) takes the rank's float32 shards out to the host
        # and back: in the first stage's set-up for one engine, in fit's for an engine a stage.
        shards = 4 * sum(_padded(n, 2) for n in _LLAMA3_8B_UNITS) // 2
        self.assertEqual(reused["phases"]["setup.validate"]["d2h.bytes"], shards)
        self.assertEqual(per_stage["phases"]["setup.fit"]["d2h.bytes"], shards)
        self.assertEqual(per_stage["phases"]["setup.fit"]["h2d.bytes"], shards)

    def test_llama3_8b_is_refused_computed_on_sim(self):
        proc, _ = _bench("-s", "sharded_setup", "-d", "sim", "--preset", "llama3_8b")
        self.assertEqual(proc.returncode, 2, proc.stderr[-2000:])
        self.assertIn("--compute shapes", proc.stderr)
        proc, _ = _bench("-s", "resume_adam", "-d", "sim", "--preset", "llama3_8b")
        self.assertEqual(proc.returncode, 2, proc.stderr[-2000:])
        self.assertIn("sharded_setup and engine_reuse only", proc.stderr)


if __name__ == "__main__":
    unittest.main()

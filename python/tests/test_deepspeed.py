"""Real DeepSpeed (ZeRO stage 3) on 2 sim ranks, counted: ``deepspeed.initialize`` itself, and
Lightning's DeepSpeedStrategy running ``trainer.validate(model)`` then ``trainer.fit(model)``
(Lightning #17523, examples/programs/lightning_deepspeed.py) against the C++ model of that seed,
``bench -s engine_reuse`` (new_engine_per_stage), per rank: what matches is asserted, what differs
is printed and explained (docs/scenarios.md, "engine_reuse against DeepSpeed").

Needs DeepSpeed (python/requirements-extra.txt; scripts/test_python.sh installs it)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import warnings

import pytest
import torch

try:
    import deepspeed  # noqa: F401
except ImportError as e:  # skipped loudly: a warning in pytest's summary, and the skip's reason
    _why = (f"DeepSpeed is not importable ({e}): the DeepSpeed tests do not run. "
            "pip install -r python/requirements-extra.txt (scripts/test_python.sh does)")
    warnings.warn(_why)
    pytest.skip(_why, allow_module_level=True)

import ranks
from conftest import REPO

import harness_sim

PROGRAM = REPO / "examples" / "programs" / "lightning_deepspeed.py"


# --- deepspeed.initialize, ZeRO-3 ----------------------------------------------------------------
def _zero3(rank, world):
    os.environ["LOCAL_RANK"] = str(rank)
    import deepspeed
    from deepspeed.accelerator import get_accelerator

    import harness_sim.deepspeed
    harness_sim.deepspeed.install()
    model = ranks.mlp()
    config = {"train_micro_batch_size_per_gpu": 32, "zero_allow_untested_optimizer": True,
              "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0}}
    engine, _, _, _ = deepspeed.initialize(
        model=model, optimizer=torch.optim.Adam(model.parameters(), foreach=True), config=config,
        dist_init_required=False)
    g = torch.Generator().manual_seed(1)
    losses = []

    def step():
        x, y = (t.to(engine.device) for t in ranks.batch(g, rank))
        loss = torch.nn.functional.mse_loss(engine(x), y)
        engine.backward(loss)
        engine.step()
        losses.append(loss.item())

    for _ in range(2):  # DeepSpeed records its trace of the module in the first steps
        step()
    with harness_sim.count() as c:
        for _ in range(3):
            with c.step():
                step()
    with deepspeed.zero.GatheredParameters(list(model.parameters())):
        full = [p.detach().cpu().tolist() for p in model.parameters()]
    return {"accelerator": type(get_accelerator()).__name__, "device": str(engine.device),
            "collectives": {k: v["count"] / c.steps for k, v in c.collectives.items()},
            "shard": [tuple(p.ds_tensor.shape) for p in model.parameters()],
            "full": full, "losses": losses}


def test_deepspeed_zero3_trains_on_two_sim_ranks():
    r0, r1 = ranks.run(_zero3, timeout=300)
    for rank, r in enumerate((r0, r1)):
        assert r["accelerator"] == "SimAccelerator" and r["device"] == f"sim:{rank}"
        # Each rank holds half of every parameter tensor (ZeRO-3 partitions each one).
        assert r["shard"][0] == (32 * 64 // 2,)
        # Once DeepSpeed has recorded its trace of the module, one all-gather a step fetches
        # every parameter (its prefetch bucket, 5e7 elements, holds them all); the gradients are
        # reduce-scattered in one bucket, and the gradient norm is all-reduced.
        assert r["collectives"]["all_gather"] == 1
        assert r["collectives"]["reduce_scatter"] == 1
        assert r["collectives"]["all_reduce"] == 1
    assert r0["full"] == r1["full"]  # the gathered parameters are the same on both ranks
    assert r0["losses"][-1] < r0["losses"][0]


# --- Lightning's DeepSpeedStrategy: validate, then fit (#17523) ----------------------------------
@pytest.fixture(scope="module")
def lightning_run():
    """examples/programs/lightning_deepspeed.py under `python -m harness_sim run`: its RESULT lines
    by rank, and run's report."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "ds.json")
        r = subprocess.run([sys.executable, "-m", "harness_sim", "run", "--out", out, "--",
                            str(PROGRAM)], cwd=tmp, capture_output=True, text=True, timeout=600,
                           stdin=subprocess.DEVNULL)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        assert "2 ranks (the program started 1, each counted too)" in r.stderr
        results = {}
        for line in r.stdout.splitlines():
            if line.startswith("RESULT "):
                x = json.loads(line[len("RESULT "):])
                results[x["rank"]] = x
        with open(out) as f:
            report = json.load(f)
    return results, report


def test_lightning_deepspeed_validate_then_fit_runs_on_two_sim_ranks(lightning_run):
    results, report = lightning_run
    assert sorted(results) == [0, 1]
    for r in results.values():
        # DeepSpeed 0.16.9 keeps the in-flight registry on the module (DeepSpeed #3462): the
        # second engine recovers.
        assert r["error"] is None
        assert r["engines"] == 2  # a new engine for fit, over the module validate partitioned
        assert r["global_step"] == 10 and r["counts"]["fit.steps"]["steps"] == 10
        # The validate engine's hooks stay on the module through fit: Lightning clears them
        # before an evaluation engine only (remove_module_hooks).
        assert r["after"]["fit"]["hooks"] == 2 * r["after"]["validate"]["hooks"]
    assert report["provenance"]["world_size"] == 2


def test_lightning_deepspeed_against_engine_reuse(lightning_run, bench):
    """Per rank, stage by stage, against bench -s engine_reuse --variant new_engine_per_stage."""
    results, _ = lightning_run
    cpp = ranks.bench_variants(bench, "--scenario", "engine_reuse",
                               "--variant", "new_engine_per_stage")
    for rank, r in sorted(results.items()):
        v = cpp[f"rank{rank}/new_engine_per_stage"]
        total, per_step = v["total"], v["per_step"]
        phases = v["phases"]
        ds = r["counts"]
        steps = ds["fit.steps"]["steps"]
        ds_step = {k: n / steps for k, n in ds["fit.steps"]["collectives"].items()}
        print(f"rank {rank}: DeepSpeed per stage {json.dumps(ds)}")
        print(f"rank {rank}: DeepSpeed hooks {json.dumps(r['after'])}")
        print(f"rank {rank}: bench per step {json.dumps(per_step)}")
        print(f"rank {rank}: bench phases " + json.dumps(
            {p: {k: x for k, x in phases[p].items() if k.endswith('.count') and x}
             for p in ("setup.validate", "validate", "setup.fit")}))
        # What matches exactly.
        assert r["after"]["validate"]["hooks"] == total["hooks.after_validate"] == 47
        assert r["after"]["fit"]["hooks"] == total["hooks.after_fit"] == 94
        assert r["error"] is None and v["status"] == "ok"  # the second engine recovers
        assert steps == v["measured_steps"]
        # 10 all-gathers a training step on both sides, but not the same ones: DeepSpeed gathers
        # each of the 10 parameter tensors once (forward; kept for backward, max_reuse_distance),
        # the model each of its 5 flat units twice (forward and backward).
        assert ds_step["all_gather"] == per_step["collective.all_gather.count"] == 10
        # The fit engine's optimizer set-up: a barrier, then every parameter gathered
        # (stage3.py's _create_fp16_partitions_with_defragmentation) on both sides.
        assert ds["setup.fit"]["collectives"]["barrier"] >= phases["setup.fit"][
            "collective.barrier.count"] == 1
        assert ds["setup.fit"]["collectives"]["all_gather"] > 0
        assert phases["setup.fit"]["collective.all_gather.count"] > 0
        # What differs (docs/scenarios.md explains each): DeepSpeed reduce-scatters one bucket of
        # gradients a step (the model: one per unit); it leaves nothing in flight after the
        # validation pass, so its fit engine gathers every parameter tensor (the model: all but
        # the unit its wrapped prefetch left in flight); it syncs in every step (its trace
        # checks broadcast through the host, timers, the gradient norm), the model never.
        assert ds_step["reduce_scatter"] == 1 < per_step["collective.reduce_scatter.count"]
        assert ds["setup.fit"]["collectives"]["all_gather"] == 10
        assert phases["setup.fit"]["collective.all_gather.count"] == 4
        assert ds["fit.steps"]["syncs"] > 0 == per_step["sync.count"]

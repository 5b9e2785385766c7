"""Lightning #19955 with Lightning itself on sim (examples/lightning_resume_19955.py)."""
from __future__ import annotations

import pytest

import lightning_resume_19955 as example


def test_pre_2_4_resume_costs_two_syncs_per_parameter_tensor_per_step(tmp_path):
    results = example.run(steps=3)
    now = results["lightning_2.6_keeps_step_on_host"]
    before = results["lightning_pre_2.4_moves_step"]
    tensors = 2 * (len(example.WIDTHS) - 1)
    assert now.steps == before.steps == 3
    assert before.per_step("syncs") - now.per_step("syncs") == 2 * tensors
    assert before.per_step("d2h") - now.per_step("d2h") == 2 * tensors
    # The extra syncs are foreach Adam reading `step` back with .item(), inside the training step.
    sites = {(s.phase, s.op, s.reason): s for s in before.sync_sites}
    item = sites[("train.step", "aten::_local_scalar_dense", "item")]
    assert item.count == 2 * tensors * 3
    assert item.library.startswith("torch/optim/optimizer.py:") and "_get_value" in item.library
    # Steps without the pathology make no syncs at all: nothing else is counted.
    assert now.syncs == 0 and now.total["d2h"]["count"] == 0


def test_sim_accelerator_trains_and_moves_the_model(tmp_path):
    import torch
    model = example.Regression()
    before = [p.detach().clone() for p in model.parameters()]
    example.trainer(2, root=str(tmp_path)).fit(model, example.data(2))
    after = list(model.parameters())
    assert all(p.device.type in ("sim", "cpu") for p in after)
    assert any(not torch.equal(a.detach().cpu(), b) for a, b in zip(after, before))


def test_example_prints_the_difference(capsys):
    import sys
    argv, sys.argv = sys.argv, ["lightning_resume_19955.py", "--steps", "2"]
    try:
        assert example.main() == 0
    finally:
        sys.argv = argv
    out = capsys.readouterr().out
    assert "20 more syncs per step = 2 per parameter tensor per step" in out


@pytest.mark.parametrize("strategy", ["ddp", "auto"])
def test_lightning_ddp_on_two_sim_devices_as_lightning_starts_ranks(strategy):
    """strategy="ddp" (and "auto", which Lightning makes "ddp" for 2 devices): Lightning's own
    DDP (it starts rank 1 by running the script again) on sim:0 and sim:1, through harness_sim's
    c10d backend: the replicas end equal, and each rank counts its collectives (one gradient
    all-reduce per step, with Lightning's own)."""
    import json
    import os
    import subprocess
    import sys
    script = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "programs",
                          "lightning_ddp.py")
    r = subprocess.run([sys.executable, script, "--strategy", strategy], capture_output=True,
                       text=True, timeout=300, cwd=os.path.dirname(script))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    results = sorted((json.loads(line[len("RESULT "):]) for line in r.stdout.splitlines()
                      if line.startswith("RESULT ")), key=lambda x: x["rank"])
    assert [x["rank"] for x in results] == [0, 1]
    assert [x["device"] for x in results] == ["sim:0", "sim:1"]
    assert all(x["steps"] == 4 for x in results)
    assert results[0]["weights"] == results[1]["weights"]  # DDP kept the replicas equal
    assert results[0]["collectives"] == results[1]["collectives"]
    assert results[0]["collectives"]["all_reduce"]["count"] >= 4  # a gradient bucket per step

"""Programs not written for the harness, counted by `python -m harness_sim run`: Lightning's own
demos by accelerator name, and a loop written for CUDA (--as-cuda)."""
from __future__ import annotations

import json

import pytest

from conftest import REPO
from harness_sim._run import main as run

PROGRAMS = REPO / "examples" / "programs"


def _steps(path) -> dict:
    (scenario,) = json.loads(open(path).read())["scenarios"]
    return {v["name"]: v for v in scenario["variants"]}


def test_trainer_accelerator_sim_by_name():
    import harness_sim  # noqa: F401  (registers "sim" once Lightning is imported)
    from lightning.pytorch import Trainer
    from lightning.pytorch.accelerators import AcceleratorRegistry
    from lightning.pytorch.demos.boring_classes import BoringModel
    assert "sim" in AcceleratorRegistry
    model = BoringModel()
    trainer = Trainer(accelerator="sim", devices=1, max_steps=2, logger=False,
                      enable_checkpointing=False, enable_progress_bar=False,
                      enable_model_summary=False, limit_val_batches=0)
    trainer.fit(model)
    assert trainer.global_step == 2 and trainer.strategy.root_device.type == "sim"


def test_boring_model_per_step(tmp_path):
    out = tmp_path / "boring.json"
    assert run(["--out", str(out), "--skip-steps", "2", "--",
                str(PROGRAMS / "lightning_demos.py"), "--model", "boring"]) == 0
    steps = _steps(out)["steps"]
    assert steps["measured_steps"] == 6
    # Pinned: SGD on one Linear(32, 2), batch H2D each step, no sync in a training step; two
    # validation runs (2 batches each, every 4 steps) add their batches' H2D copies.
    assert steps["per_step"]["sync.count"] == 0
    assert steps["total"]["h2d.count"] == 8            # 6 training + 2 validation batches
    assert steps["total"]["launch.count"] == 66
    # Lightning's hooks are phases.
    assert {"training_step", "backward", "optimizer_step", "zero_grad",
            "validation", "validation_step"} <= set(steps["phases"])
    assert steps["phases"]["backward"]["launch.count"] > 0


def test_transformer_demo_on_random_tokens_steps_from_lightning(tmp_path):
    out = tmp_path / "transformer.json"
    assert run(["--out", str(out), "--steps-from", "lightning", "--", 
                str(PROGRAMS / "lightning_demos.py"), "--model", "transformer",
                "--max-steps", "3"]) == 0
    steps = _steps(out)["steps"]
    assert steps["measured_steps"] == 2
    # Pinned, and found by this test: the demo builds its causal mask on the host and copies it
    # in every forward (a blocking H2D), and nn.Transformer's _detect_is_causal_mask reads it
    # back (.item()): two syncs per step, both in training_step.
    assert steps["per_step"]["sync.count"] == 2
    assert steps["per_step"]["h2d.count"] == 3          # input and target tokens, the mask
    assert steps["per_step"]["launch.count"] == 420
    sites = {(s["phase"], s["op"], s["reason"]): s["count"] for s in steps["sync_sites"]}
    assert sites == {("training_step", "aten::_local_scalar_dense", "item"): 2,
                     ("training_step", "aten::copy_", "blocking copy H2D"): 2}


def test_cuda_loop_as_cuda(tmp_path, capsys):
    out = tmp_path / "cuda.json"
    assert run(["--as-cuda", "--out", str(out), "--", str(PROGRAMS / "cuda_loop.py")]) == 0
    printed = capsys.readouterr().out
    assert "True sim:0" in printed  # memory_allocated() > 0 and the model's device
    steps = _steps(out)["steps"]
    assert steps["measured_steps"] == 5
    sites = {(s["op"], s["reason"]): s["count"] for s in steps["sync_sites"]}
    assert sites == {("aten::_local_scalar_dense", "item"): 5,
                     ("aten::copy_", "blocking copy H2D"): 10,
                     ("aten::index", "boolean mask index: count read by the host (nonzero)"): 5,
                     # the mask index's backward (index_put_ with the mask) reads it again
                     ("aten::_index_put_impl_",
                      "boolean mask index: count read by the host (nonzero)"): 5}
    assert steps["per_step"]["sync.count"] == 5


@pytest.mark.parametrize("call, named", [
    ("torch.compile(torch.nn.Linear(2, 2))", "torch.compile"),
    ("torch.cuda.CUDAGraph()", "torch.cuda.CUDAGraph"),
    ("import triton", "import triton"),
])
def test_as_cuda_refuses_what_sim_cannot_run(tmp_path, capsys, call, named):
    prog = tmp_path / "p.py"
    prog.write_text(f"import torch\n{call}\n")
    assert run(["--as-cuda", "--", str(prog)]) == 3
    err = capsys.readouterr().err
    assert f"{named} is not supported on sim" in err

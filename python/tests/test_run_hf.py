"""Programs driven through Hugging Face's libraries as their users drive them, counted unchanged by
`python -m harness_sim run --as-cuda`: transformers' Trainer (examples/programs/hf_trainer.py)
and an Accelerate loop (examples/programs/accelerate_loop.py).

Each per-step sync pinned below is named by the library line that makes it on CUDA (transformers
5.24.0, accelerate 1.15.0: python/requirements-extra.txt); the line numbers are those releases',
so another release is skipped, naming the pins, rather than failed.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import REPO, site_counts

PROGRAMS = REPO / "examples" / "programs"
PINNED = {"transformers": "5.24.0", "accelerate": "1.15.0"}


def _library(name: str):
    module = pytest.importorskip(name, reason=f"{name}=={PINNED[name]} "
                                 "(python/requirements-extra.txt) is not installed")
    if module.__version__ != PINNED[name]:
        pytest.skip(f"the sync lines pinned here are {name} {PINNED[name]}'s "
                    f"(python/requirements-extra.txt); installed: {module.__version__}")
    return module


def _count(tmp_path, program: str):
    """`python -m harness_sim run --as-cuda --out` of PROGRAM, in a process of its own as a user
    runs it (sim serves CUDA): the report's counted steps, the line of every sync in them from
    the report's sites ((reason, "package/file.py:line in function") -> count), and the finished
    process (its stdout and stderr)."""
    out = tmp_path / "report.json"
    env = {k: v for k, v in os.environ.items() if k != "HARNESS_SIM_AS_CUDA"}
    r = subprocess.run([sys.executable, "-m", "harness_sim", "run", "--as-cuda", "--out", str(out),
                        "--", str(PROGRAMS / program)], cwd=REPO, env=env, capture_output=True,
                       text=True, timeout=600, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (scenario,) = json.loads(out.read_text())["scenarios"]
    steps = {v["name"]: v for v in scenario["variants"]}["steps"]
    lines = {}
    for site in steps["sync_sites"]:
        key = (site["reason"], site["frame"].removeprefix("examples/programs/"))
        lines[key] = lines.get(key, 0) + site["count"]
    return steps, lines, r


def test_transformers_trainer_bf16_llama_as_cuda(tmp_path):
    # Trainer(LlamaForCausalLM(2 layers, hidden 64), bf16=True, max_steps=6, logging_steps=2,
    # batch 4 x 32 random tokens): fused AdamW (Trainer's default optim with torch >= 2.8), grad
    # clipping at max_grad_norm=1.0, bf16 autocast from Accelerate.
    _library("transformers")
    steps, lines, captured = _count(tmp_path, "hf_trainer.py")
    assert "device cuda:0 steps 6" in captured.stdout
    # The summary lists each line on its own, the most frequent first.
    assert ("  sync sites in the 5 counted steps, by line:\n"
            "    10 x aten::_local_scalar_dense (item) in (none) at "
            "transformers/trainer.py:1919 in _run_epoch" in captured.stderr)
    assert steps["measured_steps"] == 5  # 6 optimizer steps, the first --skip-steps'
    total, per_step = steps["total"], steps["per_step"]
    # Every sync of a step, from transformers' and accelerate's own lines (5 counted steps):
    assert lines == {
        # trainer.py:1919 (Trainer._run_epoch, logging_nan_inf_filter=True by default):
        # `torch.isnan(tr_loss_step) or torch.isinf(tr_loss_step)`: Python's `or` takes bool()
        # of each device tensor: two .item()s, every step.
        ("item", "transformers/trainer.py:1919 in _run_epoch"): 10,
        # masking_utils.py:761 (find_packed_sequence_indices, from create_causal_mask's
        # _preprocess_mask_arguments:870: no attention mask, position_ids, no cache since
        # TrainingArguments.use_cache=False): `if ... (packed_sequence_mask[:, -1] == 0).all()`
        # reads a device bool: one .item() per forward.
        ("item", "transformers/masking_utils.py:761 in find_packed_sequence_indices"): 5,
        # trainer.py:2257 and :2264 (_maybe_log_save_evaluate, every logging_steps=2 steps):
        # `nested_gather(tr_loss).mean().item()` and `grad_norm.item()`: the logs after steps 2
        # and 4 fall in the counted steps 3 and 5; step 6's log comes after the last step.
        ("item", "transformers/trainer.py:2257 in _maybe_log_save_evaluate"): 2,
        ("item", "transformers/trainer.py:2264 in _maybe_log_save_evaluate"): 2,
        # accelerate/utils/operations.py:160 (send_to_device, from DataLoaderShard.__iter__,
        # data_loader.py:596): `tensor.to(device, non_blocking=False)` (Trainer's
        # accelerator_config non_blocking defaults to False): the pinned batch's input_ids and
        # labels are blocking H2D copies, which CUDA's copy_ ends with a stream synchronize.
        ("blocking copy H2D", "accelerate/utils/operations.py:160 in send_to_device"): 10,
    }
    # Not a sync: the clip (accelerator.clip_grad_norm_ -> torch.nn.utils.clip_grad_norm_,
    # error_if_nonfinite=False: _foreach_norm on the device), the loss count of
    # _get_num_items_in_batch (labels.ne(-100).sum() stays on the device), fused AdamW.
    assert site_counts(steps, "op", "reason") == {("aten::_local_scalar_dense", "item"): 19,
                                                  ("aten::copy_", "blocking copy H2D"): 10}
    # The blocking copies are copy sites too, at the same line.
    assert [(c["kind"], c["how"], c["frame"], c["count"]) for c in steps["copy_sites"]] == [
        ("H2D", "blocking", "accelerate/utils/operations.py:160 in send_to_device", 10)]
    assert total["sync.count"] == 29 and per_step["sync.count"] == pytest.approx(5.8)
    assert total["h2d.count"] == 10 and per_step["h2d.count"] == 2   # input_ids, labels
    assert total["d2h.count"] == 19 and per_step["d2h.count"] == pytest.approx(3.8)  # the .item()s
    assert total["d2d.count"] == 0
    ops = steps["launches_by_op"]
    assert ops["aten::_fused_adamw_"] == 2 * 5   # two param groups: decay and no decay
    assert ops["aten::_foreach_norm"] == 5 and ops["aten::all"] == 5


def test_accelerate_bf16_loop_as_cuda(tmp_path):
    # Accelerator(mixed_precision="bf16"), prepare(model, AdamW, DataLoader, OneCycleLR),
    # accelerator.backward, clip_grad_norm_, gather for the accuracy; 6 steps, a log every 3.
    _library("accelerate")
    steps, lines, captured = _count(tmp_path, "accelerate_loop.py")
    assert "step 6 loss" in captured.stdout and "mixed precision bf16" in captured.stdout
    assert "10 x aten::copy_ (blocking copy H2D) in (none) at " in captured.stderr
    assert steps["measured_steps"] == 5
    total, per_step = steps["total"], steps["per_step"]
    assert lines == {
        # accelerate/utils/operations.py:160 (send_to_device, from DataLoaderShard.__iter__,
        # data_loader.py:596; DataLoaderConfiguration.non_blocking=False by default): the
        # batch's two tensors are blocking H2D copies, a stream synchronize each on CUDA.
        ("blocking copy H2D", "accelerate/utils/operations.py:160 in send_to_device"): 10,
        # the program's own log after step 3 (in counted step 4): mean_loss.item() and
        # correct.item(). Step 6's log is after the last step.
        ("item", "accelerate_loop.py:55 in <module>"): 1,
        ("item", "accelerate_loop.py:56 in <module>"): 1,
    }
    # Not a sync: accelerator.backward (loss.backward(); bf16 has no GradScaler), clip_grad_norm_
    # (unscale_gradients does nothing without a scaler; torch's clip_grad_norm_ with
    # error_if_nonfinite=False), AcceleratedOptimizer.step (no scaler: optimizer.step),
    # accelerator.gather on one process (returns its tensors), the accuracy kept on the device.
    assert site_counts(steps, "op", "reason") == {("aten::_local_scalar_dense", "item"): 2,
                                                  ("aten::copy_", "blocking copy H2D"): 10}
    assert total["sync.count"] == 12 and per_step["sync.count"] == pytest.approx(2.4)
    assert total["h2d.count"] == 10 and per_step["h2d.count"] == 2   # inputs, labels
    assert total["d2h.count"] == 2 and per_step["d2h.count"] == pytest.approx(0.4)
    assert total["d2d.count"] == 0
    ops = steps["launches_by_op"]
    assert ops["aten::_foreach_norm"] == 5 and ops["aten::argmax"] == 5
    assert ops["aten::native_layer_norm"] == 5   # LayerNorm stays float32 under bf16 autocast

#!/usr/bin/env python3
"""Lightning #19955 with Lightning itself, on the sim device, on a CPU-only machine.

Trains an MLP with foreach Adam for N steps under lightning.Trainer(accelerator=SimAccelerator()),
saves a checkpoint, and resumes it twice for N more steps:
  - with Lightning's current _optimizer_to_device, which leaves Adam's `step` on the host;
  - with the behaviour before Lightning 2.4, which moved `step` to the device as well.
Prints the D2H copies and syncs per step of the resumed steps: the pre-2.4 resume makes foreach
Adam read `step` back with .item(), 2 per parameter tensor per step.

    python examples/lightning_resume_19955.py [--steps N] [--out report.json]
"""
from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import tempfile
import warnings
from collections.abc import MutableMapping

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

import harness_sim
from harness_sim.lightning import CountingCallback, SimAccelerator

import lightning.pytorch as pl
import lightning.pytorch.strategies.strategy as lightning_strategy
from lightning.fabric.utilities.apply_func import move_data_to_device

WIDTHS = [32, 64, 64, 32, 16, 4]  # bench's `small` preset: 10 parameter tensors
BATCH = 64


class Regression(pl.LightningModule):
    def __init__(self):
        super().__init__()
        layers = []
        for i in range(len(WIDTHS) - 1):
            layers.append(torch.nn.Linear(WIDTHS[i], WIDTHS[i + 1]))
            if i + 2 < len(WIDTHS):
                layers.append(torch.nn.ReLU())
        self.layers = torch.nn.Sequential(*layers)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return F.mse_loss(self.layers(x), y)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-3, foreach=True)


def data(steps: int) -> DataLoader:
    gen = torch.Generator().manual_seed(7)
    x = torch.randn(steps * BATCH, WIDTHS[0], generator=gen)
    y = torch.randn(steps * BATCH, WIDTHS[-1], generator=gen)
    return DataLoader(TensorDataset(x, y), batch_size=BATCH)


def trainer(max_steps: int, callbacks=(), root: str = ".") -> pl.Trainer:
    return pl.Trainer(accelerator=SimAccelerator(), devices=1, max_steps=max_steps,
                      callbacks=list(callbacks), logger=False, enable_checkpointing=False,
                      enable_progress_bar=False, enable_model_summary=False,
                      default_root_dir=root)


def optimizer_to_device_before_2_4(optimizer, device) -> None:
    """Lightning < 2.4's _optimizer_to_device: every state tensor, `step` included."""
    for p, v in optimizer.state.items():
        if not isinstance(v, MutableMapping):
            optimizer.state[p] = move_data_to_device(v, device)
            continue
        for key, val in v.items():
            v[key] = move_data_to_device(val, device)


@contextlib.contextmanager
def lightning_before_2_4():
    current = lightning_strategy._optimizer_to_device
    lightning_strategy._optimizer_to_device = optimizer_to_device_before_2_4
    try:
        yield
    finally:
        lightning_strategy._optimizer_to_device = current


def resume_and_count(checkpoint: str, steps: int, root: str) -> harness_sim.Counts:
    counting = CountingCallback()
    torch.manual_seed(0)
    trainer(2 * steps, [counting], root).fit(Regression(), data(2 * steps), ckpt_path=checkpoint)
    return counting.counts


def run(steps: int) -> dict[str, harness_sim.Counts]:
    with tempfile.TemporaryDirectory() as root:
        torch.manual_seed(0)
        fresh = trainer(steps, root=root)
        fresh.fit(Regression(), data(2 * steps))
        checkpoint = os.path.join(root, f"step={steps}.ckpt")
        fresh.save_checkpoint(checkpoint)
        current = resume_and_count(checkpoint, steps, root)
        with lightning_before_2_4():
            before = resume_and_count(checkpoint, steps, root)
    return {"lightning_2.6_keeps_step_on_host": current, "lightning_pre_2.4_moves_step": before}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=5, help="steps before and after the resume")
    parser.add_argument("--out", help="also write a schema-v1 report (bench compare reads it)")
    args = parser.parse_args()
    warnings.filterwarnings("ignore", ".*does not have many workers.*")
    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)  # no banners
    results = run(args.steps)
    tensors = sum(1 for _ in Regression().parameters())
    print(f"Lightning {pl.__version__}, torch {torch.__version__}, sim device; foreach Adam, "
          f"{tensors} parameter tensors; {args.steps} steps counted after the resume")
    print(f"  {'resume':36} {'steps':>5} {'launch/step':>11} {'d2h/step':>8} {'sync/step':>9}")
    for name, c in results.items():
        print(f"  {name:36} {c.steps:5} {c.per_step('launches'):11g} {c.per_step('d2h'):8g} "
              f"{c.per_step('syncs'):9g}")
    now, before = results.values()
    extra = before.per_step("syncs") - now.per_step("syncs")
    print(f"  pre-2.4 resume: {extra:g} more syncs per step = {extra / tensors:g} per parameter "
          f"tensor per step")
    for site in before.sync_sites:
        print(f"    {site}")
    if args.out:
        harness_sim.write_report(args.out, results, scenario="lightning_resume_19955",
                                 description="Lightning #19955 with Lightning itself on sim")
    return 0


if __name__ == "__main__":
    sys.exit(main())

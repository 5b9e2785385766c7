"""self.log(..., sync_dist=True) every step all-reduces every step; log on epoch end instead.

Lightning reduces a value logged with sync_dist=True across ranks when it is logged for the step
(on_step=True): one all_reduce per step, per logged value, on top of DDP's gradient all-reduce.
Logged for the epoch only (on_step=False, on_epoch=True), it accumulates on each rank and is
reduced once, at the epoch's end. Both run here with Lightning's DDP on 2 sim ranks (Lightning
starts rank 1 by running this script again); rank 0 prints and writes the report.

Lightning's _sync_ddp also puts a barrier before each all_reduce: a host sync per step. Both
variants also show a cost of Lightning's DDP loop itself (2.6): every training batch it builds a
tensor on the device and broadcasts it from rank 0 (_broadcast_sigterm_tensor), then reads it
with .item(): a blocking H2D, a broadcast and a sync per batch."""
import argparse
import json
import os
import sys

import harness_sim  # registers accelerator "sim", and DDP on sim ranks (strategy "ddp")
from harness_sim.lightning import CountingCallback
from lightning.pytorch import Trainer, seed_everything
from lightning.pytorch.demos.boring_classes import BoringModel

STEPS = 10


class LoggingModel(BoringModel):
    def __init__(self, on_step: bool):
        super().__init__()
        self.on_step = on_step

    def training_step(self, batch, batch_idx):
        out = super().training_step(batch, batch_idx)
        self.log("train_loss", out["loss"], sync_dist=True, on_step=self.on_step,
                 on_epoch=not self.on_step)
        return out


def fit(on_step: bool) -> harness_sim.Counts:
    seed_everything(0, verbose=False)
    counting = CountingCallback()
    trainer = Trainer(accelerator="sim", devices=2, strategy="ddp", max_epochs=1,
                      limit_train_batches=STEPS, limit_val_batches=0, logger=False,
                      enable_checkpointing=False, enable_progress_bar=False,
                      enable_model_summary=False, callbacks=[counting])
    trainer.fit(LoggingModel(on_step))
    return counting.counts, trainer.global_rank


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", help="write a schema-v1 report of both variants here (rank 0)")
    args = parser.parse_args()
    if args.out:  # rank 1 is this script run again by Lightning: it must see the same path
        args.out = os.path.abspath(args.out)
        sys.argv[sys.argv.index("--out") + 1] = args.out
    counted = {}
    rank = 0
    for name, on_step in (("sync_dist_every_step", True), ("sync_dist_on_epoch_end", False)):
        counted[name], rank = fit(on_step)
    if rank != 0:
        return 0
    print(__doc__.strip().splitlines()[0])
    print(f"  {'variant':<24} {'all_reduce/step':>15} {'barrier/step':>12} {'sync/step':>9}"
          "  (rank 0)")
    for name, c in counted.items():
        per_step = {k: v["count"] / c.steps for k, v in c.collectives.items()}
        print(f"  {name:<24} {per_step.get('all_reduce', 0):>15g} {per_step.get('barrier', 0):>12g}"
              f" {c.per_step('syncs'):>9g}")
        for site in c.sync_sites:
            print(f"      {site}")
    if args.out:
        harness_sim.write_report(args.out, counted, scenario="pathology_sync_dist",
                                 description=__doc__.strip().splitlines()[0],
                                 measured_window=f"{STEPS} training batches of one epoch, and "
                                 "its end, on rank 0 of 2 (Lightning DDP on sim)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

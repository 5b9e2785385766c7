"""Lightning's DDP loop broadcasts a SIGTERM flag every step (Lightning #21487); every N steps is enough.

Lightning 2.6 (since #20825) starts every training batch under DDP with
_TrainingEpochLoop._broadcast_sigterm_tensor (loops/training_epoch_loop.py): a one-element tensor
made from the host on the device (a blocking H2D copy), a broadcast from rank 0, and .item() on the
result (a sync and a D2H copy) -- on every step, whether or not a SIGTERM came. Issue #21487 (open)
measured it as the GPU idling at each step's end; PR #21640 (open) proposes
Trainer(broadcast_sigterm_every_n_steps=N). Both run here with the released Lightning's own DDP on
2 sim ranks (Lightning starts rank 1 by running this script again): as released, and with the
broadcast made every N steps (the PR's setting, applied here by wrapping the loop's method, as it
is not released yet); rank 0 prints and writes the report."""
import argparse
import functools
import os
import sys

import harness_sim  # registers accelerator "sim", and DDP on sim ranks (strategy "ddp")
from harness_sim.lightning import CountingCallback
from lightning.pytorch import Callback, Trainer, seed_everything
from lightning.pytorch.demos.boring_classes import BoringModel

STEPS = 10
EVERY_N = 10


class BroadcastEveryNSteps(Callback):
    """What PR #21640's broadcast_sigterm_every_n_steps=N does: the epoch loop's SIGTERM broadcast
    on one batch in N (the first of each N), none on the others."""

    def __init__(self, every_n: int):
        self.every_n = every_n

    def on_train_start(self, trainer, pl_module):
        loop = trainer.fit_loop.epoch_loop
        original = loop._broadcast_sigterm_tensor
        calls = [0]

        @functools.wraps(original)
        def every_n():
            calls[0] += 1
            if (calls[0] - 1) % self.every_n == 0:
                original()

        loop._broadcast_sigterm_tensor = every_n


def fit(every_n: int | None):
    seed_everything(0, verbose=False)
    counting = CountingCallback()
    callbacks = [counting] + ([BroadcastEveryNSteps(every_n)] if every_n else [])
    trainer = Trainer(accelerator="sim", devices=2, strategy="ddp", max_epochs=1,
                      limit_train_batches=STEPS, limit_val_batches=0, logger=False,
                      enable_checkpointing=False, enable_progress_bar=False,
                      enable_model_summary=False, callbacks=callbacks)
    trainer.fit(BoringModel())
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
    for name, every_n in (("as_released", None), (f"broadcast_every_{EVERY_N}_steps", EVERY_N)):
        counted[name], rank = fit(every_n)
    if rank != 0:
        return 0
    print(__doc__.strip().splitlines()[0])
    print(f"  {'variant':<28} {'broadcast/step':>14} {'sync/step':>9} {'h2d/step':>8}"
          f" {'d2h/step':>8}  (rank 0)")
    for name, c in counted.items():
        broadcasts = c.collectives.get("broadcast", {}).get("count", 0) / c.steps
        print(f"  {name:<28} {broadcasts:>14g} {c.per_step('syncs'):>9g} {c.per_step('h2d'):>8g}"
              f" {c.per_step('d2h'):>8g}")
        for site in c.sync_sites:
            print(f"      {site}")
    if args.out:
        harness_sim.write_report(args.out, counted, scenario="pathology_lightning_sigterm",
                                 description=__doc__.strip().splitlines()[0],
                                 measured_window=f"{STEPS} training batches of one epoch, and "
                                 "its end, on rank 0 of 2 (Lightning DDP on sim)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

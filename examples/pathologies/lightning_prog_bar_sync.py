"""self.log(..., prog_bar=True) reads the value back every step, bar or no bar; keep it off the bar.

Lightning (2.6.6 here) builds the step's metrics (_ResultCollection.metrics) at least once every
training batch, and for each value logged with prog_bar=True converts it to a Python number there
(trainer/connectors/logger_connector/result.py, "populate progress_bar metrics. convert tensors to
numbers": .item(), a sync and a D2H copy) -- also with the progress bar turned off. With the bar on
(the default) the bar asks for the metrics again: a second read a step. Logged without prog_bar,
the value stays on the device. Lightning #21232 (open) reports these step syncs, which also keep
a step out of a CUDA graph. Both run here on a sim device with Lightning's own loop and its default
progress bar."""
import argparse
import sys

import harness_sim  # registers accelerator "sim"
from harness_sim.lightning import CountingCallback
from lightning.pytorch import Trainer, seed_everything
from lightning.pytorch.demos.boring_classes import BoringModel

STEPS = 10


class LoggingModel(BoringModel):
    def __init__(self, prog_bar: bool):
        super().__init__()
        self.prog_bar = prog_bar

    def training_step(self, batch, batch_idx):
        out = super().training_step(batch, batch_idx)
        self.log("train_loss", out["loss"], prog_bar=self.prog_bar)
        return out


def fit(prog_bar: bool) -> harness_sim.Counts:
    seed_everything(0, verbose=False)
    counting = CountingCallback()
    trainer = Trainer(accelerator="sim", devices=1, max_epochs=1, limit_train_batches=STEPS,
                      limit_val_batches=0, logger=False, enable_checkpointing=False,
                      enable_model_summary=False, callbacks=[counting])
    trainer.fit(LoggingModel(prog_bar))
    return counting.counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", help="write a schema-v1 report of both variants here")
    args = parser.parse_args()
    counted = {name: fit(prog_bar) for name, prog_bar in (("prog_bar_true", True),
                                                          ("prog_bar_false", False))}
    print(__doc__.strip().splitlines()[0])
    print(f"  {'variant':<16} {'sync/step':>9} {'D2H/step':>8}")
    for name, c in counted.items():
        print(f"  {name:<16} {c.per_step('syncs'):>9g} {c.per_step('d2h'):>8g}")
        for site in c.sync_sites:
            print(f"      {site}")
    if args.out:
        harness_sim.write_report(args.out, counted, scenario="pathology_lightning_prog_bar",
                                 description=__doc__.strip().splitlines()[0],
                                 measured_window=f"{STEPS} training batches of one epoch "
                                 "(Lightning on a sim device, progress bar on)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

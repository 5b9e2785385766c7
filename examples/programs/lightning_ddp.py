"""Lightning's BoringModel trained with DDP on 2 sim devices, started as Lightning starts ranks
(it runs this script again for rank 1); each rank counts its fit and prints what it counted.

    python examples/programs/lightning_ddp.py [--strategy ddp|auto|ddp_sim] [--max-steps N]

The strategy is Lightning's own name: "ddp" (the default here), "auto" (which Lightning turns
into "ddp" for several devices) and "ddp_sim" all train on sim ranks once harness_sim is
imported.
"""
import argparse
import json
import os
import sys

import harness_sim  # registers accelerator "sim", and DDP on sim ranks as "ddp" and "ddp_sim"
from lightning.pytorch import Trainer, seed_everything
from lightning.pytorch.demos.boring_classes import BoringModel

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--strategy", default="ddp")
    parser.add_argument("--max-steps", type=int, default=4)
    args = parser.parse_args()
    seed_everything(0, verbose=False)
    trainer = Trainer(accelerator="sim", devices=2, strategy=args.strategy, max_steps=args.max_steps,
                      limit_val_batches=0, logger=False, enable_checkpointing=False,
                      enable_progress_bar=False, enable_model_summary=False)
    model = BoringModel()
    with harness_sim.count() as c:
        trainer.fit(model)
    weights = [round(float(p.detach().sum()), 6) for p in model.parameters()]
    line = "RESULT " + json.dumps({"rank": trainer.global_rank, "steps": trainer.global_step,
                                   "device": str(trainer.strategy.root_device),
                                   "collectives": c.collectives, "syncs": c.syncs,
                                   "weights": weights}) + "\n"
    # One write of the whole line: both ranks share the pipe, and a write under PIPE_BUF bytes
    # is not interleaved with the other rank's (print's may be split).
    sys.stdout.flush()
    os.write(sys.stdout.fileno(), line.encode())

"""Lightning's BoringModel trained with DDP on 2 sim devices, started as Lightning starts ranks
(it runs this script again for rank 1); each rank counts its fit and prints what it counted.

    python examples/programs/lightning_ddp.py
"""
import json

import harness_sim  # registers accelerator "sim" and strategy "ddp_sim"
from lightning.pytorch import Trainer, seed_everything
from lightning.pytorch.demos.boring_classes import BoringModel

if __name__ == "__main__":
    seed_everything(0, verbose=False)
    trainer = Trainer(accelerator="sim", devices=2, strategy="ddp_sim", max_steps=4,
                      limit_val_batches=0, logger=False, enable_checkpointing=False,
                      enable_progress_bar=False, enable_model_summary=False)
    model = BoringModel()
    with harness_sim.count() as c:
        trainer.fit(model)
    weights = [round(float(p.detach().sum()), 6) for p in model.parameters()]
    print("RESULT " + json.dumps({"rank": trainer.global_rank, "steps": trainer.global_step,
                                  "device": str(trainer.strategy.root_device),
                                  "collectives": c.collectives, "syncs": c.syncs,
                                  "weights": weights}), flush=True)

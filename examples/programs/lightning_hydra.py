"""Lightning's BoringModel trained with DDP on 2 sim devices from a Hydra app, as the
lightning-hydra-template starts its training: Hydra parses the overrides, and Lightning starts
rank 1 with its Hydra command (the script with the same overrides, rank 0's run directory, no
output subdirectory). Each rank prints what it trained.

    python examples/programs/lightning_hydra.py [max_steps=N] [strategy=ddp] [hydra.run.dir=DIR]

Needs hydra-core (python/requirements-extra.txt).
"""
import json
import os
import sys
from dataclasses import dataclass

import harness_sim  # registers accelerator "sim", and DDP on sim ranks as "ddp" and "ddp_sim"
import hydra
from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from lightning.pytorch import Trainer, seed_everything
from lightning.pytorch.demos.boring_classes import BoringModel


@dataclass
class TrainConfig:
    devices: int = 2
    strategy: str = "ddp"
    max_steps: int = 4


ConfigStore.instance().store(name="train", node=TrainConfig)


@hydra.main(version_base="1.3", config_path=None, config_name="train")
def main(cfg: TrainConfig) -> None:
    seed_everything(0, verbose=False)
    trainer = Trainer(accelerator="sim", devices=cfg.devices, strategy=cfg.strategy,
                      max_steps=cfg.max_steps, limit_val_batches=0, logger=False,
                      enable_checkpointing=False, enable_progress_bar=False,
                      enable_model_summary=False)
    model = BoringModel()
    trainer.fit(model)
    weights = [round(float(p.detach().sum()), 6) for p in model.parameters()]
    line = "RESULT " + json.dumps({"rank": trainer.global_rank, "steps": trainer.global_step,
                                   "job": HydraConfig.get().job.name,
                                   "run_dir": HydraConfig.get().run.dir,
                                   "weights": weights}) + "\n"
    # One write of the whole line: both ranks share the pipe (see lightning_ddp.py).
    sys.stdout.flush()
    os.write(sys.stdout.fileno(), line.encode())


if __name__ == "__main__":
    main()

"""A LightningCLI program, as a user writes one: the model, its data and the Trainer are configured
from the command line (or a YAML file with --config), and nothing in it knows of the harness.
Lightning's own DemoModel (a Linear(32, 10), Adam) on its BoringDataModule (random 32-float
samples, batch size 1).

    python -m harness_sim run --steps-from lightning -- examples/programs/lightning_cli.py fit \\
        --trainer.accelerator sim --trainer.devices 1 --trainer.max_steps 8
    python examples/programs/lightning_cli.py fit --trainer.accelerator cpu --trainer.max_steps 8

LightningCLI needs jsonargparse[signatures] (python/requirements-extra.txt).
"""
from lightning.pytorch.cli import LightningCLI
from lightning.pytorch.demos.boring_classes import BoringDataModule, DemoModel


def main() -> None:
    LightningCLI(DemoModel, BoringDataModule)


if __name__ == "__main__":
    main()

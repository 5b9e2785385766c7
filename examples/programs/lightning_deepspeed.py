"""Lightning #17523 with the real libraries: ``trainer.validate(model)`` then ``trainer.fit(model)``
on one Trainer with Lightning's DeepSpeedStrategy (ZeRO stage 3) on 2 sim devices. Each rank
counts what each stage costs and prints it (a ``RESULT`` line of JSON); run it under
``python -m harness_sim run`` so that rank 0's report holds both ranks:

    python -m harness_sim run -o ds.json -- examples/programs/lightning_deepspeed.py
    python examples/programs/lightning_deepspeed.py [--stages validate,fit[,test]] [--steps N]

The model and sizes are bench's engine_reuse scenario's (``bench -s engine_reuse``, preset small):
the MLP 32-64-64-32-16-4 in a LightningModule, batch 64 over the 2 ranks, N = 10 training steps,
2 validation batches, Adam (foreach). ``DeepSpeedStrategy(stage=3)`` is Lightning's configuration
but for ``stage3_param_persistence_threshold``, 0 here: with DeepSpeed's default (1e5 elements),
which Lightning keeps, every parameter of this small MLP would stay whole on every rank and
nothing would be gathered, where engine_reuse gathers every Linear.

Counted per rank (StageCounts): each stage's set-up (where the strategy builds its DeepSpeed
engine), the validation and test passes, the training steps and the rest of each stage, apart;
after each stage, the engines the strategy has held and the hooks on the module. ``error`` is the
exception a stage raised (the #17523 crash was the second engine's), null when all ran.
"""
import argparse
import json
import os
import sys

import torch
from lightning.pytorch import Callback, LightningModule, Trainer, seed_everything
from lightning.pytorch.strategies import DeepSpeedStrategy
from torch.utils.data import DataLoader, TensorDataset

import harness_sim  # "sim" for Lightning; DeepSpeed on sim under `run` (or DS_ACCELERATOR=sim)

WIDTHS = [32, 64, 64, 32, 16, 4]
BATCH = 64  # over both ranks
VAL_BATCHES = 2


class Regression(LightningModule):
    def __init__(self):
        super().__init__()
        layers = []
        for i in range(len(WIDTHS) - 1):
            layers.append(torch.nn.Linear(WIDTHS[i], WIDTHS[i + 1]))
            if i < len(WIDTHS) - 2:
                layers.append(torch.nn.ReLU())
        self.layers = torch.nn.Sequential(*layers)

    def forward(self, x):
        return self.layers(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.mse_loss(self(x), y)

    def validation_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.mse_loss(self(x), y)

    test_step = validation_step

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-3, foreach=True)


def data(batches: int, seed: int) -> DataLoader:
    g = torch.Generator().manual_seed(seed)
    x, y = torch.randn(batches * BATCH, WIDTHS[0], generator=g), torch.randn(
        batches * BATCH, WIDTHS[-1], generator=g)
    return DataLoader(TensorDataset(x, y), batch_size=BATCH // 2, pin_memory=True)


def hooks_on(module: torch.nn.Module) -> dict:
    """The hooks on every module of the tree, by the function's name."""
    out: dict = {}
    for m in module.modules():
        for hooks in (m._forward_pre_hooks, m._forward_hooks, m._backward_hooks,
                      m._backward_pre_hooks):
            for fn in hooks.values():
                name = getattr(fn, "__qualname__", type(fn).__name__).replace(".<locals>", "")
                out[name] = out.get(name, 0) + 1
    return out


class StageCounts(Callback):
    """Counts each piece of a stage in a count() block of its own, summed by name (blocks, not
    phases: under `run`, Lightning's hooks are phases too): ``setup.<stage>`` from the Trainer's
    setup hook to the stage's first hook (where the strategy builds its DeepSpeed engine),
    ``validate`` / ``test`` (the passes), ``fit.steps`` (one counted step per training batch,
    from the first to the last) and ``<stage>.other`` (the rest of trainer.<stage>()). After each
    stage: the engine the strategy held and the hooks on the module."""

    def __init__(self):
        self.blocks: dict = {}
        self.block = None
        self.name = None
        self.step = None
        self.engines: list = []
        self.after: dict = {}

    def switch(self, name) -> None:
        self.stop()
        self.name, self.block = name, harness_sim.count()
        self.block.__enter__()

    def stop(self) -> None:
        if self.block is not None:
            self.block.__exit__(None, None, None)
            self.blocks.setdefault(self.name, []).append(self.block)
            self.block = None

    def setup(self, trainer, pl_module, stage) -> None:
        self.switch(f"setup.{_name(stage)}")

    def on_validation_start(self, trainer, pl_module) -> None:
        self.switch("validate")

    def on_validation_end(self, trainer, pl_module) -> None:
        self.switch("validate.other")

    def on_test_start(self, trainer, pl_module) -> None:
        self.switch("test")

    def on_test_end(self, trainer, pl_module) -> None:
        self.switch("test.other")

    def on_fit_start(self, trainer, pl_module) -> None:
        self.switch("fit.other")

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if self.name != "fit.steps":
            self.switch("fit.steps")
        self.step = self.block.step()
        self.step.__enter__()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self.step.__exit__(None, None, None)

    def on_train_end(self, trainer, pl_module) -> None:
        self.switch("fit.other")

    def teardown(self, trainer, pl_module, stage) -> None:
        engine = trainer.strategy.model
        if all(engine is not e for e in self.engines):
            self.engines.append(engine)
        hooks = hooks_on(pl_module)
        self.after[_name(stage)] = {"hooks": sum(hooks.values()), "hooks_by_function": hooks,
                                    "engine": type(engine).__name__, "engines": len(self.engines)}

    def figures(self) -> dict:
        out = {}
        for name, blocks in self.blocks.items():
            sums: dict = {"collectives": {}, "steps": 0}
            for c in blocks:
                t = c.total
                for k, v in t["collectives"].items():
                    sums["collectives"][k] = sums["collectives"].get(k, 0) + v["count"]
                for k in ("syncs", "launches"):
                    sums[k] = sums.get(k, 0) + t[k]
                for k in ("h2d", "d2h", "d2d"):
                    sums[k] = sums.get(k, 0) + t[k]["count"]
                sums["steps"] += c.steps
            out[name] = sums
        return out


def _name(stage) -> str:
    return getattr(stage, "value", stage)  # Lightning's TrainerFn: "fit", "validate", "test"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--stages", default="validate,fit", help="of validate, fit, test")
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    seed_everything(0, verbose=False)
    strategy = DeepSpeedStrategy(stage=3, logging_level=40)
    strategy.config["zero_optimization"]["stage3_param_persistence_threshold"] = 0  # see above
    trainer = Trainer(accelerator="sim", devices=2, strategy=strategy, max_steps=args.steps,
                      limit_val_batches=VAL_BATCHES, limit_test_batches=VAL_BATCHES,
                      num_sanity_val_steps=0, logger=False, enable_checkpointing=False,
                      enable_progress_bar=False, enable_model_summary=False)
    model = Regression()
    stages = StageCounts()
    trainer.callbacks.append(stages)
    error = None
    try:
        for stage in args.stages.split(","):
            stages.switch(f"{stage}.other")
            if stage == "validate":
                trainer.validate(model, dataloaders=data(VAL_BATCHES, 2), verbose=False)
            elif stage == "fit":
                trainer.fit(model, train_dataloaders=data(args.steps, 1))
            elif stage == "test":
                trainer.test(model, dataloaders=data(VAL_BATCHES, 3), verbose=False)
            else:
                raise SystemExit(f"unknown stage {stage!r}")
            stages.stop()
    except Exception as e:  # noqa: BLE001  (the second engine's failure is a result)
        stages.stop()
        error = f"{type(e).__name__}: {e}"
    line = "RESULT " + json.dumps({
        "rank": trainer.global_rank, "stages": args.stages.split(","), "error": error,
        "after": stages.after, "engines": len(stages.engines),
        "global_step": trainer.global_step, "counts": stages.figures()}) + "\n"
    sys.stdout.flush()
    os.write(sys.stdout.fileno(), line.encode())  # one write: both ranks share the pipe


if __name__ == "__main__":
    main()

"""Lightning's own demo models (lightning.pytorch.demos), trained by a plain Lightning script that
knows nothing of the harness: BoringModel, or the Transformer demo on random tokens.

    python -m harness_sim run -- examples/programs/lightning_demos.py --accelerator sim
    python examples/programs/lightning_demos.py --accelerator cpu     # the same on the CPU
"""
import argparse

import torch
from lightning.pytorch import Trainer, seed_everything
from lightning.pytorch.demos import LightningTransformer
from lightning.pytorch.demos.boring_classes import BoringModel
from torch.utils.data import DataLoader, Dataset


class RandomTokens(Dataset):
    """(input, target) pairs of random token ids, as WikiText2 would give, without the download."""

    def __init__(self, vocab: int, block: int, length: int):
        g = torch.Generator().manual_seed(0)
        self.data = torch.randint(vocab, (length, block + 1), generator=g)

    def __len__(self):
        return len(self.data)

    def __getitem__(self, i):
        return self.data[i, :-1], self.data[i, 1:]


class TransformerOnRandomTokens(LightningTransformer):
    """The demo as it is, but for its prepare_data, which downloads WikiText2."""

    def prepare_data(self) -> None:
        pass


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--model", choices=("boring", "transformer"), default="boring")
    p.add_argument("--accelerator", default="sim")
    p.add_argument("--devices", default="1")
    p.add_argument("--max-steps", type=int, default=8)
    args = p.parse_args()
    seed_everything(0, verbose=False)
    if args.model == "boring":
        model, loader = BoringModel(), None
    else:
        vocab = 64
        model = TransformerOnRandomTokens(vocab_size=vocab)
        loader = DataLoader(RandomTokens(vocab, block=16, length=256), batch_size=8)
    trainer = Trainer(accelerator=args.accelerator, devices=int(args.devices),
                      max_steps=args.max_steps, limit_val_batches=2, val_check_interval=4,
                      logger=False, enable_checkpointing=False, enable_progress_bar=False,
                      enable_model_summary=False)
    trainer.fit(model, train_dataloaders=loader)
    print(f"trained {trainer.global_step} steps on {trainer.strategy.root_device}")


if __name__ == "__main__":
    main()

"""A boolean-mask index in the loss syncs every step; torch.where keeps it on the device.

pred[mask] must know how many elements the mask selects before it can size its output: CUDA's
nonzero reads the count back to the host (cuda/Nonzero.cu), forward and backward. Weighting by
the mask (torch.where) computes the same mean with no read-back."""
import sys

import torch

import side_by_side as sbs


def make(masked_index: bool):
    def build():
        model = sbs.mlp()
        opt = torch.optim.Adam(model.parameters(), foreach=True)

        def step():
            x, y = sbs.batch()
            err = (model(x) - y) ** 2
            valid = y > 0  # only positive targets count
            if masked_index:
                loss = err[valid].mean()
            else:
                loss = torch.where(valid, err, 0.0).sum() / valid.sum().clamp(min=1)
            loss.backward()
            opt.step()
            opt.zero_grad()
        return step
    return build


if __name__ == "__main__":
    sys.exit(sbs.main(__doc__, {"boolean_mask_index": make(True), "torch_where": make(False)},
                      "pathology_mask_in_loss"))

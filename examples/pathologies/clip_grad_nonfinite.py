"""clip_grad_norm_(error_if_nonfinite=True) reads the norm back every step; the default does not.

To raise on a non-finite norm the host must see it: torch.nn.utils.clip_grad_norm_ checks
`total_norm.isnan() or total_norm.isinf()`, a bool of a device tensor (one .item()). With
error_if_nonfinite=False (the default) the clipping stays on the device."""
import sys

import torch

import side_by_side as sbs


def make(error_if_nonfinite: bool):
    def build():
        model = sbs.mlp()
        opt = torch.optim.Adam(model.parameters(), foreach=True)

        def step():
            x, y = sbs.batch()
            torch.nn.functional.mse_loss(model(x), y).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0,
                                           error_if_nonfinite=error_if_nonfinite)
            opt.step()
            opt.zero_grad()
        return step
    return build


if __name__ == "__main__":
    sys.exit(sbs.main(__doc__, {"error_if_nonfinite": make(True), "default": make(False)},
                      "pathology_clip_grad"))

"""AMP's GradScaler reads found_inf on the host every step; a fused optimizer does not.

With a for-loop or foreach optimizer, GradScaler.step() must decide on the host whether to skip
the step: it reads every device's found_inf with .item() (torch/amp/grad_scaler.py). A fused
optimizer (fused=True) declares _step_supports_amp_scaling and gets grad_scale and found_inf as
device tensors: its kernel skips the update itself, no read-back."""
import sys

import torch

import side_by_side as sbs


def make(fused: bool):
    def build():
        model = sbs.mlp()
        opt = torch.optim.Adam(model.parameters(), fused=fused, foreach=None if fused else True)
        scaler = torch.amp.GradScaler("sim")

        def step():
            x, y = sbs.batch()
            scaler.scale(torch.nn.functional.mse_loss(model(x), y)).backward()
            scaler.step(opt)
            scaler.update()
            opt.zero_grad()
        return step
    return build


if __name__ == "__main__":
    sys.exit(sbs.main(__doc__, {"foreach_adam": make(False), "fused_adam": make(True)},
                      "pathology_grad_scaler"))

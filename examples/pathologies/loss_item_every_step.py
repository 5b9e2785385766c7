"""loss.item() to log every step syncs every step; accumulate on the device, read every N.

On a GPU each .item() waits for all the work queued before it (one D2H and one sync); reading
the running sum once every 10 steps costs a tenth of that."""
import sys

import torch

import side_by_side as sbs

LOG_EVERY = 10


def make(read_every: int):
    def build():
        model = sbs.mlp()
        opt = torch.optim.Adam(model.parameters(), foreach=True)
        state = {"n": 0, "running": torch.zeros((), device="sim")}

        def step():
            x, y = sbs.batch()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
            state["running"] += loss.detach()
            state["n"] += 1
            if state["n"] % read_every == 0:
                state["logged"] = state["running"].item() / read_every  # the host reads it
                state["running"].zero_()
        return step
    return build


if __name__ == "__main__":
    sys.exit(sbs.main(__doc__, {"item_every_step": make(1), f"item_every_{LOG_EVERY}": make(LOG_EVERY)},
                      "pathology_loss_item"))

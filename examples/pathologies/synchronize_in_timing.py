"""torch.cuda.synchronize() to time each step stalls the host every step; time with events.

Written for CUDA, run with `python -m harness_sim run --as-cuda`, the synchronize is a sync on sim
too (here with torch.sim.synchronize, the same call). Recording events and reading their elapsed
time once at the end costs no sync per step."""
import sys
import time

import torch

import side_by_side as sbs


def make(synchronize: bool):
    def build():
        model = sbs.mlp()
        opt = torch.optim.Adam(model.parameters(), foreach=True)
        times = []

        def step():
            start = time.perf_counter()
            x, y = sbs.batch()
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
            opt.zero_grad()
            if synchronize:
                torch.sim.synchronize()  # torch.cuda.synchronize() in the original
            times.append(time.perf_counter() - start)
        return step
    return build


if __name__ == "__main__":
    sys.exit(sbs.main(__doc__, {"synchronize_every_step": make(True), "no_synchronize": make(False)},
                      "pathology_synchronize"))

"""A non-blocking copy back into a pageable buffer syncs every step; pinned buffers do not.

Batches come from pageable memory and predictions go back with non_blocking=True into a pageable
buffer: the copy back syncs every step; pinned buffers make both copies asynchronous.

A DataLoader without pin_memory hands over pageable tensors: `.to(device, non_blocking=True)` from
them is staged, not asynchronous (counted as pageable H2D), and a non-blocking copy into pageable
host memory returns only when it is done (cudaMemcpyAsync's rule: one sync). With pinned memory
both directions are truly asynchronous."""
import sys

import torch

import side_by_side as sbs


def make(pinned: bool):
    def build():
        model = sbs.mlp()
        opt = torch.optim.Adam(model.parameters(), foreach=True)
        host_x, host_y = torch.randn(64, 32), torch.randn(64, 4)
        preds = torch.empty(64, 4)
        if pinned:
            host_x, host_y, preds = host_x.pin_memory(), host_y.pin_memory(), preds.pin_memory()

        def step():
            x = host_x.to("sim", non_blocking=True)
            y = host_y.to("sim", non_blocking=True)
            out = model(x)
            torch.nn.functional.mse_loss(out, y).backward()
            opt.step()
            opt.zero_grad()
            preds.copy_(out.detach(), non_blocking=True)  # for the host's metrics
        return step
    return build


if __name__ == "__main__":
    sys.exit(sbs.main(__doc__, {"pageable": make(False), "pinned": make(True)},
                      "pathology_pageable_non_blocking"))

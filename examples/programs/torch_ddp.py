"""A plain PyTorch DDP training loop on sim devices, one process per rank as torchrun starts it
(rank r on sim:r, the process group from torchrun's environment); each rank prints what it
trained.

    torchrun --standalone --nproc-per-node 2 examples/programs/torch_ddp.py [--steps N]
    torchrun --standalone --nproc-per-node 2 -m harness_sim run --out ddp.json -- \\
        examples/programs/torch_ddp.py
"""
import argparse
import json
import os
import sys

import harness_sim  # noqa: F401  (registers the sim device, torch.sim and its c10d backend)
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=6)
    args = parser.parse_args()
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.sim.set_device(local_rank)
    device = torch.device("sim", local_rank)
    dist.init_process_group("cpu:gloo,sim:sim")
    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Sequential(
        torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1)).to(device))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    generator = torch.Generator().manual_seed(1 + dist.get_rank())
    for _ in range(args.steps):
        x = torch.randn(16, 32, generator=generator).to(device, non_blocking=True)
        y = torch.randn(16, 1, generator=generator).to(device, non_blocking=True)
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    weights = [round(float(p.detach().sum()), 6) for p in model.parameters()]
    line = "RESULT " + json.dumps({"rank": dist.get_rank(), "steps": args.steps,
                                   "weights": weights}) + "\n"
    sys.stdout.flush()
    os.write(sys.stdout.fileno(), line.encode())  # one write: the ranks share the pipe
    dist.destroy_process_group()

"""A DDP training loop written for CUDA, as torchrun starts it on a GPU machine: the NCCL process
group, torch.cuda.set_device(LOCAL_RANK), DistributedDataParallel(device_ids=[LOCAL_RANK]), a
DistributedSampler, and the loss averaged over ranks for the log (the idioms of PyTorch's
examples/distributed and of most DDP scripts). Count it without a GPU, every rank under run:

    torchrun --standalone --nproc-per-node 2 -m harness_sim run --as-cuda --out ddp.json -- \\
        examples/programs/cuda_ddp.py

Per step, on CUDA: DDP's gradient all-reduce (one bucket here) is a collective, waited for on
the device; the logged loss is all-reduced (a second collective) and read with .item() (one sync,
one D2H copy) every --log-every steps.
"""
import argparse
import json
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--log-every", type=int, default=2)
    args = parser.parse_args()
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")
    device = torch.device("cuda", local_rank)
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(96, 32), torch.randn(96, 1))
    sampler = DistributedSampler(data, shuffle=True, seed=0)
    loader = DataLoader(data, batch_size=8, sampler=sampler, pin_memory=True)
    model = DistributedDataParallel(torch.nn.Sequential(
        torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1)).to(device),
        device_ids=[local_rank])
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    step = 0
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for x, y in loader:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            loss = torch.nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            step += 1
            if step % args.log_every == 0:
                logged = loss.detach().clone()
                dist.all_reduce(logged, op=dist.ReduceOp.AVG)
                if dist.get_rank() == 0:
                    print(f"step {step} loss {logged.item():.4f}", flush=True)
    weights = [round(float(p.detach().sum()), 6) for p in model.parameters()]
    line = "RESULT " + json.dumps({"rank": dist.get_rank(), "steps": step, "weights": weights,
                                   "backend": str(dist.get_backend())}) + "\n"
    sys.stdout.flush()
    os.write(sys.stdout.fileno(), line.encode())  # one write: the ranks share the pipe
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

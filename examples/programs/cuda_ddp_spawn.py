"""DDP started as PyTorch's examples/imagenet starts it with --multiprocessing-distributed: the
main process spawns one worker per GPU with torch.multiprocessing.spawn, each joins an NCCL
process group by TCP (rank = its GPU), sets its device and trains DistributedDataParallel. Count
it without a GPU (every spawned worker counted, their reports merged as torchrun's ranks'):

    python -m harness_sim run --as-cuda --out ddp.json -- examples/programs/cuda_ddp_spawn.py

Per step, on CUDA: DDP's gradient all-reduce (one bucket here), waited for on the device.
"""
import argparse
import json
import os
import socket
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main_worker(gpu: int, ngpus: int, args: argparse.Namespace) -> None:
    dist.init_process_group("nccl", init_method=args.dist_url, world_size=ngpus, rank=gpu)
    torch.cuda.set_device(gpu)
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(64, 32), torch.randn(64, 1))
    sampler = DistributedSampler(data, shuffle=True, seed=0)
    loader = DataLoader(data, batch_size=8, sampler=sampler)
    model = DistributedDataParallel(torch.nn.Sequential(
        torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1)).cuda(gpu),
        device_ids=[gpu])
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
    steps = 0
    for x, y in loader:
        x, y = x.cuda(gpu, non_blocking=True), y.cuda(gpu, non_blocking=True)
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        steps += 1
    weights = [round(float(p.detach().sum()), 6) for p in model.parameters()]
    line = "RESULT " + json.dumps({"rank": dist.get_rank(), "steps": steps, "weights": weights,
                                   "device": str(next(model.parameters()).device)}) + "\n"
    sys.stdout.flush()
    os.write(sys.stdout.fileno(), line.encode())  # one write: the workers share the pipe
    dist.destroy_process_group()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--gpus", type=int, default=2, help="workers (default 2; the machine "
                                                          "may have more)")
    args = parser.parse_args()
    ngpus = min(args.gpus, torch.cuda.device_count())
    args.dist_url = f"tcp://127.0.0.1:{free_port()}"
    mp.spawn(main_worker, nprocs=ngpus, args=(ngpus, args))


if __name__ == "__main__":
    main()
